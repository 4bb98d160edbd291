"""What one broker knows of its open and ended transactions, rebuilt from the CommitLog.

A transaction is named by its *identity*: the queue offset of its first half message on RMQ_SYS_TRANS_HALF_TOPIC.
Each check-back stores a copy of the half message at the end of the half queue (RocketMQ's putBackHalfMsgQueue)
carrying TRAN_PREPARED_QUEUE_OFFSET = the identity, and every op record (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag "d", body
= the half offset as RocketMQ) carries it too (a merged op record, body = many half offsets joined by ',', carries
them as TRAN_PREPARED_QUEUE_OFFSETS when they differ: half_message.op_record_ends), so a commit or rollback ends
every copy at once: beyond RocketMQ, a late answer for an older copy never delivers a transaction twice.

Progress is RocketMQ's: the consumer offsets of group CID_RMQ_SYS_TRANS on the half queue (every half message
before it was ended, discarded or copied further on) and on the op queue (every op before it ends a transaction
whose copies all lie before the half progress). Both are consumer offsets and everything else is CommitLog records,
so a slave has it all (HA + SlaveSynchronize) and a promoted master :meth:`recover`s from there. Memory is bounded by
the transactions with a copy at or after the half progress. Event loop; reads mapped files.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Final

from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MixAll
from mq_common.logging import get_logger

from mq_broker.consumer.offset_manager import ConsumerOffsetManager
from mq_broker.store.api import MessageStore
from mq_broker.transaction.half_message import DUPLICATE_PROPERTY, HALF_QUEUE_ID, PREPARED_QUEUE_OFFSET, op_record_ends
from mq_broker.transaction.half_record import parse_half_record

log = get_logger("mq_broker.transaction")

SCAN_BATCH: Final = 256
CHECK_GROUP: Final = MixAll.CID_SYS_RMQ_TRANS
"""TransactionalMessageUtil#buildConsumerGroup: the group whose offsets are the check progress."""
_CLIENT_HOST: Final = "TransactionalMessageCheckService"


def identity_of(half: MessageExt) -> int:
    """A half message's transaction identity: TRAN_PREPARED_QUEUE_OFFSET of a copy, else its own queue offset."""
    text = half.properties.get(PREPARED_QUEUE_OFFSET, "")
    return int(text) if text.isdigit() else half.queue_offset


class TransactionState:
    """Ended and copied transactions of one broker (see the module)."""

    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager | None) -> None:
        self.store = store
        self.offsets = offsets
        self.ended: dict[int, str] = {}
        """Identity -> how it ended (COMMIT, ROLLBACK, DISCARDED; "" when an op record does not say)."""
        self.ended_op_offset: dict[int, int] = {}
        """Identity -> the op queue offset of its op record (what holds the op progress back)."""
        self._op_refs: dict[int, int] = {}
        """Op queue offset -> how many identities of :attr:`ended_op_offset` name it (a merged op record ends many)."""
        self._op_heap: list[int] = []
        """The op queue offsets of :attr:`_op_refs` as a min-heap (stale ones dropped lazily): the op progress in
        O(log n), not a scan of every ended transaction per check batch."""
        self.duplicates: set[int] = set()
        """Ended identities a whole-transaction commit rolled back as duplicates (half_message.DUPLICATE_PROPERTY)."""
        self.latest_copy: dict[int, int] = {}
        """Identity -> the half queue offset of its newest copy (only transactions checked at least once)."""
        self.half_progress = 0
        self._op_scanned_to = 0
        self.loaded = False
        self.open_by_topic: dict[str, int] = {}
        """Real topic -> open transactions (the rocketmq_half_messages gauge); counted while loaded."""
        self.ending: set[int] = set()
        """Identities being ended or discarded right now (an END_TRANSACTION or a check pass awaiting its put): a
        second end is refused and the check pass stops before them, so no transaction is both committed and
        discarded."""

    # --- progress ------------------------------------------------------------------------------------------------

    def _stored_offset(self, topic: str) -> int:
        committed = self.offsets.query_offset(CHECK_GROUP, topic, HALF_QUEUE_ID) if self.offsets is not None else -1
        return max(committed, self.store.get_min_offset_in_queue(topic, HALF_QUEUE_ID))

    def op_progress(self) -> int:
        """Where a recovery reads op records from: the oldest op still needed, else the end of what was read."""
        heap, refs = self._op_heap, self._op_refs
        while heap and heap[0] not in refs:
            heapq.heappop(heap)
        return heap[0] if heap else self._op_scanned_to

    def commit_progress(self, half_progress: int) -> None:
        """Move the half progress to ``half_progress`` and store both consumer offsets."""
        self.half_progress = half_progress
        offsets = self.offsets
        if offsets is None:
            return
        for topic, offset in ((TRANS_HALF_TOPIC, half_progress), (TRANS_OP_HALF_TOPIC, self.op_progress())):
            if offsets.query_offset(CHECK_GROUP, topic, HALF_QUEUE_ID) != offset:  # unchanged: no table churn
                offsets.commit_offset(_CLIENT_HOST, CHECK_GROUP, topic, HALF_QUEUE_ID, offset)

    # --- recovery ------------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (the role changed); the next :meth:`ensure_loaded` recovers."""
        self.ended.clear()
        self.ended_op_offset.clear()
        self._op_refs.clear()
        self._op_heap.clear()
        self.latest_copy.clear()
        self.duplicates.clear()
        self.open_by_topic.clear()
        self.loaded = False

    def ensure_loaded(self) -> None:
        if not self.loaded:
            self.recover()

    def recover(self) -> None:
        """Progress from the consumer offsets, op records from the op progress, copies from the half progress on;
        ended transactions none of whose copies lies at or after the half progress are forgotten."""
        self.reset()
        self.half_progress = self._stored_offset(TRANS_HALF_TOPIC)
        self._op_scanned_to = self._stored_offset(TRANS_OP_HALF_TOPIC)
        self.catch_up_ops()
        live: dict[int, str] = {}
        for raw in self.iter_half_raw(self.half_progress, self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0)):
            try:  # the fields only (mq_broker.transaction.half_record), not a decoded message
                half = parse_half_record(raw)
            except MessageDecodeError:
                log.warning("transaction_half_unreadable", half_progress=self.half_progress)
                continue
            identity = half.identity
            live[identity] = half.real_topic
            if identity != half.queue_offset:
                self.latest_copy[identity] = half.queue_offset
        for identity in [i for i in self.ended if i not in live]:
            self.forget(identity)
        for identity, topic in live.items():
            if identity not in self.ended:
                self.open_by_topic[topic] = self.open_by_topic.get(topic, 0) + 1
        self.loaded = True
        log.info(
            "transactions_recovered",
            half_progress=self.half_progress,
            op_progress=self.op_progress(),
            open_or_copied=len(live),
            ended=len(self.ended),
        )

    def iter_half_raw(self, begin: int, end: int) -> Iterator[bytes]:
        """The raw records of the half messages with queue offsets in [``begin``, ``end``), read in slices of
        SCAN_BATCH."""
        offset = begin
        while offset < end:
            result = self.store.get_messages(TRANS_HALF_TOPIC, HALF_QUEUE_ID, offset, min(SCAN_BATCH, end - offset))
            if not result.messages and result.next_begin_offset <= offset:
                return
            yield from result.messages
            offset = result.next_begin_offset

    def iter_half(self, begin: int, end: int) -> list[MessageExt]:
        """The half messages with queue offsets in [``begin``, ``end``) (unreadable ones skipped and logged)."""
        found: list[MessageExt] = []
        offset = begin
        while offset < end:
            result = self.store.get_messages(TRANS_HALF_TOPIC, HALF_QUEUE_ID, offset, min(SCAN_BATCH, end - offset))
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                continue
            for record in result.messages:
                try:
                    found.append(decode_message(record))
                except MessageDecodeError:
                    log.warning("transaction_half_unreadable", offset=offset)
            offset = result.next_begin_offset
        return found

    # --- op records ----------------------------------------------------------------------------------------------

    def catch_up_ops(self) -> None:
        """Read op records stored since the last call (RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0) into :attr:`ended`."""
        while True:
            result = self.store.get_messages(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, self._op_scanned_to, SCAN_BATCH)
            if self._op_scanned_to < result.min_offset:
                self._op_scanned_to = result.min_offset
            if not result.messages:
                if result.next_begin_offset > self._op_scanned_to:
                    self._op_scanned_to = result.next_begin_offset
                    continue
                return
            for record, op_offset in zip(result.messages, result.queue_offsets, strict=True):
                self._learn_op(record, op_offset)
            self._op_scanned_to = result.next_begin_offset

    def _learn_op(self, record: bytes, op_offset: int) -> None:
        try:
            op = decode_message(record, check_crc=False)
        except MessageDecodeError:
            log.warning("transaction_op_unreadable", op_offset=op_offset)
            return
        duplicates = op.properties.get(DUPLICATE_PROPERTY) == "true"
        for identity, end_type in op_record_ends(op.body, op.properties):  # one, or many merged by ','
            if identity not in self.ended and duplicates:
                self.duplicates.add(identity)
            self.mark_ended(identity, end_type, op_offset)

    def mark_ended(self, identity: int, end_type: str, op_offset: int) -> None:
        if identity not in self.ended:
            self.ended[identity] = end_type
            self.ended_op_offset[identity] = op_offset
            refs = self._op_refs.get(op_offset, 0)
            self._op_refs[op_offset] = refs + 1
            if not refs:
                heapq.heappush(self._op_heap, op_offset)

    def forget(self, identity: int) -> None:
        """Drop an ended transaction (its last copy is behind the half progress)."""
        self.ended.pop(identity, None)
        op_offset = self.ended_op_offset.pop(identity, None)
        if op_offset is not None:
            refs = self._op_refs[op_offset] - 1
            if refs:
                self._op_refs[op_offset] = refs
            else:
                del self._op_refs[op_offset]
        self.latest_copy.pop(identity, None)
        self.duplicates.discard(identity)

    # --- the open count ------------------------------------------------------------------------------------------

    def on_half_stored(self, topic: str, count: int = 1) -> None:
        """``count`` new half messages of real topic ``topic`` were stored (one send, or one batch of a transaction;
        counted only while loaded: a recovery counts)."""
        if self.loaded:
            self.open_by_topic[topic] = self.open_by_topic.get(topic, 0) + count

    def on_ended(self, topic: str, count: int = 1) -> None:
        """``count`` transactions of real topic ``topic`` were committed, rolled back or discarded."""
        left = self.open_by_topic.get(topic, 0) - count
        if left > 0:
            self.open_by_topic[topic] = left
        else:
            self.open_by_topic.pop(topic, None)

    def open_counts(self) -> dict[str, int]:
        """A copy of :attr:`open_by_topic` (any thread)."""
        return dict(self.open_by_topic)

    # --- questions -----------------------------------------------------------------------------------------------

    def is_open(self, half: MessageExt) -> bool:
        """Whether the transaction of ``half`` may still be ended: not ended, and either at or after the half
        progress or copied further on (a half message behind the progress and not copied was ended or
        discarded)."""
        return self.is_open_at(identity_of(half), half.queue_offset)

    def is_open_at(self, identity: int, queue_offset: int) -> bool:
        """:meth:`is_open` for the half message (or copy) at half queue offset ``queue_offset`` of transaction
        ``identity``."""
        if identity in self.ended:
            return False
        return queue_offset >= self.half_progress or identity in self.latest_copy
