"""The in-memory time wheel of pending timer messages: one slot per second of due time.

Plays the part of RocketMQ's TimerWheel + TimerLog (org.apache.rocketmq.store.timer), rebuilt from the
rmq_sys_wheel_timer ConsumeQueue on start instead of kept in files of its own (mq_broker.timer.timer_message_store
says why). A slot is one flat ``array('q')`` of :data:`STRIDE` integers per timer::

    0  deliver_ms         due time, ms since the epoch (TIMER_OUT_MS)
    1  commit_log_offset  of the held record
    2  size               of the held record, bytes
    3  queue_offset       of its rmq_sys_wheel_timer ConsumeQueue unit
    4  topic_id           index into :attr:`TimerWheel.topics` (the real topic)

40 bytes of array a timer; with the slot and dict overhead of a day of seconds, about 68 bytes were measured per
pending timer (a million: +65 MiB of broker memory, docs/performance.md "Timers"). Event loop only.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

STRIDE: Final = 5
SLOT_MS: Final = 1000


@dataclass(frozen=True, slots=True)
class TimerEntry:
    deliver_ms: int
    commit_log_offset: int
    size: int
    queue_offset: int
    topic: str


class TimerWheel:
    """Pending timers by due second."""

    def __init__(self) -> None:
        self._slots: dict[int, array[int]] = {}
        self._seconds: list[int] = []  # heap of the keys of _slots
        self.topics: list[str] = []
        self._topic_ids: dict[str, int] = {}
        self._pending: list[int] = []  # per topic id
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _topic_id(self, topic: str) -> int:
        topic_id = self._topic_ids.get(topic)
        if topic_id is None:
            topic_id = self._topic_ids[topic] = len(self.topics)
            self.topics.append(topic)
            self._pending.append(0)
        return topic_id

    def add(self, deliver_ms: int, commit_log_offset: int, size: int, queue_offset: int, topic: str) -> None:
        """Add one timer (any due time, past ones included: they come out of the next :meth:`take_due`)."""
        second = deliver_ms // SLOT_MS
        slot = self._slots.get(second)
        if slot is None:
            slot = self._slots[second] = array("q")
            heapq.heappush(self._seconds, second)
        topic_id = self._topic_id(topic)
        slot.extend((deliver_ms, commit_log_offset, size, queue_offset, topic_id))
        self._pending[topic_id] += 1
        self.size += 1

    def take_due(self, now_ms: int, max_count: int) -> list[TimerEntry]:
        """Remove and return up to ``max_count`` timers due at ``now_ms`` (deliver_ms <= now_ms), earliest second
        first, in enqueue order within a second."""
        out: list[TimerEntry] = []
        while self._seconds and self._seconds[0] * SLOT_MS <= now_ms and len(out) < max_count:
            second = self._seconds[0]
            slot = self._slots[second]
            if (second + 1) * SLOT_MS - 1 <= now_ms:  # the whole second is due: take from its front
                n = min(max_count - len(out), len(slot) // STRIDE) * STRIDE
                chunk = slot[:n]
                del slot[:n]
                out.extend(self._entry(chunk, i) for i in range(0, n, STRIDE))
                if not slot:
                    del self._slots[second]
                    heapq.heappop(self._seconds)
                continue
            keep = array("q")  # the current second: only what is due by now
            for i in range(0, len(slot), STRIDE):
                if len(out) < max_count and slot[i] <= now_ms:
                    out.append(self._entry(slot, i))
                else:
                    keep.extend(slot[i : i + STRIDE])
            if keep:
                self._slots[second] = keep
            else:
                del self._slots[second]
                heapq.heappop(self._seconds)
            break
        for entry in out:
            self._pending[self._topic_ids[entry.topic]] -= 1
        self.size -= len(out)
        return out

    def _entry(self, slot: array[int], i: int) -> TimerEntry:
        return TimerEntry(slot[i], slot[i + 1], slot[i + 2], slot[i + 3], self.topics[slot[i + 4]])

    def contains(self, deliver_ms: int, commit_log_offset: int) -> bool:
        """Whether the timer of the held record at ``commit_log_offset`` due at ``deliver_ms`` is pending."""
        slot = self._slots.get(deliver_ms // SLOT_MS)
        return slot is not None and commit_log_offset in slot[1::STRIDE]

    def slot_offsets(self, second: int, start: int, count: int) -> list[int]:
        """The held-record offsets of up to ``count`` timers of due second ``second`` from its ``start``-th."""
        slot = self._slots.get(second)
        if slot is None:
            return []
        return list(slot[start * STRIDE + 1 : (start + count) * STRIDE : STRIDE])

    def earliest_ms(self) -> int | None:
        """The earliest pending due time, None when nothing is pending."""
        if not self._seconds:
            return None
        return min(self._slots[self._seconds[0]][0::STRIDE])

    def min_queue_offset(self) -> int | None:
        """The smallest ConsumeQueue offset of a pending timer (a slot's first entry is its smallest)."""
        return min((slot[3] for slot in self._slots.values()), default=None)

    def min_commit_log_offset(self) -> int | None:
        """The lowest CommitLog offset of a pending timer's held record. O(pending), in C per slot."""
        return min((min(slot[1::STRIDE]) for slot in self._slots.values() if slot), default=None)

    def pending_by_topic(self) -> dict[str, int]:
        return {topic: n for topic, n in zip(self.topics, self._pending, strict=True) if n > 0}

    def topic_range_steps(self, topic: str, slots_per_step: int = 512) -> Iterator[tuple[int, int, int] | None]:
        """(pending timers, earliest due ms, latest due ms) of ``topic`` (zeros when none), computed in steps: the
        generator yields None after every ``slots_per_step`` slots (the caller may let the loop run; each slot is
        read whole between yields) and the result last. A slot of one topic costs two C-speed min/max."""
        topic_id = self._topic_ids.get(topic)
        count = 0 if topic_id is None else self._pending[topic_id]
        if topic_id is None or count == 0:
            yield 0, 0, 0
            return
        earliest, latest = 0, 0
        for n, slot in enumerate(list(self._slots.values()), 1):
            ids = slot[4::STRIDE]
            matches = ids.count(topic_id)
            if matches:
                dues = slot[0::STRIDE]
                if matches == len(ids):
                    low, high = min(dues), max(dues)
                else:
                    mine = [d for d, t in zip(dues, ids, strict=True) if t == topic_id]
                    low, high = min(mine), max(mine)
                earliest = low if earliest == 0 else min(earliest, low)
                latest = max(latest, high)
            if n % slots_per_step == 0:
                yield None
        yield count, earliest, latest

    def topic_range(self, topic: str) -> tuple[int, int, int]:
        """:meth:`topic_range_steps` in one go."""
        *_, result = self.topic_range_steps(topic)
        assert result is not None
        return result

    def entries(self) -> Iterator[TimerEntry]:
        """Every pending timer (no order). For tests and admin queries."""
        for slot in self._slots.values():
            for i in range(0, len(slot), STRIDE):
                yield self._entry(slot, i)
