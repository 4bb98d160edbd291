"""Orderly POP state: per (topic, group, queue) what the last orderly pop handed out, which of it is acked, when
each message becomes visible again and how often each was handed out.

Mirrors org.apache.rocketmq.broker.offset.ConsumerOrderInfoManager and its OrderInfo (#checkBlock, #update with
#mergeOffsetConsumedCount, #commitAndNext, #updateNextVisibleTime, #getNextOffset), persisted as
``config/consumerOrderInfo.json`` (mq_broker.consumer.config_file: temp + fsync + rename, ``.bak`` kept) with
RocketMQ's keys: ``{"table": {"<topic>@<group>": {"<queueId>": {"p": popTime, "i": invisibleTime, "o": [first,
diff...], "ot": {offset: nextVisibleTime}, "oc": {offset: consumedCount}, "l": lastConsumeTimestamp, "cm":
commitOffsetBit, "a": attemptId}}}, "dataVersion": ...}``. Times in ms since the epoch, invisible time in ms.

An orderly pop writes no checkpoint: the group's consume offset stays at the first un-acked message and moves only
on acks (:meth:`ConsumerOrderInfoManager.commit_and_next`), so a message whose invisible time ended is read again by
the next pop (its consumed count + 1). Event loop only (but :meth:`ConsumerOrderInfoManager.hold_summary`, any
thread).

Holds (ours, for the FIFO metrics): a queue is *held* (blocked, in the metrics' words) from the first hand-out of a
pop's messages until the last of them is acked (or sent to ``%DLQ%``); redeliveries of its un-acked messages continue
the hold, so a message consumed over and over holds its queue the whole time. While held, nothing later in the queue
is handed out (only the un-acked messages again, once visible). The hold's start is kept in memory only (after a
restart a hold counts from the last pop); :attr:`ConsumerOrderInfoManager.on_hold_end` hears how long each hold lasted.

Attempt ids: the gateway sends ``<client id>/<attempt id>`` (ATTEMPT_SEPARATOR); an attempt id of the pop that holds
a queue, replayed under another client id, is :meth:`ConsumerOrderInfoManager.foreign_attempt`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from mq_broker.consumer.config_file import ConfigManager

CONSUMER_ORDER_INFO_FILE: Final = "consumerOrderInfo.json"
"""The file's name under the broker's ``config`` directory (BrokerPathConfigHelper#getConsumerOrderInfoPath)."""
TOPIC_GROUP_SEPARATOR: Final = "@"
"""ConsumerOrderInfoManager.TOPIC_GROUP_SEPARATOR."""
CLEAN_SPAN_FROM_LAST_MS: Final = 24 * 3600 * 1000
"""ConsumerOrderInfoManager.CLEAN_SPAN_FROM_LAST: a queue not popped orderly this long loses its order info."""
COMMIT_NOT_FOUND: Final = -1
"""commit_and_next: the offset is not in the queue's last orderly pop (or nothing was popped)."""
COMMIT_POP_TIME_MISMATCH: Final = -2
"""commit_and_next: the handle is of an earlier pop of the queue (the message was handed out again since)."""
ATTEMPT_SEPARATOR: Final = "/"
"""Between the client id and the client's attempt id in an attempt id the gateway sends (mq_gateway.v2.consumer.
receive.broker_attempt_id); the client id is what precedes the last separator."""
SUMMARY_ATTEMPTS: Final = 3
"""Copies of the table tried by :meth:`ConsumerOrderInfoManager.hold_summary` while the event loop changes it."""

HoldEndListener = Callable[[str, str, float], None]
"""(topic, group, held_ms): a hold of one of ``group``'s queues of ``topic`` ended after ``held_ms`` ms."""


@dataclass(frozen=True, slots=True)
class QueueHolds:
    """The orderly queues of one (topic, group) at one instant: ``held`` queues with un-acked messages of their
    last pop (their later messages wait) and ``oldest_hold_ms``, the start (ms since the epoch) of the oldest of
    those holds (0: none held)."""

    held: int = 0
    oldest_hold_ms: int = 0


@dataclass(slots=True)
class OrderInfo:
    """The last orderly pop of one queue. ``offsets``: queue offsets handed out, ascending; ``commit_bits``: bit i
    set when offsets[i] is acked; ``consumed_count``: offset -> earlier hand-outs (only offsets handed out before);
    ``next_visible_ms``: offset -> when it is visible again, when a change of invisible time moved it. Mirrors
    ConsumerOrderInfoManager.OrderInfo."""

    attempt_id: str
    pop_time_ms: int
    invisible_time_ms: int
    offsets: list[int]
    last_consume_ms: int
    commit_bits: int = 0
    consumed_count: dict[int, int] = field(default_factory=dict)
    next_visible_ms: dict[int, int] = field(default_factory=dict)
    hold_since_ms: int = 0
    """When the queue's current hold began (ms since the epoch; 0: at ``pop_time_ms``). In memory only."""

    def is_acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

    def is_held(self) -> bool:
        """Some message of the pop is not acked yet."""
        return bool(self.offsets) and self.commit_bits != (1 << len(self.offsets)) - 1

    @property
    def hold_start_ms(self) -> int:
        return self.hold_since_ms or self.pop_time_ms

    def need_block(self, attempt_id: str, invisible_time_ms: int, now_ms: int) -> bool:
        """OrderInfo#needBlock: an un-acked message of the last pop is still invisible at ``now_ms`` and the pop is
        not a retry of the same attempt (an empty ``attempt_id`` never matches)."""
        if not self.offsets:
            return False
        if attempt_id and attempt_id == self.attempt_id:
            return False
        invisible = self.invisible_time_ms if self.invisible_time_ms > 0 else invisible_time_ms
        for i, offset in enumerate(self.offsets):
            if not self.is_acked(i) and now_ms < self.next_visible_ms.get(offset, self.pop_time_ms + invisible):
                return True
        return False

    def next_offset(self) -> int:
        """OrderInfo#getNextOffset: the first un-acked offset, or one past the last when all are acked; -2 when
        nothing was popped."""
        if not self.offsets:
            return COMMIT_POP_TIME_MISMATCH
        for i, offset in enumerate(self.offsets):
            if not self.is_acked(i):
                return offset
        return self.offsets[-1] + 1

    def to_json(self) -> dict[str, Any]:
        first = self.offsets[0] if self.offsets else 0
        return {
            "p": self.pop_time_ms,
            "i": self.invisible_time_ms,
            "o": [first, *(o - first for o in self.offsets[1:])] if self.offsets else [],
            "ot": {str(k): v for k, v in self.next_visible_ms.items()},
            "oc": {str(k): v for k, v in self.consumed_count.items()},
            "l": self.last_consume_ms,
            "cm": self.commit_bits,
            "a": self.attempt_id,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OrderInfo:
        """Raises ValueError, TypeError or KeyError for a malformed entry."""
        raw = [int(o) for o in data.get("o") or []]
        offsets = [raw[0], *(raw[0] + d for d in raw[1:])] if raw else []
        return cls(
            attempt_id=str(data.get("a") or ""),
            pop_time_ms=int(data["p"]),
            invisible_time_ms=int(data.get("i") or 0),
            offsets=offsets,
            last_consume_ms=int(data.get("l") or 0),
            commit_bits=int(data.get("cm") or 0),
            consumed_count={int(k): int(v) for k, v in (data.get("oc") or {}).items()},
            next_visible_ms={int(k): int(v) for k, v in (data.get("ot") or {}).items()},
        )


class ConsumerOrderInfoManager(ConfigManager):
    """The orderly POP table (see the module docstring). Every change is written in the background
    (:meth:`persist_soon`); :meth:`persist` at stop. ``config_path`` None: kept in memory only (tests). Event loop
    only."""

    table_name: ClassVar[str] = "consumer order info"

    def __init__(self, config_path: Path | None) -> None:
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self._in_memory = config_path is None
        self.on_hold_end: HoldEndListener | None = None
        """Told (event loop) when the last un-acked message of a held queue is acked (the FIFO order wait)."""
        super().__init__(config_path or Path(CONSUMER_ORDER_INFO_FILE))

    def load(self) -> None:
        if not self._in_memory:
            super().load()

    def persist(self) -> None:
        if not self._in_memory:
            super().persist()

    def persist_soon(self) -> None:
        if not self._in_memory:
            super().persist_soon()

    @staticmethod
    def build_key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.build_key(topic, group), {}).get(queue_id)

    def check_block(
        self, attempt_id: str, topic: str, group: str, queue_id: int, invisible_time_ms: int, now_ms: int
    ) -> bool:
        """ConsumerOrderInfoManager#checkBlock: True when the queue must not be popped now (see
        :meth:`OrderInfo.need_block`)."""
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time_ms, now_ms)

    def foreign_attempt(
        self, attempt_id: str, topic: str, group: str, queue_ids: Iterable[int] | None, invisible_time_ms: int,
        now_ms: int,
    ) -> bool:  # fmt: skip
        """True when ``attempt_id`` (``<client id>/<attempt id>``) names the attempt of a pop that still blocks one
        of ``queue_ids`` (None: every queue) of ``topic`` for ``group`` under another client id: a replay by a
        client the attempt was not issued to. An attempt id without ATTEMPT_SEPARATOR, or with an empty attempt
        part, is never foreign. Costs one dict lookup when the group has no orderly state on the topic."""
        client, sep, attempt = attempt_id.rpartition(ATTEMPT_SEPARATOR)
        queues = self.table.get(self.build_key(topic, group)) if sep and attempt else None
        if not queues:
            return False
        infos = queues.values() if queue_ids is None else [queues[q] for q in queue_ids if q in queues]
        for info in infos:
            holder, held_sep, held_attempt = info.attempt_id.rpartition(ATTEMPT_SEPARATOR)
            if (
                held_sep
                and held_attempt == attempt
                and holder != client
                and info.need_block("", invisible_time_ms, now_ms)
            ):
                return True
        return False

    def update(
        self,
        attempt_id: str,
        topic: str,
        group: str,
        queue_id: int,
        pop_time_ms: int,
        invisible_time_ms: int,
        offsets: Sequence[int],
        now_ms: int,
    ) -> dict[int, int]:
        """ConsumerOrderInfoManager#update: record a pop of ``offsets``; returns offset -> earlier hand-outs of
        each offset handed out before (a retry of the same attempt keeps the counts)."""
        info = OrderInfo(attempt_id, pop_time_ms, invisible_time_ms, list(offsets), now_ms)
        previous = self.get(topic, group, queue_id)
        if previous is not None and previous.is_held():  # its un-acked messages come again: the hold goes on
            info.hold_since_ms = previous.hold_start_ms
        if previous is not None:
            if attempt_id and previous.attempt_id == attempt_id:
                info.consumed_count = dict(previous.consumed_count)
            else:
                before = set(previous.offsets)
                info.consumed_count = {o: previous.consumed_count.get(o, 0) + 1 for o in info.offsets if o in before}
        self.table.setdefault(self.build_key(topic, group), {})[queue_id] = info
        self.persist_soon()
        return info.consumed_count

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time_ms: int) -> int:
        """ConsumerOrderInfoManager#commitAndNext: mark ``queue_offset`` acked; returns the offset the group's
        consume offset may move to (:meth:`OrderInfo.next_offset`), ``queue_offset + 1`` when the queue has no
        order info, COMMIT_NOT_FOUND (-1) when the offset is not in its last pop, COMMIT_POP_TIME_MISMATCH (-2) when
        ``pop_time_ms`` is not the last pop's."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offsets:
            return COMMIT_NOT_FOUND
        if pop_time_ms != info.pop_time_ms:
            return COMMIT_POP_TIME_MISMATCH
        try:
            index = info.offsets.index(queue_offset)
        except ValueError:
            return COMMIT_NOT_FOUND
        was_held = info.is_held()
        info.commit_bits |= 1 << index
        self.persist_soon()
        if was_held and not info.is_held() and self.on_hold_end is not None:
            self.on_hold_end(topic, group, max(0.0, time.time() * 1000 - info.hold_start_ms))
        return info.next_offset()

    def update_next_visible_time(
        self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time_ms: int, next_visible_ms: int
    ) -> bool:
        """ConsumerOrderInfoManager#updateNextVisibleTime; False (nothing changes) when the queue has no order
        info, ``pop_time_ms`` is not its last pop's or the offset is not in it."""
        info = self.get(topic, group, queue_id)
        if info is None or pop_time_ms != info.pop_time_ms or queue_offset not in info.offsets:
            return False
        info.next_visible_ms[queue_offset] = next_visible_ms
        self.persist_soon()
        return True

    def auto_clean(
        self, read_queue_nums: Callable[[str], int | None], group_exists: Callable[[str], bool], now_ms: int
    ) -> int:
        """ConsumerOrderInfoManager#autoClean: drop the order info of a topic that no longer exists
        (``read_queue_nums`` None), of a deleted group, of a queue id past the topic's read queues and of a queue
        not popped for CLEAN_SPAN_FROM_LAST_MS; returns the queues dropped (the file is rewritten when any)."""
        dropped = 0
        for key in list(self.table):
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            queues = self.table[key]
            read_queues = read_queue_nums(topic)
            if read_queues is None or not group_exists(group):
                dropped += len(queues)
                del self.table[key]
                continue
            idle_before_ms = now_ms - CLEAN_SPAN_FROM_LAST_MS
            for queue_id in [q for q, i in queues.items() if q >= read_queues or i.last_consume_ms < idle_before_ms]:
                del queues[queue_id]
                dropped += 1
            if not queues:
                del self.table[key]
        if dropped:
            self.persist_soon()
        return dropped

    def hold_summary(self) -> dict[tuple[str, str], QueueHolds]:
        """(topic, group) -> :class:`QueueHolds` now, for every (topic, group) with orderly state. Any
        thread: the table is copied, and copied again (SUMMARY_ATTEMPTS at most) when the event loop changed it
        meanwhile (RuntimeError after that)."""
        summary: dict[tuple[str, str], QueueHolds] = {}
        for key, infos in self._copy_table():
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            held = oldest = 0
            for info in infos:
                if info.is_held():
                    held += 1
                    start = info.hold_start_ms
                    oldest = start if oldest == 0 else min(oldest, start)
            summary[(topic, group)] = QueueHolds(held, oldest)
        return summary

    def _copy_table(self) -> list[tuple[str, list[OrderInfo]]]:
        for _ in range(SUMMARY_ATTEMPTS - 1):
            try:
                return [(key, list(queues.values())) for key, queues in list(self.table.items())]
            except RuntimeError:  # "dictionary changed size during iteration"
                continue
        return [(key, list(queues.values())) for key, queues in list(self.table.items())]

    def encode(self) -> dict[str, Any]:
        return {
            "table": {
                key: {str(qid): info.to_json() for qid, info in queues.items()} for key, queues in self.table.items()
            },
            "dataVersion": self.data_version.to_json(),
        }

    def decode(self, data: Mapping[str, Any]) -> None:
        self.table = {
            str(key): {int(qid): OrderInfo.from_json(info) for qid, info in queues.items()}
            for key, queues in (data.get("table") or {}).items()
        }
