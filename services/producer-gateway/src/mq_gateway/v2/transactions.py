"""v2 EndTransaction (and the RecallMessage fallback): commit or roll back a half message.

The gateway keeps no transaction state, so any replica can end a transaction sent through any other: the
``transaction_id`` a TRANSACTION message's SendResultEntry carries names where its half message lies — URL-safe
Base64 of ``v1 <brokerName> <commitLogOffset> <tranStateTableOffset> <UNIQ_KEY>`` (:func:`encode_transaction_id`; the
5.0 proxy's TransactionId encoded its broker and offsets the same way). EndTransaction decodes it, checks
message_id = its UNIQ_KEY, and the producer core calls the broker's END_TRANSACTION on the master of that broker
(producer group = the topic, as the proxy's PGROUP; source SOURCE_SERVER_CHECK -> fromTransactionCheck).

Codes: a blank, undecodable or foreign transaction_id, or one whose UNIQ_KEY is not message_id,
INVALID_TRANSACTION_ID 40008; an illegal topic ILLEGAL_TOPIC 40002; resolution unspecified OK and nothing changes
(the transaction stays open until it is checked back, as the proxy's TRANSACTION_NOT_TYPE); the broker's SYSTEM_ERROR
(no such half message, another group, offset, id or topic) INVALID_TRANSACTION_ID 40008 with its remark;
ILLEGAL_OPERATION 604 (already committed, rolled back or discarded; too late) BAD_REQUEST 40000 with its remark;
others through :mod:`mq_gateway.v2.codes`. Runs on the gateway's asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.v2.transaction.EndTransactionActivity and
org.apache.rocketmq.proxy.processor.TransactionProcessor.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.constants import MessageSysFlag, is_client_forbidden_send_topic
from mq_common.errors import MQError
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code, V2Code, V2Error, ok_status, status_of
from mq_gateway.v2.context import ClientContext
from mq_gateway.v2.route import check_topic_name

END_TRANSACTION_TIMEOUT_MS: Final = 3_000
_VERSION: Final = "v1"
INVALID_TRANSACTION_ID: Final = "transaction id is invalid"
END_CODE_OVERRIDES: Final[Mapping[int, V2Code]] = MappingProxyType(
    {ResponseCode.SYSTEM_ERROR: Code.INVALID_TRANSACTION_ID, ResponseCode.ILLEGAL_OPERATION: Code.BAD_REQUEST}
)
_RESOLUTIONS: Final[Mapping[int, int]] = MappingProxyType(
    {
        int(definition_pb2.TransactionResolution.COMMIT): MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        int(definition_pb2.TransactionResolution.ROLLBACK): MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    }
)
_FROM_CHECK: Final = int(definition_pb2.TransactionSource.SOURCE_SERVER_CHECK)


@dataclass(frozen=True, slots=True)
class TransactionId:
    """Where a half message lies: ``broker_name``, its ``commit_log_offset``, its queue offset on
    RMQ_SYS_TRANS_HALF_TOPIC (``tran_state_table_offset``) and the producer's ``uniq_key``."""

    broker_name: str
    commit_log_offset: int
    tran_state_table_offset: int
    uniq_key: str


def encode_transaction_id(tid: TransactionId) -> str:
    """URL-safe Base64 (no padding) of ``v1 <brokerName> <commitLogOffset> <tranStateTableOffset> <UNIQ_KEY>``."""
    text = f"{_VERSION} {tid.broker_name} {tid.commit_log_offset} {tid.tran_state_table_offset} {tid.uniq_key}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_transaction_id(text: str) -> TransactionId:
    """The inverse of :func:`encode_transaction_id`. Raises ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError(INVALID_TRANSACTION_ID) from None
    parts = raw.split(" ")
    if len(parts) != 5 or parts[0] != _VERSION or not parts[1] or not parts[4]:
        raise ValueError(INVALID_TRANSACTION_ID)
    if not (parts[2].isdigit() and parts[3].isdigit()):
        raise ValueError(INVALID_TRANSACTION_ID)
    return TransactionId(parts[1], int(parts[2]), int(parts[3]), parts[4])


class TransactionEnder(Protocol):
    """The part of mq_client.producer.DefaultMQProducer EndTransaction uses."""

    async def end_transaction(
        self, topic: str, broker_name: str, header: EndTransactionRequestHeader, timeout_ms: int | None = None
    ) -> str: ...


def not_implemented(what: str) -> definition_pb2.Status:
    """``Status{NOT_IMPLEMENTED, "<what> is not served by this gateway"}``."""
    return definition_pb2.Status(code=Code.NOT_IMPLEMENTED, message=f"{what} is not served by this gateway")


class TransactionActivities:
    """EndTransaction over the producer core (``ender``; None: NOT_IMPLEMENTED), each call within ``timeout_ms``;
    RecallMessage NOT_IMPLEMENTED (the servicer serves it with mq_gateway.v2.recall when given one)."""

    def __init__(self, ender: TransactionEnder | None = None, timeout_ms: int = END_TRANSACTION_TIMEOUT_MS) -> None:
        self.ender = ender
        self.timeout_ms = timeout_ms

    async def end_transaction(
        self, request: service_pb2.EndTransactionRequest, ctx: ClientContext
    ) -> service_pb2.EndTransactionResponse:
        """``{status}``: OK, or the refusal (module docstring) in-band."""
        if self.ender is None:
            return service_pb2.EndTransactionResponse(status=not_implemented("EndTransaction"))
        topic = request.topic.name
        check_topic_name(topic)
        if is_client_forbidden_send_topic(topic):
            raise V2Error(Code.ILLEGAL_TOPIC, f"cannot end a transaction of system topic {topic}")
        if not request.transaction_id.strip():
            raise V2Error(Code.INVALID_TRANSACTION_ID, "transaction id is blank")
        try:
            tid = decode_transaction_id(request.transaction_id)
        except ValueError:
            raise V2Error(Code.INVALID_TRANSACTION_ID, INVALID_TRANSACTION_ID) from None
        if request.message_id and request.message_id != tid.uniq_key:
            raise V2Error(Code.INVALID_TRANSACTION_ID, "the transaction id is not the message's")
        kind = _RESOLUTIONS.get(int(request.resolution))
        if kind is None:
            return service_pb2.EndTransactionResponse(status=ok_status())  # unknown: checked back later
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=tid.tran_state_table_offset,
            commit_log_offset=tid.commit_log_offset,
            commit_or_rollback=kind,
            from_transaction_check=int(request.source) == _FROM_CHECK,
            msg_id=tid.uniq_key,
            transaction_id=tid.uniq_key,
            topic=topic,
        )
        try:
            await self.ender.end_transaction(topic, tid.broker_name, header, self.timeout_ms)
        except MQError as exc:
            return service_pb2.EndTransactionResponse(status=status_of(exc, END_CODE_OVERRIDES))
        return service_pb2.EndTransactionResponse(status=ok_status())

    async def recall_message(
        self, request: service_pb2.RecallMessageRequest, ctx: ClientContext
    ) -> service_pb2.RecallMessageResponse:
        return service_pb2.RecallMessageResponse(status=not_implemented("RecallMessage"))
