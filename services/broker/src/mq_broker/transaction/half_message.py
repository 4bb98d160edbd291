"""Where a transaction half message is stored, and what it becomes when committed.

Mirrors org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge#parseHalfMessageInner (a send with
the TRANSACTION_PREPARED_TYPE sysflag is stored on RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC / REAL_QID and
its transaction type reset to NOT_TYPE, so it is dispatched to the half topic's ConsumeQueue like any message) and
EndTransactionProcessor#endMessageTransaction (the committed message: REAL_TOPIC / REAL_QID again, the COMMIT type,
without TRAN_MSG, REAL_TOPIC and REAL_QID). Pure; any thread.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageExt, host_to_bytes
from mq_common.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    MessageConst,
    MessageSysFlag,
)

from mq_broker.store.message import MessageExtBrokerInner

_TYPE_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
HALF_QUEUE_ID: Final = 0
"""The half topic's only queue (TransactionalMessageBridge#parseHalfMessageInner)."""
REMOVE_TAG: Final = "d"
"""TransactionalMessageUtil.REMOVE_TAG: the tag of an op record."""
END_TYPE_PROPERTY: Final = "TRAN_END_TYPE"
"""Beyond RocketMQ: the op record says whether it ended the transaction by COMMIT or ROLLBACK (RocketMQ's op records
only name the offset), so a refused second end names what the first one was, after a restart or failover too."""
PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
"""MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: on a check copy and on an op record, the queue offset of
the transaction's first half message (its identity, mq_broker.transaction.transaction_state)."""
PREPARED_QUEUE_OFFSETS: Final = "TRAN_PREPARED_QUEUE_OFFSETS"
"""Beyond RocketMQ: on an op record that ends many half messages (its body lists their half queue offsets separated
by ``,``, TransactionalMessageUtil.OFFSET_SEPARATOR, as RocketMQ 5's merged op messages), their transaction
identities in the same order, separated by ``,``; absent when every identity is the half queue offset itself."""
DUPLICATE_PROPERTY: Final = "TRAN_DUPLICATE"
"""Beyond RocketMQ: "true" on the op record rolling back the half messages a whole-transaction commit found
duplicated (a UNIQ_KEY seen before in the transaction), so a repeated commit counts them as already ended, after a
restart too (mq_broker.transaction.transaction_state.TransactionState.duplicates)."""
DUPLICATES: Final = {DUPLICATE_PROPERTY: "true"}
OFFSET_SEPARATOR: Final = ","
"""TransactionalMessageUtil.OFFSET_SEPARATOR: between the half queue offsets of a merged op record's body."""
WHOLE_END_TYPE_PROPERTY: Final = "TRAN_WHOLE_END_TYPE"
"""Beyond RocketMQ: on the last op record of each chunk of a whole-transaction end, how the whole transaction ended
(mq_broker.transaction.transaction_index: a restarted broker finds it through the IndexFile)."""
WHOLE_COUNT_PROPERTY: Final = "TRAN_WHOLE_COUNT"
"""Beyond RocketMQ: on the same op record, how many half messages of the transaction were ended that way so far."""
COMMIT: Final = "COMMIT"
ROLLBACK: Final = "ROLLBACK"
DISCARDED: Final = "DISCARDED"


class HalfMessageError(ValueError):
    """A record on the half topic without a usable REAL_TOPIC / REAL_QID."""


def is_half_send(sys_flag: int) -> bool:
    """Whether a send's sysflag asks for a half message (TRANSACTION_PREPARED_TYPE)."""
    return sys_flag & _TYPE_MASK == MessageSysFlag.TRANSACTION_PREPARED_TYPE


@dataclass(frozen=True, slots=True)
class HalfPlacement:
    """The half message's ``topic`` (RMQ_SYS_TRANS_HALF_TOPIC), ``queue_id`` (0), ``properties`` (REAL_TOPIC,
    REAL_QID, PGROUP and TRAN_MSG set) and ``sys_flag`` (transaction type NOT_TYPE)."""

    topic: str
    queue_id: int
    properties: dict[str, str]
    sys_flag: int


def half_placement(
    topic: str, queue_id: int, properties: dict[str, str], sys_flag: int, producer_group: str
) -> HalfPlacement:
    """Where the half message of a send to ``topic`` / ``queue_id`` is stored. ``properties`` is not changed; PGROUP
    is the request's ``producer_group`` when the client did not set it (the 4.x client sets it)."""
    held = dict(properties)
    held[MessageConst.REAL_TOPIC] = topic
    held[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    held[MessageConst.TRANSACTION_PREPARED] = "true"
    if not held.get(MessageConst.PRODUCER_GROUP):
        held[MessageConst.PRODUCER_GROUP] = producer_group
    return HalfPlacement(TRANS_HALF_TOPIC, HALF_QUEUE_ID, held, sys_flag & ~_TYPE_MASK)


@functools.lru_cache(maxsize=4096)
def _host_bytes(host: str, port: int) -> bytes:
    """host_to_bytes, cached: the half messages a commit ends come from a few producers (gateways), and parsing the
    address literal again for each of them was a tenth of a whole-transaction commit's CPU."""
    return host_to_bytes(host, port)


def committed_message(half: MessageExt) -> MessageExtBrokerInner:
    """The real message a commit stores (EndTransactionProcessor#endMessageTransaction): topic REAL_TOPIC, queue
    REAL_QID, body, flag, born host/time and reconsume times of ``half``; its properties minus TRAN_MSG, REAL_TOPIC
    and REAL_QID; transaction type COMMIT. Raises HalfMessageError when REAL_TOPIC or REAL_QID is missing or bad."""
    properties = dict(half.properties)
    topic = properties.pop(MessageConst.REAL_TOPIC, "")
    queue_text = properties.pop(MessageConst.REAL_QUEUE_ID, "")
    properties.pop(MessageConst.TRANSACTION_PREPARED, None)
    properties.pop(PREPARED_QUEUE_OFFSET, None)
    if not topic or not queue_text.isdigit():
        raise HalfMessageError(f"half message at {half.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    return MessageExtBrokerInner.build(
        topic=topic,
        queue_id=int(queue_text),
        body=half.body,
        properties=properties,
        flag=half.flag,
        sys_flag=(half.sys_flag & ~_TYPE_MASK & ~MessageSysFlag.COMPRESSED_FLAG)
        | MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=_host_bytes(*half.born_host),
        reconsume_times=half.reconsume_times,
    )


def op_record(
    half_queue_offset: int, identity: int, end_type: str, extra: Mapping[str, str] | None = None
) -> MessageExtBrokerInner:
    """The op record that ends the transaction ``identity`` through its half message at ``half_queue_offset``
    (TransactionalMessageBridge#writeOp / #addRemoveTagInTransactionOp): RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0, tag
    "d", body = the offset in decimal; TRAN_END_TYPE = ``end_type`` (COMMIT, ROLLBACK, DISCARDED) and
    TRAN_PREPARED_QUEUE_OFFSET = ``identity``; ``extra`` properties added (a whole-transaction end's summary,
    :func:`whole_end_summary`)."""
    properties = {MessageConst.TAGS: REMOVE_TAG, END_TYPE_PROPERTY: end_type, PREPARED_QUEUE_OFFSET: str(identity)}
    if extra:
        properties.update(extra)
    return MessageExtBrokerInner.build(
        topic=TRANS_OP_HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=str(half_queue_offset).encode(), properties=properties
    )


def op_record_many(
    ended: Sequence[tuple[int, int]], end_type: str, extra: Mapping[str, str] | None = None
) -> MessageExtBrokerInner:
    """One op record ending the transactions of ``ended`` ((half queue offset, identity) pairs, at least one) the
    same way (TransactionalMessageServiceImpl#fillOpRemoveMap reads such merged records): body = the half queue
    offsets separated by ``,``, TRAN_END_TYPE = ``end_type``, TRAN_PREPARED_QUEUE_OFFSETS = the identities when any
    of them is not its half queue offset (a check copy); one pair is :func:`op_record` exactly. ``extra``
    properties added. Raises ValueError for an empty ``ended``."""
    if not ended:
        raise ValueError("an op record ends at least one half message")
    if len(ended) == 1:
        return op_record(ended[0][0], ended[0][1], end_type, extra)
    properties = {MessageConst.TAGS: REMOVE_TAG, END_TYPE_PROPERTY: end_type}
    if any(offset != identity for offset, identity in ended):
        properties[PREPARED_QUEUE_OFFSETS] = OFFSET_SEPARATOR.join([str(identity) for _, identity in ended])
    if extra:
        properties.update(extra)
    body = OFFSET_SEPARATOR.join([str(offset) for offset, _ in ended]).encode()
    return MessageExtBrokerInner.build(
        topic=TRANS_OP_HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=body, properties=properties
    )


def op_record_ends(body: bytes, properties: Mapping[str, str]) -> list[tuple[int, str]]:
    """The (identity, end type) pairs an op record ends: TRAN_PREPARED_QUEUE_OFFSET (one, this project's single op
    records), else TRAN_PREPARED_QUEUE_OFFSETS (a merged one), else the body's half queue offsets separated by
    ``,`` (RocketMQ's records: the offsets are the identities); the end type is TRAN_END_TYPE ("" when absent).
    Words that are not decimal numbers are skipped; a TRAN_PREPARED_QUEUE_OFFSETS whose count differs from the
    body's falls back to the body."""
    end_type = properties.get(END_TYPE_PROPERTY, "")
    one = properties.get(PREPARED_QUEUE_OFFSET, "")
    if one.isdigit():
        return [(int(one), end_type)]
    words = body.decode("utf-8", "replace").split(OFFSET_SEPARATOR)
    listed = properties.get(PREPARED_QUEUE_OFFSETS, "")
    if listed:
        identities = listed.split(OFFSET_SEPARATOR)
        if len(identities) == len(words):
            words = identities
    return [(int(word), end_type) for word in (w.strip() for w in words) if word.isdigit()]


def whole_end_key(producer_group: str, transaction_id: str) -> str:
    """The KEYS word of a whole transaction's summary op record (indexed by the store's IndexFile under the op
    topic): ``TXW_`` + 32 hex digits of SHA-256(group NUL transaction id), so any group or id is one KEYS word."""
    digest = hashlib.sha256(f"{producer_group}\x00{transaction_id}".encode()).hexdigest()[:32]
    return f"TXW_{digest}"


def whole_end_summary(producer_group: str, transaction_id: str, end_type: str, count: int) -> dict[str, str]:
    """The properties that make an op record the summary of a whole-transaction end (this project's extension):
    KEYS = :func:`whole_end_key`, PGROUP, __transactionId__, WHOLE_END_TYPE_PROPERTY = ``end_type`` and
    WHOLE_COUNT_PROPERTY = ``count`` (half messages of the transaction ended that way so far)."""
    return {
        MessageConst.KEYS: whole_end_key(producer_group, transaction_id),
        MessageConst.PRODUCER_GROUP: producer_group,
        MessageConst.TRANSACTION_ID: transaction_id,
        WHOLE_END_TYPE_PROPERTY: end_type,
        WHOLE_COUNT_PROPERTY: str(count),
    }


def _copy(half: MessageExt, topic: str, properties: dict[str, str]) -> MessageExtBrokerInner:
    return MessageExtBrokerInner.build(
        topic=topic,
        queue_id=HALF_QUEUE_ID,
        body=half.body,
        properties=properties,
        flag=half.flag,
        sys_flag=half.sys_flag & ~_TYPE_MASK & ~MessageSysFlag.COMPRESSED_FLAG,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=_host_bytes(*half.born_host),
        reconsume_times=half.reconsume_times,
    )


def check_copy(half: MessageExt, identity: int, check_times: int) -> MessageExtBrokerInner:
    """The copy a check-back stores at the end of the half queue (TransactionalMessageServiceImpl#
    putBackHalfMsgQueue / #renewHalfMessageInner): same body, born time and properties, TRANSACTION_CHECK_TIMES =
    ``check_times`` and TRAN_PREPARED_QUEUE_OFFSET = ``identity``."""
    properties = dict(half.properties)
    properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(check_times)
    properties[PREPARED_QUEUE_OFFSET] = str(identity)
    return _copy(half, TRANS_HALF_TOPIC, properties)


def discarded_message(half: MessageExt) -> MessageExtBrokerInner:
    """Where a half message checked transactionCheckMax times goes (DefaultTransactionalMessageCheckListener#
    toMessageExtBrokerInner): TRANS_CHECK_MAX_TIME_TOPIC queue 0, same body and properties."""
    return _copy(half, TRANS_CHECK_MAX_TIME_TOPIC, dict(half.properties))
