"""TransactionMQProducer: half message, local transaction, commit or roll back, and answers to check-backs.

Mirrors org.apache.rocketmq.client.producer.TransactionMQProducer and DefaultMQProducerImpl#{sendMessageInTransaction,
endTransaction, checkTransactionState}: :meth:`send_message_in_transaction` sends the message as a half message
(TRAN_MSG=true, PGROUP = the producer group: the producer core sends it with the PREPARED sysflag), runs the
listener's ``execute_local_transaction`` (an exception counts as UNKNOW), then ends the transaction on the half
message's broker (COMMIT_MESSAGE / ROLLBACK_MESSAGE; UNKNOW leaves it open for the check-back). The check-back
reaches this producer over mq_client.transaction_checks: it keeps one stream per broker master of the topics it sent
transactions to, registered for its producer group; each check runs ``check_local_transaction`` on the check copy
and answers with END_TRANSACTION (fromTransactionCheck). The listener's methods may be plain or async.
Runs on the caller's asyncio loop.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Awaitable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.logging import get_logger
from mq_common.message_id import decode_offset_msg_id
from mq_common.protocol.transaction import EndTransactionRequestHeader

from mq_client.producer.config import ProducerConfig
from mq_client.producer.message import Message
from mq_client.producer.producer import DefaultMQProducer
from mq_client.producer.send_result import SendResult
from mq_client.transaction_checks import TransactionCheck, TransactionCheckStreams

if TYPE_CHECKING:
    from mq_common.tls.settings import TlsClientConfig

log = get_logger("mq_client.producer.transaction")


class LocalTransactionState(Enum):
    """Mirrors org.apache.rocketmq.client.producer.LocalTransactionState."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
}


class TransactionListener(Protocol):
    """Mirrors org.apache.rocketmq.client.producer.TransactionListener (each may return an awaitable)."""

    def execute_local_transaction(
        self, msg: Message, arg: Any
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState | Awaitable[LocalTransactionState]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The half message's SendResult and what the local transaction said. Mirrors TransactionSendResult."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState


async def _call(value: LocalTransactionState | Awaitable[LocalTransactionState]) -> LocalTransactionState:
    return await value if inspect.isawaitable(value) else value


class TransactionMQProducer:
    """A DefaultMQProducer that sends transactions (see the module). ``pool`` carries the check streams."""

    def __init__(self, producer: DefaultMQProducer, listener: TransactionListener, pool: ChannelPool) -> None:
        self.producer = producer
        self.listener = listener
        self._topics: set[str] = set()
        group = producer.config.producer_group
        self.checks = TransactionCheckStreams(
            pool, f"{group}@{os.getpid()}@{id(self):x}", lambda: frozenset({group}), self._masters, self._on_check
        )
        self._pool = pool

    @classmethod
    def connect(
        cls,
        config: ProducerConfig,
        namesrv_addrs: Sequence[str],
        listener: TransactionListener,
        *,
        tls: TlsClientConfig | None = None,
    ) -> TransactionMQProducer:
        """Over gRPC, as DefaultMQProducer.connect, plus a pool for the check streams."""
        return cls(DefaultMQProducer.connect(config, namesrv_addrs, tls=tls), listener, ChannelPool(tls))

    async def start(self) -> None:
        await self.producer.start()
        self.checks.start()

    async def shutdown(self) -> None:
        await self.checks.stop()
        await self.producer.shutdown()
        await self._pool.close()

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Half message, local transaction, end (see the module). Raises as DefaultMQProducer.send for the half
        message; an EndTransaction failure is logged (the check-back resolves the transaction), as RocketMQ."""
        props = dict(msg.properties)
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        props[MessageConst.PRODUCER_GROUP] = self.producer.config.producer_group
        half = dataclasses.replace(msg, properties=props)
        self._topics.add(msg.topic)
        result = await self.producer.send(half)
        try:
            state = await _call(self.listener.execute_local_transaction(half, arg))
        except Exception:
            log.exception("local_transaction_failed", topic=msg.topic, msg_id=result.msg_id)
            state = LocalTransactionState.UNKNOW
        end_type = _END_TYPE.get(state)
        if end_type is not None:
            header = EndTransactionRequestHeader(
                producer_group=self.producer.config.producer_group,
                tran_state_table_offset=result.queue_offset,
                commit_log_offset=decode_offset_msg_id(result.offset_msg_id)[2],
                commit_or_rollback=end_type,
                msg_id=result.msg_id,
                transaction_id=result.msg_id,
                topic=msg.topic,
            )
            try:
                await self.producer.end_transaction(msg.topic, result.message_queue.broker_name, header)
            except Exception as exc:
                log.warning("end_transaction_failed", topic=msg.topic, msg_id=result.msg_id, error=str(exc))
        return TransactionSendResult(result, state)

    async def _masters(self) -> set[str]:
        found: set[str] = set()
        for topic in list(self._topics):
            try:
                route = await self.producer.routes.route(topic)
            except Exception:
                continue
            found.update(a for a in (bd.master_addr() for bd in route.broker_datas) if a)
        return found

    async def _on_check(self, check: TransactionCheck) -> None:
        """DefaultMQProducerImpl#checkTransactionState: ask the listener, answer the broker (UNKNOW: no answer)."""
        if check.message is None:
            return
        try:
            state = await _call(self.listener.check_local_transaction(check.message))
        except Exception:
            log.exception("check_local_transaction_failed", msg_id=check.msg_id)
            return
        end_type = _END_TYPE.get(state)
        if end_type is None:
            return
        header = EndTransactionRequestHeader(
            producer_group=check.producer_group,
            tran_state_table_offset=check.tran_state_table_offset,
            commit_log_offset=check.commit_log_offset,
            commit_or_rollback=end_type,
            from_transaction_check=True,
            msg_id=check.msg_id,
            transaction_id=check.transaction_id,
            topic=check.topic,
        )
        await self.producer.end_transaction(check.topic, check.broker_name, header)


__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionMQProducer",
    "TransactionSendResult",
]
