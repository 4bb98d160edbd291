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
the next pop (its consumed count + 1). Event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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

    def is_acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

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
        info.commit_bits |= 1 << index
        self.persist_soon()
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
