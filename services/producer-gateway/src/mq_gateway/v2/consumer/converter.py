"""A stored message (MessageExt, as a pop or a pull decodes it) as the v2 ``Message`` the SDKs read.

Mirrors org.apache.rocketmq.proxy.grpc.v2.common.GrpcConverter#buildMessage / #buildSystemProperties: user
properties without RocketMQ's reserved ones; tag; keys split on space; message_id = UNIQ_KEY (else the offset msg
id); body_digest MD5 upper-case hex; body_encoding IDENTITY (records are inflated when decoded, so a COMPRESSED
body arrives plain); message_type recomputed (TRAN_MSG -> TRANSACTION, DELAY / TIMER_* -> DELAY, __SHARDINGKEY ->
FIFO, else NORMAL); born / store timestamps and hosts; receipt_handle, queue_id, queue_offset, invisible_duration;
delivery_attempt = reconsume times + 1; message_group; delivery_timestamp from TIMER_DELIVER_MS, else TIMER_OUT_MS
(the due time the broker's timer kept on the re-stored message), else now + TIMER_DELAY_SEC / TIMER_DELAY_MS (as
the proxy). A retry-topic record shows its original topic (RETRY_TOPIC). Pure; any thread.
"""

from __future__ import annotations

import hashlib
import time
from typing import Final

from apache.rocketmq.v2 import definition_pb2
from google.protobuf import duration_pb2, timestamp_pb2
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst, MixAll
from mq_common.message_type import TopicMessageType
from mq_common.message_type import message_type_of as common_message_type_of

TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
BORN_HOST: Final = "__BORNHOST"
TRACE_CONTEXT: Final = "TRACE_CONTEXT"
DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"

# RocketMQ 5's reserved property names (MessageConst.STRING_HASH_SET) beyond mq_common's 4.x set: never shown to
# the SDK as user properties.
RESERVED_PROPERTIES: Final = MessageConst.RESERVED | frozenset(
    {
        "EXTEND_UNIQ_INFO",
        "INNER_NUM",
        "INNER_BASE",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "__transactionId__",
        "TRANSACTION_CHECK_TIMES",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "MSG_TYPE",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "PROPERTY_FORWARD_QUEUE_ID",
        "REDIRECT",
        "INNER_MULTI_DISPATCH",
        "INNER_MULTI_QUEUE_OFFSET",
        TRACE_CONTEXT,
        TIMER_DELAY_SEC,
        TIMER_DELIVER_MS,
        BORN_HOST,
        "BORN_TIMESTAMP",
        "__RMQ.TRANSIENT.",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        TIMER_DELAY_MS,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
    }
)
_DELAY_LEVEL: Final = MessageConst.DELAY_TIME_LEVEL
TIMER_OUT_MS: Final = MessageConst.TIMER_OUT_MS
_MD5: Final = definition_pb2.DigestType.MD5
_IDENTITY: Final = definition_pb2.Encoding.IDENTITY


def timestamp_of_ms(ms: int) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp of ``ms`` since the epoch."""
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=ms % 1000 * 1_000_000)


def duration_of_ms(ms: int) -> duration_pb2.Duration:
    """A protobuf Duration of ``ms``."""
    return duration_pb2.Duration(seconds=ms // 1000, nanos=ms % 1000 * 1_000_000)


def now_timestamp() -> timestamp_pb2.Timestamp:
    """The current wall-clock time as a protobuf Timestamp (the receive stream's closing delivery_timestamp)."""
    return timestamp_of_ms(int(time.time() * 1000))


def original_topic(message: MessageExt) -> str:
    """The topic the producer sent to: RETRY_TOPIC for a record stored on a ``%RETRY%`` topic, else its topic."""
    if message.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
        return message.properties.get(MessageConst.RETRY_TOPIC, message.topic)
    return message.topic


_V2_TYPES: Final = {
    TopicMessageType.TRANSACTION: definition_pb2.MessageType.TRANSACTION,
    TopicMessageType.DELAY: definition_pb2.MessageType.DELAY,
    TopicMessageType.FIFO: definition_pb2.MessageType.FIFO,
    TopicMessageType.NORMAL: definition_pb2.MessageType.NORMAL,
}


def message_type_of(properties: dict[str, str]) -> definition_pb2.MessageType.ValueType:
    """GrpcConverter's recomputed type (mq_common.message_type.message_type_of as a v2 MessageType)."""
    return _V2_TYPES[common_message_type_of(properties)]


def _host(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


def _delivery_ms(properties: dict[str, str]) -> int | None:
    """The delivery time of a stored message (module docstring), None without one or when it does not parse."""
    try:
        if TIMER_DELIVER_MS in properties:
            return int(properties[TIMER_DELIVER_MS])
        if TIMER_OUT_MS in properties:
            return int(properties[TIMER_OUT_MS])
        if TIMER_DELAY_SEC in properties:
            return int(time.time() * 1000) + int(properties[TIMER_DELAY_SEC]) * 1000
        if TIMER_DELAY_MS in properties:
            return int(time.time() * 1000) + int(properties[TIMER_DELAY_MS])
    except ValueError:
        return None
    return None


def fill_system_properties(
    system: definition_pb2.SystemProperties,
    message: MessageExt,
    receipt_handle: str = "",
    invisible_ms: int | None = None,
) -> None:
    """Set the v2 SystemProperties of ``message`` on ``system`` in place (see the module docstring);
    ``receipt_handle`` and ``invisible_ms`` only for a popped message. In place: no nested message is built and
    copied (this runs once per delivered message)."""
    props = message.properties
    system.keys.extend(message.keys)
    system.message_id = message.uniq_key or message.offset_msg_id
    system.body_digest.type = _MD5
    system.body_digest.checksum = hashlib.md5(message.body).hexdigest().upper()
    system.body_encoding = _IDENTITY
    system.message_type = message_type_of(props)
    _set_ms(system.born_timestamp, message.born_timestamp_ms)
    system.born_host = props.get(BORN_HOST) or _host(message.born_host)
    _set_ms(system.store_timestamp, message.store_timestamp_ms)
    system.store_host = _host(message.store_host)
    system.queue_id = message.queue_id
    system.queue_offset = message.queue_offset
    system.delivery_attempt = message.reconsume_times + 1
    tags = message.tags
    if tags is not None:
        system.tag = tags
    if receipt_handle:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        _set_ms(system.invisible_duration, invisible_ms)
    if MessageConst.SHARDING_KEY in props:
        system.message_group = props[MessageConst.SHARDING_KEY]
    if TRACE_CONTEXT in props:
        system.trace_context = props[TRACE_CONTEXT]
    delivery_ms = _delivery_ms(props)
    if delivery_ms is not None:
        _set_ms(system.delivery_timestamp, delivery_ms)
    if DLQ_ORIGIN_TOPIC in props and DLQ_ORIGIN_MESSAGE_ID in props:
        system.dead_letter_queue.topic = props[DLQ_ORIGIN_TOPIC]
        system.dead_letter_queue.message_id = props[DLQ_ORIGIN_MESSAGE_ID]


def _set_ms(target: timestamp_pb2.Timestamp | duration_pb2.Duration, ms: int) -> None:
    target.seconds = ms // 1000
    target.nanos = ms % 1000 * 1_000_000


def fill_message(
    target: definition_pb2.Message, message: MessageExt, receipt_handle: str = "", invisible_ms: int | None = None
) -> None:
    """Set the v2 Message of a decoded record (body already inflated) on an empty ``target`` in place, e.g. the
    ``message`` field of a response being built. Mirrors GrpcConverter#buildMessage."""
    target.topic.name = original_topic(message)
    target.user_properties.update({k: v for k, v in message.properties.items() if k not in RESERVED_PROPERTIES})
    fill_system_properties(target.system_properties, message, receipt_handle, invisible_ms)
    target.body = message.body


def message_to_v2(
    message: MessageExt, receipt_handle: str = "", invisible_ms: int | None = None
) -> definition_pb2.Message:
    """The v2 Message of a decoded record (:func:`fill_message` on a new Message)."""
    target = definition_pb2.Message()
    fill_message(target, message, receipt_handle, invisible_ms)
    return target
