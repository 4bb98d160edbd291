"""The pull headers, one model for both ends: the consumer builds the request and reads the response, the
broker's PullMessageProcessor reads the request and builds the response (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader / PullMessageResponseHeader (with
the RemotingCommand's code, remark and body), org.apache.rocketmq.client.consumer.PullStatus and PullResult, and
PullAPIWrapper#processPullResult (:func:`pull_result_of`: response -> PullResult). The proto converters are in
:mod:`mq_common.protocol.convert` (mq.broker.v1 PullMessageRequest / PullMessageResponse). Frozen and slotted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, iter_messages
from mq_common.errors import MQClientError, error_for_code
from mq_common.response_code import ResponseCode


class PullStatus(Enum):
    """Outcome of a pull. Mirrors org.apache.rocketmq.client.consumer.PullStatus."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS_BY_CODE: Final[Mapping[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
"""The response codes that carry a pull status instead of an error (MQClientAPIImpl#processPullResponse)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageRequestHeader:
    """One pull: at most ``max_msg_nums`` messages of ``topic``/``queue_id`` from logical offset ``queue_offset``.
    ``subscription``: a tag expression, ``"*"`` or empty for all, else ``"TagA || TagB"``.
    ``commit_offset``: also commit this offset of the queue for ``consumer_group`` (None: commit nothing; RocketMQ's
    commitOffset with sysFlag FLAG_COMMIT_OFFSET). ``suspend_timeout_ms``: when nothing is there, the broker holds
    the call until a message arrives or this many ms pass (capped by its broker_suspend_max_time_ms; 0: answer at
    once; RocketMQ's suspendTimeoutMillis with FLAG_SUSPEND).
    Mirrors PullMessageRequestHeader (consumerGroup, topic, queueId, queueOffset, maxMsgNums, subscription,
    commitOffset, suspendTimeoutMillis)."""

    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    consumer_group: str = ""
    subscription: str = ""
    commit_offset: int | None = None
    suspend_timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader:
    """The broker's answer to one pull: RemotingCommand code and remark, PullMessageResponseHeader
    (nextBeginOffset, minOffset, maxOffset) and the body.

    ``status``: the PullStatus the code stands for (None on an error code). ``message_bytes``: the stored records,
    concatenated in CommitLog format v1 (``message_count`` of them; decode with mq_common.codec).
    ``next_begin_offset`` is the queue offset to pull from next; ``min_offset``/``max_offset`` bound the queue
    (max is one past the last message). ``suggest_which_broker_id``: the broker id to pull this queue from next
    (PullMessageResponseHeader.suggestWhichBrokerId; 0 is the master, MixAll.MASTER_ID).
    """

    code: int
    remark: str = ""
    status: PullStatus | None = None
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_bytes: bytes = b""
    message_count: int = 0
    suggest_which_broker_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader:
    """A consumer gives back the message at CommitLog ``offset`` for ``group``: to ``%RETRY%<group>``, or
    ``%DLQ%<group>`` once its reconsume times reach ``max_reconsume_times`` (None: the group's retryMaxTimes).
    ``delay_level``: 0 lets the broker pick 3 + reconsume times, < 0 sends it to the DLQ at once.
    ``origin_msg_id`` / ``origin_topic``: the message's id and topic as the consumer knows them.
    Mirrors org.apache.rocketmq.remoting.protocol.header.ConsumerSendMsgBackRequestHeader."""

    group: str
    offset: int
    delay_level: int = 0
    origin_msg_id: str = ""
    origin_topic: str = ""
    max_reconsume_times: int | None = None


@dataclass(frozen=True, slots=True)
class PullResult:
    """A pull as the consumer sees it. Mirrors org.apache.rocketmq.client.consumer.PullResult.

    ``messages`` are decoded v1 records (compressed bodies inflated); empty unless ``status`` is FOUND.
    Offsets and ``suggest_which_broker_id`` as in :class:`PullMessageResponseHeader` (PullResultExt's
    suggestWhichBrokerId).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...]
    suggest_which_broker_id: int = 0


def decoded_messages(message_bytes: bytes, what: str) -> tuple[MessageExt, ...]:
    """Every v1 record of ``message_bytes`` (a pull's or a query's body), CRC checked. Raises MQClientError
    (SYSTEM_ERROR, 1) naming ``what`` ("pulled", "queried") when the bytes do not decode."""
    try:
        return tuple(iter_messages(message_bytes))
    except MessageDecodeError as exc:
        raise MQClientError(f"{what} message bytes do not decode: {exc}", ResponseCode.SYSTEM_ERROR) from exc


def pull_result_of(response: PullMessageResponseHeader, broker_name: str = "") -> PullResult:
    """The consumer's PullResult of a broker's answer. Mirrors MQClientAPIImpl#processPullResponse and
    PullAPIWrapper#processPullResult (without the tag filter: the consumer applies it).

    SUCCESS uses ``status`` (FOUND when unset); PULL_NOT_FOUND (19) -> NO_NEW_MSG, PULL_RETRY_IMMEDIATELY (20)
    -> NO_MATCHED_MSG, PULL_OFFSET_MOVED (21) -> OFFSET_ILLEGAL. Raises error_for_code(code, remark,
    broker_name) for any other code, MQClientError (SYSTEM_ERROR, 1) when the message bytes do not decode (CRC
    checked).
    """
    if response.code == ResponseCode.SUCCESS and response.status is not None:
        status = response.status
    elif response.code in PULL_STATUS_BY_CODE:
        status = PULL_STATUS_BY_CODE[response.code]
    else:
        raise error_for_code(response.code, response.remark, broker_name)
    messages: tuple[MessageExt, ...] = ()
    if status is PullStatus.FOUND and response.message_bytes:
        messages = decoded_messages(response.message_bytes, "pulled")
    return PullResult(
        status=status,
        next_begin_offset=response.next_begin_offset,
        min_offset=response.min_offset,
        max_offset=response.max_offset,
        messages=messages,
        suggest_which_broker_id=response.suggest_which_broker_id,
    )
