"""The half messages of each (producer group, transaction id): what a whole-transaction END_TRANSACTION ends.

This project's extension of RocketMQ (whose transactions are one half message each): a producer that sends many half
messages under one ``__transactionId__`` (MessageConst.PROPERTY_TRANSACTION_ID; the Spark connector's task attempts)
ends them all with one EndTransaction of scope TRANSACTION (or rolls back all of its producer group, scope
PRODUCER_GROUP). The index is built by reading the half queue (RMQ_SYS_TRANS_HALF_TOPIC queue 0) incrementally, from the
check progress on (everything before it is ended or copied further on), so each half message is read once (its
properties text only, mq_broker.transaction.half_record) and a restarted broker or a promoted slave rebuilds it on first
use (the same recovery rule as mq_broker.transaction.transaction_state). A check copy replaces its transaction's entry
(the newest copy is the one an end must name). Half messages without a transaction id are not indexed.

How a whole transaction ended is remembered in memory (:attr:`TransactionIndex.finished`) and on disk: the last op
record of every chunk of a whole end (an op record listing many half messages) is its summary
(mq_broker.transaction.half_message.whole_end_summary: how it ended and how many half messages so far, KEYS =
whole_end_key), which the store's IndexFile indexes like any KEYS. A transaction ended before the check progress is not
in the half queue any more, so a restarted broker (or a promoted slave, which builds its own IndexFile from the
CommitLog) recalls it from there (:meth:`TransactionIndex.recall`): a repeated commit after a restart is answered as
already ended, a commit of a rolled-back one is refused, as before the restart. Without the IndexFile
(messageIndexEnable off), or once the CommitLog file holding the summary is deleted, it is unknown (nothing open). Event
loop (no locking).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageDecodeError, decode_message
from mq_common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageConst
from mq_common.logging import get_logger

from mq_broker.store.api import MessageStore
from mq_broker.transaction.half_message import (
    HALF_QUEUE_ID,
    WHOLE_COUNT_PROPERTY,
    WHOLE_END_TYPE_PROPERTY,
    whole_end_key,
)
from mq_broker.transaction.half_record import parse_half_record
from mq_broker.transaction.transaction_state import TransactionState

log = get_logger("mq_broker.transaction")

FINISHED_REMEMBERED: Final = 65_536
"""Whole transactions ended through the index that are remembered (how they ended, how many half messages), so a
repeated end is answered as already ended; the oldest are forgotten first."""
RECALL_MAX: Final = 64
"""Summary op records of one transaction read from the IndexFile by :meth:`TransactionIndex.recall`."""


@dataclass(frozen=True, slots=True)
class Finished:
    """How a whole transaction ended through the index, and how many half messages that ended."""

    end_type: str
    count: int


class TransactionIndex:
    """(producer group, transaction id) -> {identity: CommitLog offset of its newest half message or copy}."""

    def __init__(self, store: MessageStore, state: TransactionState) -> None:
        self.store = store
        self.state = state
        self.by_group: dict[str, dict[str, dict[int, int]]] = {}
        self.finished: OrderedDict[tuple[str, str], Finished] = OrderedDict()
        self._scanned_to = -1
        """The next half queue offset to read; -1 before the first use (then: the check progress)."""

    def reset(self) -> None:
        """Forget the index (the next :meth:`catch_up` rebuilds it from the check progress)."""
        self.by_group.clear()
        self._scanned_to = -1

    def catch_up(self) -> None:
        """Index the half messages stored since the last call. The caller has loaded the transaction state."""
        end = self.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        if self._scanned_to > end:  # the queue was truncated (a demoted master): rebuild
            log.info("transaction_index_rebuilt", scanned_to=self._scanned_to, half_max_offset=end)
            self.reset()
        if self._scanned_to < 0:
            self._scanned_to = self.state.half_progress
        if self._scanned_to >= end:
            return
        indexed = 0
        by_group = self.by_group
        for raw in self.state.iter_half_raw(self._scanned_to, end):
            try:
                half = parse_half_record(raw, check_crc=False)
            except MessageDecodeError:
                log.warning("transaction_half_unreadable", scanned_to=self._scanned_to)
                continue
            txid = half.transaction_id
            if not txid:
                continue
            by_group.setdefault(half.producer_group, {}).setdefault(txid, {})[half.identity] = half.commit_log_offset
            indexed += 1
        self._scanned_to = end
        if indexed:
            log.debug("transaction_index_caught_up", indexed=indexed, scanned_to=end)

    def members(self, group: str, transaction_id: str) -> dict[int, int]:
        """A copy of the transaction's {identity: CommitLog offset} (empty when unknown)."""
        return dict(self.by_group.get(group, {}).get(transaction_id, {}))

    def transactions_of(self, group: str) -> list[str]:
        """The transaction ids of ``group`` with indexed half messages."""
        return list(self.by_group.get(group, {}))

    def drop(self, group: str, transaction_id: str, finished: Finished | None) -> None:
        """Forget a transaction's entry; ``finished`` (when given) is remembered for repeated ends."""
        txns = self.by_group.get(group)
        if txns is not None:
            txns.pop(transaction_id, None)
            if not txns:
                self.by_group.pop(group, None)
        if finished is not None:
            key = (group, transaction_id)
            self.finished[key] = finished
            self.finished.move_to_end(key)
            while len(self.finished) > FINISHED_REMEMBERED:
                self.finished.popitem(last=False)

    def recall(self, group: str, transaction_id: str) -> Finished | None:
        """How a whole transaction ended, from memory or else from its summary op records in the store's IndexFile
        (the newest-counting one; remembered in :attr:`finished`); None when neither knows it."""
        key = (group, transaction_id)
        known = self.finished.get(key)
        if known is not None:
            return known
        result = self.store.query_message(
            TRANS_OP_HALF_TOPIC, whole_end_key(group, transaction_id), RECALL_MAX, 0, 2**62
        )
        best: Finished | None = None
        for record in result.messages:
            try:
                op = decode_message(record, check_crc=False)
            except MessageDecodeError:
                continue
            props = op.properties
            if (
                props.get(MessageConst.PRODUCER_GROUP) != group
                or props.get(MessageConst.TRANSACTION_ID) != transaction_id
                or not props.get(WHOLE_COUNT_PROPERTY, "").isdigit()
            ):
                continue
            found = Finished(props.get(WHOLE_END_TYPE_PROPERTY, ""), int(props[WHOLE_COUNT_PROPERTY]))
            if best is None or found.count > best.count:
                best = found
        if best is not None:
            log.info(
                "transaction_whole_recalled",
                producer_group=group,
                transaction_id=transaction_id,
                end_type=best.end_type,
                count=best.count,
            )
            self.finished[key] = best
        return best
