"""The rows of the ``rocketmq`` source: one per message, Kafka-like columns with RocketMQ's names.

| column          | type                | from (MessageExt)                                                   |
|-----------------|---------------------|---------------------------------------------------------------------|
| topic           | string              | topic                                                               |
| broker_name     | string              | the broker group of the queue                                       |
| queue_id        | int                 | queueId                                                             |
| queue_offset    | long                | queueOffset (the ConsumeQueue index; what offsets JSON names)       |
| msg_id          | string              | msgId: UNIQ_KEY when set (MessageClientExt#getMsgId), else offsetMsgId |
| keys            | string              | property KEYS (space-separated), null when absent                   |
| tag             | string              | property TAGS, null when absent                                     |
| body            | binary              | body (inflated when it was stored compressed)                       |
| properties      | map<string,string>  | the user properties (not RocketMQ's own: :data:`SYSTEM_PROPERTIES`)  |
| born_timestamp  | timestamp           | bornTimestamp (ms)                                                  |
| store_timestamp | timestamp           | storeTimestamp (ms)                                                 |

Pure functions; :func:`to_record_batch` runs on a Spark Python worker's task thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SOURCE_SCHEMA: Final = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("broker_name", StringType(), nullable=False),
        StructField("queue_id", IntegerType(), nullable=False),
        StructField("queue_offset", LongType(), nullable=False),
        StructField("msg_id", StringType(), nullable=False),
        StructField("keys", StringType()),
        StructField("tag", StringType()),
        StructField("body", BinaryType()),
        StructField("properties", MapType(StringType(), StringType(), valueContainsNull=True)),
        StructField("born_timestamp", TimestampType()),
        StructField("store_timestamp", TimestampType()),
    ]
)

SYSTEM_PROPERTIES: Final = MessageConst.RESERVED | {
    MessageConst.TRANSACTION_ID,
    MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS,
    MessageConst.TRANSACTION_CHECK_TIMES,
}
"""Properties RocketMQ itself sets (MessageConst.STRING_HASH_SET plus the transaction ones an exactly-once write
leaves): not in the ``properties`` column."""

_TS: Final = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("broker_name", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32(), nullable=False),
        pa.field("queue_offset", pa.int64(), nullable=False),
        pa.field("msg_id", pa.string(), nullable=False),
        pa.field("keys", pa.string()),
        pa.field("tag", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("born_timestamp", _TS),
        pa.field("store_timestamp", _TS),
    ]
)


def msg_id(message: MessageExt) -> str:
    """The client's message id: UNIQ_KEY when the producer set one, else the offset message id."""
    return message.uniq_key or message.offset_msg_id


def user_properties(message: MessageExt) -> list[tuple[str, str]]:
    """The message's properties that are not RocketMQ's own (:data:`SYSTEM_PROPERTIES`), sorted by name."""
    return sorted((k, v) for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES)


def to_record_batch(broker_name: str, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """``messages`` (of one queue of ``broker_name``) as a RecordBatch of :data:`ARROW_SCHEMA`."""
    props = [m.properties for m in messages]
    columns = [
        pa.array([m.topic for m in messages], pa.string()),
        pa.array([broker_name] * len(messages), pa.string()),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([msg_id(m) for m in messages], pa.string()),
        pa.array([p.get(MessageConst.KEYS) for p in props], pa.string()),
        pa.array([p.get(MessageConst.TAGS) for p in props], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([user_properties(m) for m in messages], pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp_ms * 1000 for m in messages], pa.int64()).cast(_TS),
        pa.array([m.store_timestamp_ms * 1000 for m in messages], pa.int64()).cast(_TS),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
