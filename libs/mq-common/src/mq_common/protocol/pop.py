"""The POP headers and the receipt handle, one model for both ends: the consumer (and the gateway, another
process) builds the requests, reads the answers and decodes handles; the broker's pop, ack and change-invisible
processors read the requests, build the answers and encode handles (no protobuf here).

Mirrors org.apache.rocketmq.common.consumer.ReceiptHandle, org.apache.rocketmq.remoting.protocol.header.
{PopMessageRequestHeader, PopMessageResponseHeader, AckMessageRequestHeader, BatchAckMessageRequestBody,
ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader} (each with the RemotingCommand's code and
remark), ExtraInfoUtil's handle text and org.apache.rocketmq.client.consumer.{PopResult, PopStatus}. The proto
converters are in :mod:`mq_common.protocol.convert`. Frozen and slotted: safe to share between tasks and threads.

Receipt handle text (ReceiptHandle#encode, space-separated, 8 or 9 fields)::

    startOffset retrieveTime invisibleTime reviveQueueId topicType brokerName queueId offset [commitLogOffset]

``startOffset``: the queue offset the pop started reading at (its checkpoint's start offset); ``retrieveTime``:
the pop time (ms since the epoch); ``invisibleTime``: ms; ``topicType``: ``0`` the topic itself, ``1`` the
group's retry topic ``%RETRY%<group>``, ``2`` RocketMQ's retry topic v2 (read as ``1`` here); ``offset``: the
message's queue offset; ``commitLogOffset``: -1 when absent.

Refusal codes of an ack or a change of invisible time, per handle (the v2 gateway maps both to
INVALID_RECEIPT_HANDLE 40013): INVALID_PARAMETER (29) for a handle that does not decode or names another broker;
NO_MESSAGE (208) for a well-formed handle that is no longer in flight here: its invisible time has passed
("receipt handle is expired"), it was acked already, replaced by a change of invisible time or revived, or it
belongs to another group or topic ("... not in flight").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import MixAll, retry_topic
from mq_common.errors import InvalidParameterError, MQClientError, error_for_code
from mq_common.response_code import ResponseCode

NORMAL_TOPIC: Final = "0"
RETRY_TOPIC: Final = "1"
RETRY_TOPIC_V2: Final = "2"
_TOPIC_TYPES: Final = frozenset({NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2})
_SEPARATOR: Final = " "
MAX_RECEIPT_HANDLE_CHARS: Final = 1024
"""A handle is about 60 characters plus the broker name; longer text is refused undecoded."""


class ConsumeInitMode:
    """Where a group without a committed offset starts popping a queue. The numbers follow broker.proto's
    PopMessageRequest.init_mode (0 last, 1 first; RocketMQ's ConsumeInitMode numbers them MAX 1, MIN 0)."""

    LAST: Final = 0
    FIRST: Final = 1


class InvalidReceiptHandleError(InvalidParameterError):
    """Receipt handle text that does not decode (INVALID_PARAMETER, 29)."""


def topic_type_of(topic: str) -> str:
    """ExtraInfoUtil#getRetry: RETRY_TOPIC for a ``%RETRY%`` topic, else NORMAL_TOPIC."""
    return RETRY_TOPIC if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) else NORMAL_TOPIC


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """Where a popped message is and which checkpoint holds it. Mirrors ReceiptHandle (fields in text order)."""

    start_offset: int
    retrieve_time_ms: int
    invisible_time_ms: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int = -1

    @property
    def next_visible_time_ms(self) -> int:
        """When the message becomes visible again unless acked: retrieve time + invisible time."""
        return self.retrieve_time_ms + self.invisible_time_ms

    def is_expired(self, now_ms: int) -> bool:
        """ReceiptHandle#isExpired at ``now_ms``."""
        return self.next_visible_time_ms <= now_ms

    @property
    def is_retry(self) -> bool:
        return self.topic_type in (RETRY_TOPIC, RETRY_TOPIC_V2)

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message is stored in: ``topic``, or ``%RETRY%<group>`` for a retry handle."""
        return retry_topic(group) if self.is_retry else topic

    def encode(self) -> str:
        """ReceiptHandle#encode: the 9-field text."""
        return f"{self.checkpoint_prefix()}{self.offset} {self.commit_log_offset}"

    def checkpoint_prefix(self) -> str:
        """The text of the first seven fields and a trailing separator: the same for every message of one
        checkpoint, so a pop formats it once and appends ``f"{offset} {commit_log_offset}"`` per message
        (:func:`encode_receipt_handles`)."""
        return (
            f"{self.start_offset} {self.retrieve_time_ms} {self.invisible_time_ms} {self.revive_queue_id} "
            f"{self.topic_type} {self.broker_name} {self.queue_id} "
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """ReceiptHandle#decode (8 or 9 fields). Raises InvalidReceiptHandleError (INVALID_PARAMETER, 29) for
        text that is too long, has another number of fields, a non-integer number, a negative offset or queue id,
        or an unknown topic type."""
        if len(text) > MAX_RECEIPT_HANDLE_CHARS:
            raise InvalidReceiptHandleError(f"receipt handle is invalid: longer than {MAX_RECEIPT_HANDLE_CHARS}")
        parts = text.split(_SEPARATOR)
        if len(parts) not in (8, 9):
            raise InvalidReceiptHandleError(f"receipt handle is invalid: {len(parts)} fields, not 8 or 9: {text!r}")
        try:
            numbers = [int(parts[i]) for i in (0, 1, 2, 3, 6, 7)]
            commit_log_offset = int(parts[8]) if len(parts) == 9 else -1
        except ValueError as exc:
            raise InvalidReceiptHandleError(f"receipt handle is invalid: {text!r}") from exc
        start, retrieve, invisible, revive_qid, queue_id, offset = numbers
        if parts[4] not in _TOPIC_TYPES or not parts[5] or min(start, retrieve, invisible, revive_qid, queue_id) < 0:
            raise InvalidReceiptHandleError(f"receipt handle is invalid: {text!r}")
        if offset < 0:
            raise InvalidReceiptHandleError(f"receipt handle is invalid: {text!r}")
        return cls(start, retrieve, invisible, revive_qid, parts[4], parts[5], queue_id, offset, commit_log_offset)


def encode_receipt_handles(
    first: ReceiptHandle, offsets: Sequence[int], commit_log_offsets: Sequence[int]
) -> list[str]:
    """The handle texts of the messages of one checkpoint: ``first`` with its offset and commit log offset replaced
    by each pair of ``offsets`` / ``commit_log_offsets`` (ReceiptHandle#encode of each, without a ReceiptHandle
    apiece)."""
    prefix = first.checkpoint_prefix()
    return [f"{prefix}{o} {c}" for o, c in zip(offsets, commit_log_offsets, strict=True)]


# --- POP_MESSAGE -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageRequestHeader:
    """One pop: at most ``max_msg_nums`` (1..32) messages of ``topic`` for ``consumer_group``, each invisible
    for ``invisible_time_ms`` unless acked. ``queue_id`` < 0: any queue (and the group's retry topic).
    ``poll_time_ms``: hold the call up to this long when nothing is there (0: answer at once). ``expression``:
    ``"*"``, empty, or ``"TagA || TagB"``. ``init_mode``: :class:`ConsumeInitMode`. ``ack_receipt_handles``
    (ours, not RocketMQ's): handles of earlier pops of this group and topic, acked before the pop as one
    :class:`AckMessageRequestHeader` would (answered in PopMessageResponseHeader.ack_codes / ack_remarks).
    ``order``: an orderly pop (also implied by the group's consume_message_orderly): nothing later in a queue is
    handed out while an earlier message of it is invisible and un-acked; ``attempt_id``: a retried orderly pop
    with the same id gets the same messages. Mirrors PopMessageRequestHeader (consumerGroup, topic, queueId,
    maxMsgNums, invisibleTime, pollTime, exp, initMode, order, attemptId)."""

    consumer_group: str
    topic: str
    max_msg_nums: int
    invisible_time_ms: int
    queue_id: int = -1
    poll_time_ms: int = 0
    expression: str = ""
    init_mode: int = ConsumeInitMode.LAST
    ack_receipt_handles: tuple[str, ...] = ()
    order: bool = False
    attempt_id: str = ""


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    """One popped message: its record in CommitLog format v1 (a retry message carries its original topic, as
    RocketMQ's broker rewrites it) and the receipt handle text that acknowledges it."""

    message: bytes
    receipt_handle: str


@dataclass(frozen=True, slots=True)
class PopMessageResponseHeader:
    """The broker's answer to one pop: code, remark, the messages, the pop time (ms since the epoch) and the
    invisible time (ms). Codes: SUCCESS with messages; POLLING_TIMEOUT (210) when nothing was found within the
    poll time; POLLING_FULL (209) when the broker holds too many polls; else a refusal (see
    PopMessageProcessor's docstring). ``ack_codes`` / ``ack_remarks``: one per request ack_receipt_handles, in
    order (as AckMessageResponseHeader's codes / remarks). Mirrors PopMessageResponseHeader plus the body."""

    code: int
    remark: str = ""
    messages: tuple[PoppedMessage, ...] = ()
    pop_time_ms: int = 0
    invisible_time_ms: int = 0
    ack_codes: tuple[int, ...] = ()
    ack_remarks: tuple[str, ...] = ()


class PopStatus(Enum):
    """Outcome of a pop. Mirrors org.apache.rocketmq.client.consumer.PopStatus."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


POP_STATUS_BY_CODE: Final[Mapping[int, PopStatus]] = {
    ResponseCode.SUCCESS: PopStatus.FOUND,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
}
"""The response codes that carry a pop status instead of an error (MQClientAPIImpl#processPopResponse)."""


@dataclass(frozen=True, slots=True)
class PoppedMessageExt:
    """A popped message as the consumer sees it: the decoded record and its receipt handle."""

    message: MessageExt
    receipt_handle: str


@dataclass(frozen=True, slots=True)
class PopResult:
    """A pop as the consumer sees it. Mirrors org.apache.rocketmq.client.consumer.PopResult."""

    status: PopStatus
    messages: tuple[PoppedMessageExt, ...] = ()
    pop_time_ms: int = 0
    invisible_time_ms: int = 0


def pop_result_of(response: PopMessageResponseHeader, broker_name: str = "") -> PopResult:
    """The consumer's PopResult of a broker's answer (MQClientAPIImpl#processPopResponse).

    Raises error_for_code(code, remark, broker_name) for a code that is no pop status, MQClientError
    (SYSTEM_ERROR, 1) when a record does not decode (CRC checked)."""
    status = POP_STATUS_BY_CODE.get(response.code)
    if status is None:
        raise error_for_code(response.code, response.remark, broker_name)
    messages: list[PoppedMessageExt] = []
    for popped in response.messages:
        try:
            message = decode_message(popped.message)
        except MessageDecodeError as exc:
            raise MQClientError(f"popped message bytes do not decode: {exc}", ResponseCode.SYSTEM_ERROR) from exc
        messages.append(PoppedMessageExt(message, popped.receipt_handle))
    return PopResult(status, tuple(messages), response.pop_time_ms, response.invisible_time_ms)


# --- ACK_MESSAGE / BATCH_ACK_MESSAGE ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMessageRequestHeader:
    """Acknowledge popped messages of ``topic`` (the topic popped, also for retry handles) for ``consumer_group``
    by their receipt handles. Mirrors AckMessageRequestHeader / BatchAckMessageRequestBody."""

    consumer_group: str
    topic: str
    receipt_handles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AckMessageResponseHeader:
    """One code and remark per handle, in request order (SUCCESS or a refusal, see the module docstring).
    ``code``/``remark``: SUCCESS when every handle was acked, else the first refusal's (or a request-level
    refusal with no per-handle codes)."""

    code: int
    remark: str = ""
    codes: tuple[int, ...] = ()
    remarks: tuple[str, ...] = ()


# --- CHANGE_MESSAGE_INVISIBLETIME ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader:
    """Make one popped message invisible for ``invisible_time_ms`` from now. Mirrors
    ChangeInvisibleTimeRequestHeader (the queue id and offset travel inside the handle)."""

    consumer_group: str
    topic: str
    receipt_handle: str
    invisible_time_ms: int


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader:
    """The new receipt handle (the old one is then refused), its pop time (ms since the epoch) and invisible
    time (ms). Mirrors ChangeInvisibleTimeResponseHeader."""

    code: int
    remark: str = ""
    receipt_handle: str = ""
    pop_time_ms: int = 0
    invisible_time_ms: int = 0
