"""What the producer core and the pull consumer send to and get from a broker (no protobuf here).

Mirrors SendMessageRequestHeader / SendMessageResponseHeader (single and batch), org.apache.rocketmq.client.
consumer.PullResult and org.apache.rocketmq.client.QueryResult. mq_client.broker_client translates them to
and from mq.broker.v1. Frozen and slotted: safe to share between tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq_common.codec import MessageExt
from mq_common.protocol import PullStatus


@dataclass(frozen=True, slots=True)
class BrokerSendRequest:
    """One message to store. Mirrors SendMessageRequestHeader + body.

    ``properties`` is RocketMQ's property string (mq_common.codec.encode_properties); ``born_host`` is
    ``"ip:port"`` or empty (the broker then uses the peer address).
    """

    producer_group: str
    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp_ms: int
    flag: int
    properties: str
    body: bytes
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    reconsume_times: int = 0
    born_host: str = ""


@dataclass(frozen=True, slots=True)
class BrokerSendResponse:
    """A broker's answer to one BrokerSendRequest. Mirrors SendMessageResponseHeader.

    ``code`` 0 = SUCCESS; FLUSH_DISK_TIMEOUT (10), FLUSH_SLAVE_TIMEOUT (12), SLAVE_NOT_AVAILABLE (11) are
    stored-but-not-durable outcomes; any other non-zero code means the message was not stored.
    """

    code: int
    remark: str
    msg_id: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class BrokerBatchRequest:
    """One MessageBatch for one queue. Mirrors SEND_BATCH_MESSAGE's SendMessageRequestHeader + body.

    ``body`` holds every message, encoded by mq_common.batch_codec (MessageDecoder#encodeMessages);
    ``properties`` are the batch's own, appended by the broker to each message's. ``message_count``: how many
    messages ``body`` holds (0: not said); ``queue_free``: no sharding key pins ``queue_id``, any queue of this
    broker will do. Neither goes to the broker: with both, a coalescing transport may merge this batch with others
    for the same broker and topic (mq_gateway.batch_merger).
    """

    producer_group: str
    topic: str
    queue_id: int
    born_timestamp_ms: int
    body: bytes
    properties: str = ""
    sys_flag: int = 0
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    born_host: str = ""
    message_count: int = 0
    queue_free: bool = False


@dataclass(frozen=True, slots=True)
class BrokerBatchResponse:
    """A broker's answer to one BrokerBatchRequest: the code for the whole batch; when stored, the offset msg
    ids joined with commas, the queue, the first queue offset and the number of messages."""

    code: int
    remark: str
    msg_id: str
    queue_id: int
    queue_offset: int
    message_count: int


@dataclass(frozen=True, slots=True)
class PullResult:
    """Mirrors org.apache.rocketmq.client.consumer.PullResult.

    ``messages`` are decoded v1 records (compressed bodies inflated); empty unless ``status`` is FOUND.
    ``next_begin_offset`` is the queue offset to pull from next; ``min_offset``/``max_offset`` bound the
    queue (max is one past the last message).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...]


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Messages found by key. Mirrors org.apache.rocketmq.client.QueryResult (plus the broker's index end)."""

    messages: tuple[MessageExt, ...]
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0
