"""The broker's in-flight POP state: every unresolved checkpoint, in memory, with a bit map of its acked messages.

Mirrors what RocketMQ keeps in PopBufferMergeService (checkpoints and their ack bits) and
PopInflightMessageCounter (messages popped and not acked per topic/group/queue). Rebuilt from the revive log at
start (mq_broker.consumer.pop.recovery); the log, not this table, is what survives a crash.

Memory: one :class:`InflightCheckPoint` per checkpoint (12 slots, shared strings and the one ``(0,)`` offset tuple of
single-message checkpoints), one entry in a per-queue dict, and two heap references: about 400 bytes for a
checkpoint of one message, so 100,000 in-flight messages cost at most ~40 MiB (tests/broker/test_broker_pop_inflight
measures it); a pop of 32 messages shares one checkpoint.

Event loop only (no locks): every read-modify-write here is synchronous; the two count queries may be called from
any thread (the metrics scrape).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Final

from mq_broker.consumer.pop.revive_log import AckMsg, CheckPoint, CkKey

DUE_BUCKET_MS: Final = 1_000
"""Checkpoints are grouped by the second their invisible time ends; a checkpoint is due once its second passed."""
_SINGLE: Final = (0,)

QueueKey = tuple[str, str, int]
"""(topic, group, queue id)."""


class InflightCheckPoint:
    """One unresolved checkpoint: the messages of one pop (or one change of invisible time) of one queue.

    ``acked``: bit i set when the i-th message is acked or an ack of it is being written (``pending`` counts those
    writes; a row with pending writes stays alive, and the revive service leaves it alone). ``alive`` turns False
    when every message is resolved. ``revive_offset``: where its record is in the revive queue (the revive offset never
    passes a live checkpoint). Ordered by revive offset (for the per-revive-queue heap).
    """

    __slots__ = (
        "acked",
        "alive",
        "group",
        "invisible_time_ms",
        "offset_diff",
        "pending",
        "pop_time_ms",
        "queue_id",
        "revive_offset",
        "revive_queue_id",
        "start_offset",
        "topic",
    )

    def __init__(self, ck: CheckPoint, revive_queue_id: int, revive_offset: int) -> None:
        self.topic = ck.topic
        self.group = ck.group
        self.queue_id = ck.queue_id
        self.start_offset = ck.start_offset
        self.pop_time_ms = ck.pop_time_ms
        self.invisible_time_ms = ck.invisible_time_ms
        self.offset_diff = _SINGLE if ck.queue_offset_diff == _SINGLE else ck.queue_offset_diff
        self.revive_queue_id = revive_queue_id
        self.revive_offset = revive_offset
        self.acked = 0
        self.pending = 0
        self.alive = True

    def __lt__(self, other: InflightCheckPoint) -> bool:
        return self.revive_offset < other.revive_offset

    @property
    def deadline_ms(self) -> int:
        """When its un-acked messages become visible again (pop time + invisible time)."""
        return self.pop_time_ms + self.invisible_time_ms

    @property
    def num(self) -> int:
        return len(self.offset_diff)

    @property
    def queue_key(self) -> QueueKey:
        return (self.topic, self.group, self.queue_id)

    def index_of(self, queue_offset: int) -> int:
        """PopCheckPoint#indexOfAck: the message's index, -1 when this checkpoint does not hold that offset."""
        diff = queue_offset - self.start_offset
        try:
            return self.offset_diff.index(diff)
        except ValueError:
            return -1

    def is_acked(self, index: int) -> bool:
        return bool(self.acked >> index & 1)

    def unacked_offsets(self) -> list[int]:
        """Queue offsets of the messages not acked (nor being acked), in pop order."""
        return [self.start_offset + d for i, d in enumerate(self.offset_diff) if not self.acked >> i & 1]

    def to_checkpoint(self, broker_name: str) -> CheckPoint:
        return CheckPoint(
            self.topic,
            self.group,
            self.queue_id,
            self.start_offset,
            self.pop_time_ms,
            self.invisible_time_ms,
            self.offset_diff,
            broker_name,
        )

    def ack_of(self, offsets: tuple[int, ...], broker_name: str) -> AckMsg:
        """The ack record of ``offsets`` of this checkpoint."""
        return AckMsg(self.topic, self.group, self.queue_id, self.start_offset, self.pop_time_ms, offsets, broker_name)


class InflightTable:
    """Unresolved checkpoints by name, by revive queue (oldest revive offset first) and by due second, plus the
    un-acked message count per (topic, group, queue). Bounded by the caller (PopMessageProcessor refuses to pop
    past ``pop_max_inflight_messages``)."""

    def __init__(self, revive_queue_num: int) -> None:
        assert revive_queue_num > 0
        self._revive_queue_num = revive_queue_num
        self.clear()

    def clear(self) -> None:
        """Forget everything (a broker that becomes master in controller mode rebuilds the table from its revive
        log)."""
        revive_queue_num = self._revive_queue_num
        self._by_queue: dict[QueueKey, dict[tuple[int, int], InflightCheckPoint]] = {}
        self._by_revive_queue: list[list[InflightCheckPoint]] = [[] for _ in range(revive_queue_num)]
        self._due: dict[int, list[InflightCheckPoint]] = {}
        self._due_seconds: list[int] = []
        self._unacked: dict[QueueKey, int] = {}
        self._reserved: set[CkKey] = set()
        self.message_count = 0
        self.checkpoint_count = 0

    # --- changes --------------------------------------------------------------------------------------------------

    def add(self, row: InflightCheckPoint) -> bool:
        """Track ``row`` and end its name's reservation; False (nothing changes) when a live checkpoint has its
        name already (a record read twice)."""
        rows = self._by_queue.setdefault(row.queue_key, {})
        if (row.start_offset, row.pop_time_ms) in rows:
            return False
        self._reserved.discard((row.topic, row.group, row.queue_id, row.start_offset, row.pop_time_ms))
        rows[(row.start_offset, row.pop_time_ms)] = row
        heapq.heappush(self._by_revive_queue[row.revive_queue_id], row)
        self._schedule(row, row.deadline_ms)
        count = row.num - row.acked.bit_count()
        self._unacked[row.queue_key] = self._unacked.get(row.queue_key, 0) + count
        self.message_count += count
        self.checkpoint_count += 1
        return True

    def claim(self, row: InflightCheckPoint, index: int) -> bool:
        """Start acking message ``index`` of a live row: its bit is set (a second claim fails: False) and
        ``row.pending`` keeps the row alive until :meth:`settle`."""
        if not row.alive or row.is_acked(index):
            return False
        row.acked |= 1 << index
        row.pending += 1
        self._count(row.queue_key, -1)
        return True

    def settle(self, row: InflightCheckPoint, index: int, *, stored: bool) -> None:
        """End a :meth:`claim`: ``stored`` keeps the bit (the row is resolved once every bit is set and nothing is
        pending), else the bit is cleared again (the ack record was not written)."""
        assert row.pending > 0
        assert row.is_acked(index)
        row.pending -= 1
        if not stored:
            row.acked &= ~(1 << index)
            self._count(row.queue_key, 1)
        elif row.pending == 0 and row.acked.bit_count() == row.num:
            self._resolve(row)

    def reserve_pop_time(self, topic: str, group: str, queue_id: int, start_offset: int, pop_time_ms: int) -> int:
        """A pop time from ``pop_time_ms`` on that names no live or reserved checkpoint of the queue at
        ``start_offset``; reserved until :meth:`add` or :meth:`release`."""
        rows = self._by_queue.get((topic, group, queue_id), {})
        while (start_offset, pop_time_ms) in rows or (topic, group, queue_id, start_offset, pop_time_ms) in (
            self._reserved
        ):
            pop_time_ms += 1
        self._reserved.add((topic, group, queue_id, start_offset, pop_time_ms))
        return pop_time_ms

    def release(self, key: CkKey) -> None:
        """Forget a reservation whose checkpoint was not stored."""
        self._reserved.discard(key)

    def reschedule(self, row: InflightCheckPoint, due_ms: int) -> None:
        """Look at a live row again at ``due_ms`` (a revive that could not finish)."""
        if row.alive:
            self._schedule(row, due_ms)

    def _resolve(self, row: InflightCheckPoint) -> None:
        row.alive = False
        rows = self._by_queue.get(row.queue_key)
        if rows is not None:
            rows.pop((row.start_offset, row.pop_time_ms), None)
            if not rows:
                del self._by_queue[row.queue_key]
        self.checkpoint_count -= 1

    def _count(self, key: QueueKey, delta: int) -> None:
        count = self._unacked.get(key, 0) + delta
        if count:
            self._unacked[key] = count
        else:
            self._unacked.pop(key, None)
        self.message_count += delta

    def _schedule(self, row: InflightCheckPoint, due_ms: int) -> None:
        second = -(-due_ms // DUE_BUCKET_MS)
        bucket = self._due.get(second)
        if bucket is None:
            bucket = self._due[second] = []
            heapq.heappush(self._due_seconds, second)
        bucket.append(row)

    # --- queries ----------------------------------------------------------------------------------------------------

    def find(self, key: CkKey) -> InflightCheckPoint | None:
        """The live checkpoint named ``key``, else None."""
        topic, group, queue_id, start_offset, pop_time_ms = key
        rows = self._by_queue.get((topic, group, queue_id))
        return None if rows is None else rows.get((start_offset, pop_time_ms))

    def pop_due(self, now_ms: int) -> Iterator[InflightCheckPoint]:
        """Live rows whose invisible time ended (their due second passed), each once per schedule; a row yielded
        is forgotten by the schedule until :meth:`reschedule`."""
        while self._due_seconds and self._due_seconds[0] * DUE_BUCKET_MS <= now_ms:
            second = heapq.heappop(self._due_seconds)
            for row in self._due.pop(second, ()):
                if row.alive:
                    yield row

    def min_live_revive_offset(self, revive_queue_id: int) -> int | None:
        """The revive offset of the oldest live checkpoint of a revive queue, None when it has none."""
        heap = self._by_revive_queue[revive_queue_id]
        while heap and not heap[0].alive:
            heapq.heappop(heap)
        return heap[0].revive_offset if heap else None

    def inflight_count(self, group: str, topic: str, queue_id: int) -> int:
        """Messages of ``topic``/``queue_id`` popped by ``group`` and not acked (nor revived). Any thread (one
        dict read; the metrics scrape runs on its HTTP thread)."""
        return self._unacked.get((topic, group, queue_id), 0)

    def inflight_by_group_topic(self) -> Mapping[tuple[str, str], int]:
        """(group, topic) -> messages popped and not acked. Any thread: it sums a copy of the counts (dict() copies
        without releasing the GIL)."""
        out: dict[tuple[str, str], int] = {}
        for (topic, group, _queue_id), count in dict(self._unacked).items():
            out[(group, topic)] = out.get((group, topic), 0) + count
        return out
