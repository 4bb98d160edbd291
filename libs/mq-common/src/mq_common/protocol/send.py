"""The send headers, one model for both ends: the producer core builds the requests and reads the responses, the
broker's SendMessageProcessor reads the requests and builds the responses (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader (SEND_MESSAGE, and
SEND_BATCH_MESSAGE with ``batch = true``) and SendMessageResponseHeader, each with what the RemotingCommand
around it carries: the body of a request, the ``code`` and ``remark`` of a response. The proto converters are in
:mod:`mq_common.protocol.convert` (mq.broker.v1 SendMessageRequest / SendMessageResponse /
SendMessageBatchRequest / SendMessageBatchResponse, carried in Broker.SendStream frames). Frozen and slotted:
safe to share between tasks and threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq_common.constants import DEFAULT_TOPIC_QUEUE_NUMS, MixAll
from mq_common.errors import MQError


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageRequestHeader:
    """One message to store (SEND_MESSAGE). Mirrors SendMessageRequestHeader plus the body.

    - ``body``: the message body (compressed when ``sys_flag`` has 0x1), at most the broker's maxMessageSize.
    - ``properties``: RocketMQ's property string, ``key 0x01 value 0x02 ...`` (mq_common.codec.encode_properties).
    - ``queue_id``: the target queue; < 0 lets the broker pick one (SendMessageProcessor#randomQueueId).
    - ``default_topic`` / ``default_topic_queue_nums``: the auto-create template ("TBW102") and the queue count
      of an auto-created topic (0: the broker's own default).
    - ``born_timestamp_ms``: producer wall clock, ms since the epoch; ``born_host``: ``"ip:port"`` (IPv4 or IPv6
      literal) of the producer, empty: the broker uses the peer address.
    """

    topic: str
    body: bytes
    producer_group: str = ""
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    flag: int = 0
    properties: str = ""
    default_topic: str = MixAll.DEFAULT_TOPIC
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    reconsume_times: int = 0
    born_host: str = ""


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader:
    """The broker's answer to one SendMessageRequestHeader. Mirrors the SEND_MESSAGE response: RemotingCommand
    code and remark plus SendMessageResponseHeader (msgId, queueId, queueOffset, transactionId).

    ``code`` 0 = SUCCESS; FLUSH_DISK_TIMEOUT (10), FLUSH_SLAVE_TIMEOUT (12), SLAVE_NOT_AVAILABLE (11) are
    stored-but-not-durable outcomes; any other code means the message was not stored. When stored: ``msg_id`` is
    the offset message id (hex of store ip 4|16, store port 4, commit log offset 8), ``queue_offset`` the logical
    offset in ``queue_id``, ``transaction_id`` the message's UNIQ_KEY.
    """

    code: int
    remark: str = ""
    msg_id: str = ""
    queue_id: int = 0
    queue_offset: int = -1
    transaction_id: str = ""

    @classmethod
    def of_error(cls, error: MQError) -> SendMessageResponseHeader:
        """The answer of a refused send: the error's response code and remark."""
        return cls(code=int(error.code), remark=error.remark)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageBatchRequestHeader:
    """One MessageBatch for one queue (SEND_BATCH_MESSAGE). Mirrors SendMessageRequestHeader with ``batch = true``
    plus the body.

    - ``body``: every message, encoded as MessageDecoder#encodeMessages does (mq_common.batch_codec), per message
      big-endian ``[TOTALSIZE i32][MAGICCODE i32][BODYCRC i32][FLAG i32][BODYLEN i32][BODY][PROPERTIESLENGTH u16]
      [PROPERTIES]``.
    - ``properties``: the batch's own (e.g. WAIT), appended by the broker to each message's.
    - ``sys_flag``: MessageSysFlag bits of every message (compression is per message: not allowed here).
    - ``queue_id``, ``default_topic*``, ``born_*``: as in :class:`SendMessageRequestHeader`.

    Sender-side only, never on the wire: ``message_count``, how many messages ``body`` holds (0: not said), and
    ``queue_free``, no sharding key pins ``queue_id`` (any queue of this broker will do). With both, a coalescing
    transport may merge this batch with others for the same broker and topic (mq_gateway.coalescer).
    """

    topic: str
    body: bytes
    producer_group: str = ""
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    properties: str = ""
    default_topic: str = MixAll.DEFAULT_TOPIC
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    born_host: str = ""
    message_count: int = 0
    queue_free: bool = False


@dataclass(frozen=True, slots=True)
class SendMessageBatchResponseHeader:
    """The broker's answer to one SendMessageBatchRequestHeader: the code and remark for the whole batch (stored
    whole or not at all); when stored, the offset msg ids of the messages in order joined with commas (as
    RocketMQ's batch msgId), the queue, the first message's queue offset (the n-th has ``queue_offset`` + n) and
    the number of messages stored. Mirrors the SEND_BATCH_MESSAGE response (code, remark,
    SendMessageResponseHeader)."""

    code: int
    remark: str = ""
    msg_id: str = ""
    queue_id: int = 0
    queue_offset: int = -1
    message_count: int = 0
