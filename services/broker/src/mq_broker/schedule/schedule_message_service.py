"""ScheduleMessageService: delivers the delay-level messages held on SCHEDULE_TOPIC_XXXX when they are due.

Mirrors org.apache.rocketmq.store.schedule.ScheduleMessageService (one DeliverDelayedMessageTimerTask per level,
progress in ``config/delayOffset.json`` = ``{"offsetTable": {"<level>": <queue offset>}, "dataVersion": {...}}``,
copied to slaves by SlaveSynchronize). Queue ``level - 1`` holds its level's messages in store order, which is due
order (one delay per level): each round, per level, the due head units are read, their records stored again on
REAL_TOPIC/REAL_QID (mq_broker.schedule.delivery; one ``put_messages`` per batch) and the offset moved on.

Exactly once, beyond RocketMQ's at-least-once: the file also keeps ``commitLogOffset``, the CommitLog end when the
offsets were taken (after the round's puts returned). On start (and on becoming master) the records stored since
then are walked for DELIVERED_FROM_OFFSET, and each level's offset moves past the units already delivered, so a
SIGKILL between a put and the next persist delivers nothing twice.

Runs on the event loop (one task); file reads and writes and the start-up walk run in worker threads. Only a master
runs it (a slave's offsets come from its master).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mq_common.codec import MessageDecodeError
from mq_common.constants import SCHEDULE_TOPIC
from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_wait

from mq_broker.consumer.config_file import load_json, persist_json
from mq_broker.ha.delay_offset_file import delay_offset_path
from mq_broker.schedule.delay_levels import DelayLevels
from mq_broker.schedule.delivery import (
    PERMANENT_REFUSALS,
    HeldRecordError,
    delivered_message,
    delivered_sources,
    now_ms,
)
from mq_broker.store.consume_queue import CqUnit
from mq_broker.store.message import MessageExtBrokerInner
from mq_broker.store.message_store import DefaultMessageStore

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics

log = get_logger("mq_broker.schedule")

DELIVER_TICK_MS: Final = 100
"""How often the levels are looked at (RocketMQ: DELAY_FOR_A_WHILE 100 ms)."""
DELIVER_BATCH: Final = 512
"""Units read and records stored per put, per level."""
PERSIST_REFRESH_MS: Final = 10_000
"""How often unchanged offsets are rewritten to move ``commitLogOffset`` on (a short recovery walk)."""
RETRY_AFTER_FAILURE_MS: Final = 1000
"""Pause after a put that did not store (RocketMQ: DELAY_FOR_A_PERIOD 10 s; we retry sooner, the put is idempotent
only through the DELIVERED_FROM_OFFSET walk, which the next round does not need: the offset did not move)."""


class ScheduleMessageService:
    """The delay levels' delivery on one master broker."""

    def __init__(
        self, store: DefaultMessageStore, levels: DelayLevels, config_dir: Path, metrics: BrokerMetrics | None = None
    ) -> None:
        self.store = store
        self.levels = levels
        self.path = delay_offset_path(config_dir)
        self.metrics = metrics
        self.offsets: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self._persisted_at_ms = 0

    # --- life cycle (event loop) ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load delayOffset.json, move past deliveries it does not know of, start delivering. Raises ValueError
        (unusable file and .bak). Idempotent."""
        if self._task is not None:
            return
        self.offsets = await asyncio.to_thread(self._recover)
        self._task = asyncio.create_task(self._run(), name="schedule-message-service")

    async def stop(self) -> None:
        """Stop delivering and persist the offsets (a slave, or shutdown). Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        await cancel_and_wait(task)
        await self._persist()

    # --- state ---------------------------------------------------------------------------------------------------

    def behind(self) -> dict[int, int]:
        """Per level: units on SCHEDULE_TOPIC_XXXX not delivered yet."""
        out: dict[int, int] = {}
        for level in range(1, self.levels.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, DelayLevels.queue_id(level))
            if cq is not None:
                out[level] = max(0, cq.max_offset_in_queue - self.offsets.get(level, 0))
        return out

    def min_held_offset(self) -> int | None:
        """The lowest CommitLog offset of a delay-level message not delivered yet (each level's head unit)."""
        lowest: int | None = None
        for level in range(1, self.levels.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, DelayLevels.queue_id(level))
            unit = cq.get_unit(self.offsets.get(level, 0)) if cq is not None else None
            if unit is not None and not unit.is_blank:
                lowest = unit.commit_log_offset if lowest is None else min(lowest, unit.commit_log_offset)
        return lowest

    def encode(self) -> dict[str, Any]:
        """The JSON object of delayOffset.json (ScheduleMessageService#encode plus ``commitLogOffset``)."""
        return {
            "offsetTable": {str(level): offset for level, offset in sorted(self.offsets.items())},
            "commitLogOffset": self.store.commit_log.max_offset,
        }

    def _recover(self) -> dict[int, int]:
        """Worker thread: the persisted offsets, each moved past the units whose delivery is in the CommitLog."""
        data = load_json(self.path) or {}
        offsets = {int(k): int(v) for k, v in dict(data.get("offsetTable") or {}).items() if str(k).isdigit()}
        delivered = delivered_sources(self.store.commit_log, int(data.get("commitLogOffset") or 0))
        for level in range(1, self.levels.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, DelayLevels.queue_id(level))
            if cq is None:
                continue
            offset = max(offsets.get(level, 0), cq.min_offset_in_queue)
            while True:
                unit = cq.get_unit(offset)
                if unit is None or unit.commit_log_offset not in delivered:
                    break
                offset += 1
            offsets[level] = offset
        log.info("schedule_offsets_recovered", offsets=offsets, deliveries_after_checkpoint=len(delivered))
        return offsets

    async def _persist(self) -> None:
        data = self.encode()
        await asyncio.to_thread(persist_json, self.path, data)
        self._dirty = False

    # --- delivery ------------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            pause_ms = DELIVER_TICK_MS
            try:
                if await self.deliver_round(now_ms()) is False:
                    pause_ms = RETRY_AFTER_FAILURE_MS
                now = now_ms()
                if self._dirty or now - self._persisted_at_ms >= PERSIST_REFRESH_MS:
                    await self._persist()
                    self._persisted_at_ms = now
            except OSError as exc:
                log.error("schedule_round_failed", error=str(exc))
                pause_ms = RETRY_AFTER_FAILURE_MS
            await asyncio.sleep(pause_ms / 1000)

    async def deliver_round(self, now_ms: int) -> bool:
        """Deliver every unit due at ``now_ms`` of every level; False when a put did not store (the rest waits for
        the next round). Event loop."""
        for level in range(1, self.levels.max_level + 1):
            cq = self.store.find_consume_queue(SCHEDULE_TOPIC, DelayLevels.queue_id(level))
            if cq is None:
                continue
            delay_ms = self.levels.delay_ms(level)
            while True:
                offset = max(self.offsets.get(level, 0), cq.min_offset_in_queue)
                units = cq.read_units(offset, DELIVER_BATCH) or []
                due = self._due_prefix(units, delay_ms, now_ms)
                if not due:
                    self.offsets[level] = offset
                    break
                consumed = await self._deliver(due, delay_ms, now_ms)
                self.offsets[level] = offset + consumed
                self._dirty = self._dirty or consumed > 0
                if consumed < len(due):
                    return False
                if len(due) < len(units) or len(units) < DELIVER_BATCH:
                    break
        return True

    def _due_prefix(self, units: Sequence[CqUnit], delay_ms: int, now_ms: int) -> list[CqUnit]:
        due: list[CqUnit] = []
        for unit in units:
            if unit.is_blank:
                due.append(unit)
                continue
            stored_ms = self.store.commit_log.store_timestamp_at(unit.commit_log_offset, unit.size)
            if stored_ms + delay_ms > now_ms:
                break
            due.append(unit)
        return due

    async def _deliver(self, units: Sequence[CqUnit], delay_ms: int, now_ms: int) -> int:
        """Store the deliveries of ``units`` (one put); returns how many units, from the first, are done: delivered,
        blank, unreadable or refused for good (MESSAGE_ILLEGAL); the count stops at the first put that may succeed
        later."""
        pending: list[tuple[CqUnit, MessageExtBrokerInner | None, int]] = []
        for unit in units:
            inner, stored_ms = None, 0
            if not unit.is_blank:
                try:
                    held = self.store.lookup_message_by_offset(unit.commit_log_offset)
                    if held is None:
                        raise HeldRecordError(f"no record at {unit.commit_log_offset}")
                    inner, stored_ms = delivered_message(held, now_ms), held.store_timestamp_ms
                except (MessageDecodeError, HeldRecordError) as exc:
                    log.error("schedule_record_skipped", commit_log_offset=unit.commit_log_offset, error=str(exc))
            pending.append((unit, inner, stored_ms))
        inners = [inner for _, inner, _ in pending if inner is not None]
        results = iter(await self.store.put_messages(inners) if inners else [])
        consumed = 0
        lateness: dict[str, list[float]] = {}
        for _unit, inner, stored_ms in pending:
            if inner is not None:
                result = next(results)
                if result.status.is_stored:
                    lateness.setdefault(inner.topic, []).append(float(max(0, now_ms - stored_ms - delay_ms)))
                elif result.status in PERMANENT_REFUSALS:
                    log.error("schedule_record_refused", topic=inner.topic, status=result.status.value)
                else:
                    log.warning("schedule_put_failed", status=result.status.value, remark=result.remark)
                    break
            consumed += 1
        if self.metrics is not None:
            for topic, values in lateness.items():
                self.metrics.on_delay_level_dequeue(topic, values)
        return consumed

    def offsets_snapshot(self) -> Mapping[int, int]:
        return dict(self.offsets)
