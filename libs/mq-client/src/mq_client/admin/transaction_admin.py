"""The admin client's transaction operations: list a topic's open transactions per broker, and tell a stored
message's transaction state.

RocketMQ's tools have neither (they only count half messages through the CID_RMQ_SYS_TRANS offsets):
``queryTransactions`` and the transaction rows of ``queryMsgById`` ask the broker's
TransactionAdmin.QueryOpenTransactions RPC (mq_client.transaction_admin_calls). Mixed into
mq_client.admin.admin_client.MQAdminClient. Runs on the caller's asyncio loop; errors are the typed
mq_common.errors.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageExt
from mq_common.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    MessageConst,
    MessageSysFlag,
    validate_topic,
)
from mq_common.errors import MQClientError, MQError
from mq_common.response_code import ResponseCode

from mq_client.admin.admin_base import AdminBase
from mq_client.transaction_admin_calls import (
    OpenTransaction,
    OpenTransactionsStatus,
    TransactionAdminCalls,
    TransactionState,
)

__all__ = [
    "BrokerOpenTransactions",
    "MessageTransaction",
    "OpenTransaction",
    "TransactionAdmin",
    "TransactionState",
    "is_transaction_message",
]

DEFAULT_MAX_NUM: Final = 1000
"""Transactions listed per broker unless asked otherwise (the broker's own default)."""
MAX_MAX_NUM: Final = 100_000
_TYPE_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


@dataclass(frozen=True, slots=True)
class BrokerOpenTransactions:
    """One broker group's answer for :meth:`TransactionAdmin.open_transactions`: its name, the address asked (the
    master, else the lowest broker id) and either ``status`` or ``error`` (``NAME (code): remark``)."""

    broker_name: str
    broker_addr: str
    status: OpenTransactionsStatus | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class MessageTransaction:
    """A stored message's transaction side: its real topic and UNIQ_KEY, the broker asked ("" when the message
    itself says: a committed message, one on TRANS_CHECK_MAX_TIME_TOPIC), its state (UNKNOWN when the broker could
    not say), the open ``transaction`` (age, check count) when OPEN, and, when the RPC failed, ``error``
    (``NAME (code): remark``)."""

    real_topic: str
    uniq_key: str
    broker_addr: str
    state: TransactionState
    transaction: OpenTransaction | None = None
    error: str = ""


def _transaction_type(message: MessageExt) -> int:
    return message.sys_flag & _TYPE_MASK


def is_transaction_message(message: MessageExt) -> bool:
    """True for a half message (stored on RMQ_SYS_TRANS_HALF_TOPIC), one moved to TRANS_CHECK_MAX_TIME_TOPIC, and
    a committed transaction message on its real topic (the TRANSACTION_COMMIT_TYPE sysflag)."""
    return (
        message.topic in (TRANS_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC)
        or _transaction_type(message) == MessageSysFlag.TRANSACTION_COMMIT_TYPE
    )


def _error_text(exc: MQError) -> str:
    return f"{ResponseCode.name_of(exc.code)} ({exc.code}): {exc.remark}"


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class TransactionAdmin(AdminBase):
    """Transaction operations of the admin client (see MQAdminClient, which mixes it in)."""

    @property
    def _transactions(self) -> TransactionAdminCalls:
        return TransactionAdminCalls(self._pool)  # holds only the pool: as cheap as a stub

    async def open_transactions(self, topic: str, max_num: int = DEFAULT_MAX_NUM) -> list[BrokerOpenTransactions]:
        """QueryOpenTransactions(``topic``, ``max_num``) on every broker group of ``topic``'s route (its master,
        else its lowest broker id), asked at once; one row per group, sorted by broker name. A broker that fails
        gives a row with ``error`` (a slave: SERVICE_NOT_AVAILABLE 14).

        Raises MQClientError INVALID_PARAMETER (29) for an illegal topic name or ``max_num`` outside
        [1, MAX_MAX_NUM]; TopicNotExistError (17) without a route; RemotingError when no name server answers; the
        first broker's error when every broker failed."""
        topic = topic.strip()
        remark = validate_topic(topic)
        if remark is not None:
            raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)
        if not 1 <= max_num <= MAX_MAX_NUM:
            raise MQClientError(f"maxNum {max_num} is out of range [1, {MAX_MAX_NUM}]", ResponseCode.INVALID_PARAMETER)
        route = await self.topic_route(topic)
        targets = sorted(
            (b.broker_name, addr) for b in route.broker_datas if (addr := b.select_broker_addr()) is not None
        )
        calls = [
            self._transactions.query_open_transactions(addr, topic, max_num, timeout_ms=self.timeout_ms)
            for _n, addr in targets
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        rows: list[BrokerOpenTransactions] = []
        errors: list[MQError] = []
        for (name, addr), outcome in zip(targets, outcomes, strict=True):
            if isinstance(outcome, MQError):
                errors.append(outcome)
                rows.append(BrokerOpenTransactions(name, addr, None, _error_text(outcome)))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                rows.append(BrokerOpenTransactions(name, addr, outcome))
        if errors and len(errors) == len(rows):
            raise errors[0]
        return rows

    async def message_transaction(self, message: MessageExt) -> MessageTransaction | None:
        """The transaction state of ``message`` (as :meth:`query_msg_by_id` read it); None when it is no
        transaction message (:func:`is_transaction_message`). A committed message on its real topic is COMMITTED and
        one on TRANS_CHECK_MAX_TIME_TOPIC CHECK_MAX (no call); a half message's state is asked of the broker that
        stored it with QueryOpenTransactions(topic=REAL_TOPIC, uniq_key=UNIQ_KEY). A failed call gives state
        UNKNOWN with ``error``; transport errors included (the message itself was read)."""
        if not is_transaction_message(message):
            return None
        props = message.properties
        uniq_key = message.uniq_key or ""
        real_topic = props.get(MessageConst.REAL_TOPIC) or message.topic
        if message.topic == TRANS_CHECK_MAX_TIME_TOPIC:
            return MessageTransaction(real_topic, uniq_key, "", TransactionState.CHECK_MAX)
        if message.topic != TRANS_HALF_TOPIC:
            return MessageTransaction(message.topic, uniq_key, "", TransactionState.COMMITTED)
        addr = _host_port(*message.store_host)
        try:
            status = await self._transactions.query_open_transactions(
                addr, real_topic, uniq_key=uniq_key, timeout_ms=self.timeout_ms
            )
        except MQError as exc:
            return MessageTransaction(real_topic, uniq_key, addr, TransactionState.UNKNOWN, error=_error_text(exc))
        return MessageTransaction(
            real_topic, uniq_key, addr, status.state or TransactionState.UNKNOWN, status.transaction
        )
