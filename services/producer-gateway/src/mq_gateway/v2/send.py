"""v2 SendMessage: RocketMQ 5 messages through the gateway's producer core (retries, MQFaultStrategy, coalescing).

Request checks (every message before any is sent, so a bad request stores nothing), with the proxy's codes:
no messages or several topics MESSAGE_CORRUPTED 40016; illegal topic ILLEGAL_TOPIC 40002; no route
TOPIC_NOT_FOUND 40402 (no auto-create through v2); blank message_id ILLEGAL_MESSAGE_ID 40009; empty body
MESSAGE_BODY_EMPTY 41302, body over the limit MESSAGE_BODY_TOO_LARGE 41301; too many or too large user properties
MESSAGE_PROPERTIES_TOO_LARGE 43101; reserved user-property key ILLEGAL_MESSAGE_PROPERTY_KEY 40007; bad tag
ILLEGAL_MESSAGE_TAG 40004; bad key ILLEGAL_MESSAGE_KEY 40005; message_group too long ILLEGAL_MESSAGE_GROUP 40006;
type the topic does not accept MESSAGE_PROPERTY_CONFLICT_WITH_TYPE 40014 (the proxy's remark; the type as RocketMQ
derives it from the properties the message gets, mq_common.message_type; off with enable_topic_message_type_check
false); a delivery time too late, too far in the past or malformed ILLEGAL_DELIVERY_TIME 40012; a TRANSACTION
message with a delivery time MESSAGE_PROPERTY_CONFLICT_WITH_TYPE 40014; LITE / PRIORITY NOT_IMPLEMENTED 50100; a
GZIP body that does not inflate MESSAGE_CORRUPTED 40016.

Mapping (RMQ5-PROTOCOL.md section 5): message_id -> UNIQ_KEY, tag -> TAGS, keys -> KEYS, message_group ->
__SHARDINGKEY (and the sharding-key queue selector), delivery_timestamp -> TIMER_DELIVER_MS (ms; checked and read
as mq_gateway.v2.delivery_time says; the entry gets the timer's recall_handle), born_timestamp -> BORN_TIMESTAMP
(ms), born_host -> __BORNHOST (else the peer's address), trace_context -> TRACE_CONTEXT, delivery_attempt ->
RECONSUME_TIME, PGROUP = the topic; a TRANSACTION message gets TRAN_MSG=true (the producer core sends it with the
PREPARED sysflag: a half message) and orphaned_transaction_recovery_duration -> CHECK_IMMUNITY_TIME_IN_SECONDS (at most
MAX_TRANSACTION_RECOVERY_S), and its entry's transaction_id names the half message (mq_gateway.v2.transactions).
A GZIP body is inflated (at most the body limit) and stored as the plain body;
the producer core compresses large bodies itself. Runs on the gateway's asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.v2.producer.SendMessageActivity.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer import Message, SendResult, SendStatus
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.constants import MessageConst, is_client_forbidden_send_topic
from mq_common.errors import MQError, TopicNotExistError
from mq_common.logging import get_logger
from mq_common.message_id import decode_offset_msg_id
from mq_common.message_type import TopicMessageType, check_message_type
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code, V2Code, V2Error, status_of, v2_code_for
from mq_gateway.v2.delivery_time import delivery_ms_of, is_delivery_time_refusal
from mq_gateway.v2.limits import V2Limits
from mq_gateway.v2.route import TopicMessageTypes, check_topic_name
from mq_gateway.v2.transactions import TransactionId, encode_transaction_id

log = get_logger("mq_gateway.v2.send")
MessageType = definition_pb2.MessageType
# Enum values as plain ints (the enum wrapper's attribute lookup costs a microsecond per use on the hot path).
_UNSPECIFIED: Final = int(MessageType.MESSAGE_TYPE_UNSPECIFIED)
_NORMAL: Final = int(MessageType.NORMAL)
_FIFO: Final = int(MessageType.FIFO)
_DELAY: Final = int(MessageType.DELAY)
_GZIP: Final = int(definition_pb2.Encoding.GZIP)
_OK: Final = int(Code.OK)
NOT_YET: Final = "arrives with the message-types issue"
BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
BORN_HOST: Final = "__BORNHOST"
TRACE_CONTEXT: Final = "TRACE_CONTEXT"
# MessageConst.STRING_HASH_SET of RocketMQ 5: names a v2 user property may not use.
RESERVED_PROPERTY_KEYS: Final = MessageConst.RESERVED | frozenset(
    {
        "EXTEND_UNIQ_INFO", "DUP_INFO", "TRAN_PREPARED_QUEUE_OFFSET", "INSTANCE_ID", "CORRELATION_ID",
        "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
        "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", BORN_HOST, BORN_TIMESTAMP, "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
    }
)  # fmt: skip
_SEND_STATUS_CODE: Final[Mapping[SendStatus, V2Code]] = {
    SendStatus.SEND_OK: Code.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: v2_code_for(ResponseCode.FLUSH_DISK_TIMEOUT),
    SendStatus.FLUSH_SLAVE_TIMEOUT: v2_code_for(ResponseCode.FLUSH_SLAVE_TIMEOUT),
    SendStatus.SLAVE_NOT_AVAILABLE: v2_code_for(ResponseCode.SLAVE_NOT_AVAILABLE),
}
_OK_STATUS: Final = definition_pb2.Status(code=Code.OK, message="OK")
_TRANSACTION: Final = int(MessageType.TRANSACTION)
MAX_TRANSACTION_RECOVERY_S: Final = 3_600
"""ProxyConfig.maxTransactionRecoverySecond: the longest orphaned_transaction_recovery_duration honoured."""
_NOT_IMPLEMENTED_TYPES: Final = {
    MessageType.LITE: "LITE",
    MessageType.PRIORITY: "PRIORITY",
}


class Sender(Protocol):
    """The part of mq_client.producer.DefaultMQProducer SendMessage uses."""

    async def send(self, msg: Message, timeout_ms: int | None = None, *, checked: bool = False) -> SendResult: ...

    async def send_batch(
        self, msgs: Sequence[Message], timeout_ms: int | None = None
    ) -> list[SendResult | MQError]: ...


def _has_control_character(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``, ``unix:/path``)."""
    kind, _, address = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer
    return address.rsplit(":", 1)[0].strip("[]")


def message_type_of(sp: definition_pb2.SystemProperties) -> definition_pb2.MessageType.ValueType:
    """The message's type: the declared one, else derived (group FIFO, delivery time DELAY, else NORMAL)."""
    if sp.message_type != _UNSPECIFIED:
        return sp.message_type
    if sp.HasField("message_group"):
        return _FIFO  # type: ignore[return-value]
    if sp.HasField("delivery_timestamp"):
        return _DELAY  # type: ignore[return-value]
    return _NORMAL  # type: ignore[return-value]


def property_marks(sp: definition_pb2.SystemProperties) -> dict[str, str]:
    """The type-deciding properties a v2 message gets (TRAN_MSG for TRANSACTION, TIMER_DELIVER_MS for a
    delivery_timestamp, __SHARDINGKEY for a message_group), for mq_common.message_type's checks."""
    marks: dict[str, str] = {}
    if sp.message_type == MessageType.TRANSACTION:
        marks[MessageConst.TRANSACTION_PREPARED] = "true"
    if sp.HasField("delivery_timestamp"):
        marks[MessageConst.TIMER_DELIVER_MS] = ""
    if sp.HasField("message_group"):
        marks[MessageConst.SHARDING_KEY] = sp.message_group
    return marks


class SendMessageActivity:
    """Checks, converts and sends the messages of one SendMessage request."""

    def __init__(
        self, producer: Sender, routes: TopicRouteManager, message_types: TopicMessageTypes, limits: V2Limits
    ) -> None:
        self.producer = producer
        self.routes = routes
        self.message_types = message_types
        self.limits = limits

    async def send_message(
        self, request: service_pb2.SendMessageRequest, peer: str, timeout_ms: int | None
    ) -> service_pb2.SendMessageResponse:
        """One entry per message (status, message_id, offset, transaction_id); top-level status = the common code
        or MULTIPLE_RESULTS. A refused request answers the refusal at the top and in every entry. ``peer`` is the
        gRPC peer string (the born host of messages without one); ``timeout_ms`` the send budget."""
        messages = request.messages
        try:
            converted = await self._convert_all(messages, peer)
        except V2Error as exc:
            status = status_of(exc)
            entries = [service_pb2.SendResultEntry(status=status) for _ in messages]
            return service_pb2.SendMessageResponse(status=status, entries=entries)
        if len(converted) == 1:
            msg = converted[0]
            try:  # checked: _convert_all ran the proxy's checks, a superset of the producer's check_message
                outcome: SendResult | Exception = await self.producer.send(msg, timeout_ms, checked=True)
            except Exception as exc:  # the message answers its own failure; unexpected ones are logged
                outcome = exc
            entry = _entry(msg, outcome)
            return service_pb2.SendMessageResponse(status=entry.status, entries=[entry])
        try:
            outcomes: Sequence[SendResult | Exception] = await self.producer.send_batch(converted, timeout_ms)
        except Exception as exc:  # the whole request failed before any message went (state, flow control)
            outcomes = [exc] * len(converted)
        entries = [_entry(m, o) for m, o in zip(converted, outcomes, strict=True)]
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            top = entries[0].status
        else:
            top = definition_pb2.Status(code=Code.MULTIPLE_RESULTS, message="messages have different results")
        return service_pb2.SendMessageResponse(status=top, entries=entries)

    async def _convert_all(self, messages: Sequence[definition_pb2.Message], peer: str) -> list[Message]:
        if not messages:
            raise V2Error(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = messages[0].topic.name
        if any(m.topic.name != topic for m in messages):
            raise V2Error(Code.MESSAGE_CORRUPTED, "messages of one request must share their topic")
        check_topic_name(topic)
        if is_client_forbidden_send_topic(topic):
            raise V2Error(Code.ILLEGAL_TOPIC, f"cannot send to system topic {topic}")
        try:
            await self.routes.route(topic)
        except TopicNotExistError:
            raise V2Error(Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None
        topic_type = await self.message_types(topic)
        return [self._convert(m, topic, topic_type, peer) for m in messages]

    def _convert(self, msg: definition_pb2.Message, topic: str, topic_type: TopicMessageType, peer: str) -> Message:
        sp = msg.system_properties
        if not sp.message_id.strip():
            raise V2Error(Code.ILLEGAL_MESSAGE_ID, "message_id is blank")
        self._check_type(sp, topic, topic_type)
        body = self._body(msg.body, sp.body_encoding)
        self._check_properties(msg.user_properties, sp)
        group = sp.message_group if sp.HasField("message_group") else ""
        if group and (len(group.encode()) >= self.limits.max_message_group_size_bytes or _has_control_character(group)):
            raise V2Error(
                Code.ILLEGAL_MESSAGE_GROUP,
                f"message_group must be shorter than {self.limits.max_message_group_size_bytes} bytes, no control"
                " characters",
            )
        properties = dict(msg.user_properties)
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
        properties[MessageConst.PRODUCER_GROUP] = topic
        born = sp.born_timestamp
        properties[BORN_TIMESTAMP] = str(born.seconds * 1000 + born.nanos // 1_000_000)
        properties[BORN_HOST] = sp.born_host or peer_host(peer)
        if sp.HasField("trace_context") and sp.trace_context:
            properties[TRACE_CONTEXT] = sp.trace_context
        if sp.delivery_attempt > 0:
            properties[MessageConst.RECONSUME_TIME] = str(sp.delivery_attempt)
        tag = sp.tag if sp.HasField("tag") else ""
        if sp.message_type == _TRANSACTION:
            properties[MessageConst.TRANSACTION_PREPARED] = "true"
            if sp.HasField("orphaned_transaction_recovery_duration"):
                seconds = min(max(sp.orphaned_transaction_recovery_duration.seconds, 0), MAX_TRANSACTION_RECOVERY_S)
                properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
        if sp.HasField("delivery_timestamp"):  # a timer message: TIMER_DELIVER_MS, and a recall handle when stored
            deliver_ms = delivery_ms_of(sp.delivery_timestamp, self.limits.max_delay_time_ms, time.time_ns() // 10**6)
            return Message(topic, body, tag, tuple(sp.keys), properties, 0, group, deliver_time_ms=deliver_ms)
        return Message(topic, body, tag, tuple(sp.keys), properties, 0, group)

    def _check_type(self, sp: definition_pb2.SystemProperties, topic: str, topic_type: TopicMessageType) -> None:
        if self.limits.enable_topic_message_type_check:  # ProducerProcessor#sendMessage's validator
            remark = check_message_type(topic, topic_type, property_marks(sp))
            if remark is not None:
                raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, remark)
        kind = message_type_of(sp)
        if kind in _NOT_IMPLEMENTED_TYPES:
            name = _NOT_IMPLEMENTED_TYPES[kind]
            raise V2Error(Code.NOT_IMPLEMENTED, f"{name} messages are not supported yet: {NOT_YET}")
        if kind == _TRANSACTION and sp.HasField("delivery_timestamp"):
            raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a TRANSACTION message cannot have a delivery time")
        if (kind == _FIFO) != sp.HasField("message_group"):
            raise V2Error(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                "a FIFO message needs a message_group, others must not have one",
            )

    def _body(self, body: bytes, encoding: definition_pb2.Encoding.ValueType) -> bytes:
        limit = self.limits.max_message_size_bytes
        if encoding == _GZIP:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            try:
                body = inflater.decompress(body, limit + 1)
            except zlib.error as exc:
                raise V2Error(Code.MESSAGE_CORRUPTED, f"the GZIP body does not inflate: {exc}") from None
        if not body:
            raise V2Error(Code.MESSAGE_BODY_EMPTY, "message body is empty")
        if len(body) > limit:
            raise V2Error(Code.MESSAGE_BODY_TOO_LARGE, f"message body is larger than {limit} bytes")
        return body

    def _check_properties(self, user: Mapping[str, str], sp: definition_pb2.SystemProperties) -> None:
        limits = self.limits
        if len(user) > limits.user_property_max_num:
            raise V2Error(
                Code.MESSAGE_PROPERTIES_TOO_LARGE, f"more than {limits.user_property_max_num} user properties"
            )
        size = 0
        for name, value in user.items():
            if name in RESERVED_PROPERTY_KEYS or not name:
                raise V2Error(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {name!r} is used by the system")
            if _has_control_character(name) or _has_control_character(value):
                raise V2Error(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {name!r} has a control character")
            size += len(name) + len(value)
        if sp.HasField("tag"):
            tag = sp.tag
            if not tag.strip() or "|" in tag or _has_control_character(tag):
                raise V2Error(Code.ILLEGAL_MESSAGE_TAG, "the tag is blank or has '|' or a control character")
            size += len(tag)
        for key in sp.keys:
            if not key.strip() or _has_control_character(key):
                raise V2Error(Code.ILLEGAL_MESSAGE_KEY, "a key is blank or has a control character")
            size += len(key)
        if size > limits.max_user_property_size_bytes:
            raise V2Error(
                Code.MESSAGE_PROPERTIES_TOO_LARGE,
                f"user properties, tag and keys exceed {limits.max_user_property_size_bytes} bytes",
            )


def _entry(msg: Message, outcome: SendResult | Exception) -> service_pb2.SendResultEntry:
    """One message's SendResultEntry: its SendResult (status from the send status), or its error's v2 code."""
    msg_id = msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    if isinstance(outcome, Exception):
        if not isinstance(outcome, MQError):
            log.error("v2_send_failed", topic=msg.topic, exc_info=outcome)
        elif msg.deliver_time_ms and is_delivery_time_refusal(outcome):
            refused = definition_pb2.Status(code=Code.ILLEGAL_DELIVERY_TIME, message=outcome.remark)
            return service_pb2.SendResultEntry(status=refused, message_id=msg_id)
        return service_pb2.SendResultEntry(status=status_of(outcome), message_id=msg_id)
    code = _SEND_STATUS_CODE[outcome.send_status]
    status = _OK_STATUS if code == _OK else definition_pb2.Status(code=code, message=outcome.send_status.value)
    transaction_id = msg_id
    if MessageConst.TRANSACTION_PREPARED in msg.properties:
        transaction_id = encode_transaction_id(
            TransactionId(
                outcome.message_queue.broker_name,
                decode_offset_msg_id(outcome.offset_msg_id)[2],
                outcome.queue_offset,
                msg_id,
            )
        )
    return service_pb2.SendResultEntry(
        status=status,
        message_id=msg_id,
        transaction_id=transaction_id,
        offset=outcome.queue_offset,
        recall_handle=outcome.recall_handle,
    )
