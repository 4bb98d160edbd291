"""A stored message (MessageExt, as a pop or a pull decodes it) as the v2 ``Message`` the SDKs read.

Mirrors org.apache.rocketmq.proxy.grpc.v2.common.GrpcConverter#buildMessage / #buildSystemProperties: user
properties without RocketMQ's reserved ones; tag; keys split on space; message_id = UNIQ_KEY (else the offset msg
id); body_digest MD5 upper-case hex; body_encoding IDENTITY (records are inflated when decoded, so a COMPRESSED
body arrives plain); message_type recomputed (TRAN_MSG -> TRANSACTION, DELAY / TIMER_* -> DELAY, __SHARDINGKEY ->
FIFO, else NORMAL); born / store timestamps and hosts; receipt_handle, queue_id, queue_offset, invisible_duration;
delivery_attempt = reconsume times + 1; message_group; delivery_timestamp from TIMER_DELIVER_MS (or now +
TIMER_DELAY_SEC). A retry-topic record shows its original topic (RETRY_TOPIC). Pure; any thread.
"""

from __future__ import annotations

import hashlib
import time
from typing import Final

from apache.rocketmq.v2 import definition_pb2
from google.protobuf import duration_pb2, timestamp_pb2
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst, MixAll

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
_DELAY_PROPERTIES: Final = (MessageConst.DELAY_TIME_LEVEL, TIMER_DELIVER_MS, TIMER_DELAY_SEC)


def timestamp_of_ms(ms: int) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp of ``ms`` since the epoch."""
    stamp = timestamp_pb2.Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def duration_of_ms(ms: int) -> duration_pb2.Duration:
    """A protobuf Duration of ``ms``."""
    duration = duration_pb2.Duration()
    duration.FromMilliseconds(ms)
    return duration


def now_timestamp() -> timestamp_pb2.Timestamp:
    """The current wall-clock time as a protobuf Timestamp (the receive stream's closing delivery_timestamp)."""
    return timestamp_of_ms(int(time.time() * 1000))


def original_topic(message: MessageExt) -> str:
    """The topic the producer sent to: RETRY_TOPIC for a record stored on a ``%RETRY%`` topic, else its topic."""
    if message.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
        return message.properties.get(MessageConst.RETRY_TOPIC, message.topic)
    return message.topic


def message_type_of(properties: dict[str, str]) -> definition_pb2.MessageType.ValueType:
    """GrpcConverter's recomputed type: TRANSACTION, DELAY, FIFO or NORMAL."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return definition_pb2.MessageType.TRANSACTION
    if any(name in properties for name in _DELAY_PROPERTIES):
        return definition_pb2.MessageType.DELAY
    if MessageConst.SHARDING_KEY in properties:
        return definition_pb2.MessageType.FIFO
    return definition_pb2.MessageType.NORMAL


def _host(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


def _delivery_ms(properties: dict[str, str]) -> int | None:
    try:
        if TIMER_DELAY_SEC in properties:
            return int(time.time() * 1000) + int(properties[TIMER_DELAY_SEC]) * 1000
        if TIMER_DELIVER_MS in properties:
            return int(properties[TIMER_DELIVER_MS])
    except ValueError:
        return None
    return None


def system_properties_of(
    message: MessageExt, receipt_handle: str = "", invisible_ms: int | None = None
) -> definition_pb2.SystemProperties:
    """The v2 SystemProperties of ``message`` (see the module docstring); ``receipt_handle`` and
    ``invisible_ms`` only for a popped message."""
    props = message.properties
    system = definition_pb2.SystemProperties(
        keys=message.keys,
        message_id=message.uniq_key or message.offset_msg_id,
        body_digest=definition_pb2.Digest(
            type=definition_pb2.DigestType.MD5, checksum=hashlib.md5(message.body).hexdigest().upper()
        ),
        body_encoding=definition_pb2.Encoding.IDENTITY,
        message_type=message_type_of(props),
        born_timestamp=timestamp_of_ms(message.born_timestamp_ms),
        born_host=props.get(BORN_HOST) or _host(message.born_host),
        store_timestamp=timestamp_of_ms(message.store_timestamp_ms),
        store_host=_host(message.store_host),
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        delivery_attempt=message.reconsume_times + 1,
    )
    if message.tags is not None:
        system.tag = message.tags
    if receipt_handle:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.CopyFrom(duration_of_ms(invisible_ms))
    if MessageConst.SHARDING_KEY in props:
        system.message_group = props[MessageConst.SHARDING_KEY]
    if TRACE_CONTEXT in props:
        system.trace_context = props[TRACE_CONTEXT]
    delivery_ms = _delivery_ms(props)
    if delivery_ms is not None:
        system.delivery_timestamp.CopyFrom(timestamp_of_ms(delivery_ms))
    if DLQ_ORIGIN_TOPIC in props and DLQ_ORIGIN_MESSAGE_ID in props:
        system.dead_letter_queue.topic = props[DLQ_ORIGIN_TOPIC]
        system.dead_letter_queue.message_id = props[DLQ_ORIGIN_MESSAGE_ID]
    return system


def message_to_v2(
    message: MessageExt, receipt_handle: str = "", invisible_ms: int | None = None
) -> definition_pb2.Message:
    """The v2 Message of a decoded record (body already inflated). Mirrors GrpcConverter#buildMessage."""
    user = {k: v for k, v in message.properties.items() if k not in RESERVED_PROPERTIES}
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=original_topic(message)),
        user_properties=user,
        system_properties=system_properties_of(message, receipt_handle, invisible_ms),
        body=message.body,
    )
