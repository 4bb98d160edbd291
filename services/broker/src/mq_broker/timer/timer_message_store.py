"""TimerMessageStore: timer messages held on rmq_sys_wheel_timer, delivered at their due time, recallable.

Mirrors org.apache.rocketmq.store.timer.TimerMessageStore (enqueue from the timer topic's ConsumeQueue, a time
wheel, dequeue to the real topic, delete markers for recall, ``config/timercheck``), with a design of ours for the
files (docs/architecture.md, "Timers and delay levels"):

- **The timer log is the rmq_sys_wheel_timer ConsumeQueue** (20-byte units: CommitLog offset, size, tag hash), so
  it is written, flushed, recovered and replicated to slaves with the CommitLog it indexes; RocketMQ keeps a timerlog
  and a timewheel file of its own. The wheel (mq_broker.timer.timer_wheel) is memory only, rebuilt on start from the
  units at and after the checkpoint's ``minPendingQueueOffset``: ~40 bytes a pending timer.
- **Delivery and its proof are one record**: a due timer is stored on its REAL_TOPIC/REAL_QID with
  DELIVERED_FROM_OFFSET (mq_broker.schedule.delivery). ``config/timerCheckpoint.json`` is written at the end of a
  round that changed something: ``firedUntilMs`` S, ``queueOffset`` Q (units enqueued), ``minPendingQueueOffset``,
  ``commitLogOffset`` C (the CommitLog end after the round's puts). Every timer with a unit below Q and a due time
  below S is done; every delivery made after the checkpoint lies after C. Recovery = units from
  minPendingQueueOffset, minus (unit < Q and due < S), minus the DELIVERED_FROM_OFFSET values found after C: exactly
  the pending set, after a SIGKILL or on a slave promoted with its master's (older) checkpoint. Nothing fires twice,
  nothing is lost, nothing fires early (a timer fires when the clock reaches its TIMER_OUT_MS).
- **Recall** (RecallMessageProcessor): a delete marker on rmq_sys_wheel_timer (TIMER_DEL_UNIQKEY = ``topic+uniqKey``,
  same due time); the wheel skips the target when it comes due. Recall is refused when the target is unknown, already
  delivered or already recalled (RocketMQ writes the marker blindly).

Runs on the event loop: one task enqueues new units and fires due timers every TICK_MS; reads of many records at
start run in a worker thread. Only a master fires; in controller mode it starts on becoming master.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mq_common.codec import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageDecodeError, MessageExt, decode_message
from mq_common.constants import TIMER_TOPIC, MessageConst
from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_wait

from mq_broker.consumer.config_file import load_json, persist_json
from mq_broker.schedule.delivery import (
    PERMANENT_REFUSALS,
    HeldRecordError,
    delivered_message,
    delivered_sources,
    now_ms,
)
from mq_broker.store.commit_log import last_property_value, parse_dispatch
from mq_broker.store.consume_queue import CqUnit
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.timer.timer_wheel import SLOT_MS, TimerEntry, TimerWheel

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics

log = get_logger("mq_broker.timer")

TIMER_CHECKPOINT_FILE_NAME: Final = "timerCheckpoint.json"
TICK_MS: Final = 100
"""How often new units are enqueued and due timers fired (the lateness floor)."""
ENQUEUE_BATCH: Final = 4096
"""Units read per step; the loop yields between steps."""
MAX_ENQUEUE_STEPS_PER_TICK: Final = 64
"""Enqueue steps per tick before due timers get their turn (a backlog of new units does not starve firing)."""
PREPARE_AHEAD_MS: Final = 5000
"""How far ahead deliveries are built (prepare_ahead)."""
PREPARE_PER_TICK: Final = 8192
"""Deliveries built per tick at most (~120 ms of CPU), so preparing never holds up firing for long."""
PREPARE_CHUNK: Final = 1024
"""Deliveries built between yields to the event loop."""
PREPARE_MAX: Final = 200_000
"""Deliveries held built at once (~1.2 KiB each for 1 KiB bodies)."""
FIRE_TAKE: Final = 8192
"""Timers taken from the wheel per step."""
FIRE_BATCH: Final = 2048
"""Deliveries per put_messages call."""
RETRY_AFTER_FAILURE_MS: Final = 1000
CHECKPOINT_REFRESH_MS: Final = 10_000
"""How often an otherwise unchanged checkpoint is rewritten to move its CommitLog offset on."""
MIN_PENDING_REFRESH_MS: Final = 10_000
"""How often the checkpoint's minPendingQueueOffset is recomputed (O(slots); a stale, lower value is safe)."""
RECALL_TAG: Final = "_RECALL_TAG_"
"""RecallMessageProcessor.RECALL_MESSAGE_TAG: the TAGS of a delete marker."""
_MARKER_TOPIC: Final = ""
"""The wheel's topic of a delete marker (markers are not pending messages of any topic)."""


def delete_key(topic: str, uniq_key: str) -> str:
    """TimerMessageStore#buildDeleteKey."""
    return f"{topic}+{uniq_key}"


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    """``config/timerCheckpoint.json`` (see the module docstring). Mirrors TimerCheckpoint."""

    fired_until_ms: int = 0
    queue_offset: int = 0
    min_pending_queue_offset: int = 0
    commit_log_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "firedUntilMs": self.fired_until_ms,
            "queueOffset": self.queue_offset,
            "minPendingQueueOffset": self.min_pending_queue_offset,
            "commitLogOffset": self.commit_log_offset,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TimerCheckpoint:
        if not data:
            return cls()
        return cls(
            int(data.get("firedUntilMs", 0)),
            int(data.get("queueOffset", 0)),
            int(data.get("minPendingQueueOffset", 0)),
            int(data.get("commitLogOffset", 0)),
        )


@dataclass(frozen=True, slots=True)
class HeldTimer:
    """What the wheel needs from a held record: its due time, real topic, and, for a delete marker, its key."""

    deliver_ms: int
    topic: str
    delete_key: str | None


def read_held_timer(store: DefaultMessageStore, unit: CqUnit) -> HeldTimer | None:
    """The held record of a rmq_sys_wheel_timer unit; None for a blank unit or a record that is not a timer."""
    if unit.is_blank:
        return None
    raw = store.commit_log.get_message(unit.commit_log_offset, unit.size)
    request = parse_dispatch(raw, unit.commit_log_offset, check_crc=False) if raw else None
    if request is None:
        return None
    props = request.properties
    due = last_property_value(props, MessageConst.TIMER_OUT_MS)
    if due is None or not due.isdigit():
        return None
    topic = last_property_value(props, MessageConst.REAL_TOPIC) or ""
    return HeldTimer(int(due), topic, last_property_value(props, MessageConst.TIMER_DEL_UNIQKEY))


@dataclass(frozen=True, slots=True)
class _Delivery:
    """A due timer's outcome, built ahead: ``inner`` to store (None: a marker or an unreadable record),
    ``recall_key`` (topic+uniqKey: skipped if recalled meanwhile), ``marker_key`` for a delete marker."""

    inner: MessageExtBrokerInner | None
    recall_key: str
    marker_key: str | None


@dataclass(slots=True)
class _Rebuilt:
    wheel: TimerWheel
    recalled: dict[str, int]
    queue_offset: int
    delivered_since_checkpoint: int


class TimerMessageStore:
    """Pending timers of one broker and their delivery."""

    def __init__(self, store: DefaultMessageStore, config_dir: Path, metrics: BrokerMetrics | None = None) -> None:
        self.store = store
        self.path = config_dir / TIMER_CHECKPOINT_FILE_NAME
        self.metrics = metrics
        self.wheel = TimerWheel()
        self.recalled: dict[str, int] = {}  # delete key -> due ms, until the marker comes due
        self.queue_offset = 0
        self.running = False
        self._task: asyncio.Task[None] | None = None
        self._written = TimerCheckpoint()
        self._prepared: dict[int, _Delivery] = {}  # held record offset -> its delivery, built ahead
        self._prepare_cursor = (0, 0)  # (due second, index in its slot) prepare_ahead goes on from
        self._written_at_ms = 0
        self._changed = False  # timers fired or markers done since the last checkpoint
        self._min_pending = 0
        self._min_pending_at_ms = 0
        # The lowest CommitLog offset a pending timer needs (refreshed with _min_pending; read by the clean thread).
        self.min_held_offset: int | None = None

    # --- life cycle (event loop) ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Rebuild the wheel from the checkpoint and the ConsumeQueue, then enqueue and fire. Raises ValueError when
        timerCheckpoint.json and its .bak are unusable. Idempotent."""
        if self._task is not None:
            return
        rebuilt = await asyncio.to_thread(self._rebuild)
        self.wheel, self.recalled, self.queue_offset = rebuilt.wheel, rebuilt.recalled, rebuilt.queue_offset
        self._min_pending, self._min_pending_at_ms = self._min_pending_now(), now_ms()
        self.min_held_offset = self.wheel.min_commit_log_offset()
        log.info(
            "timer_store_recovered",
            pending=len(self.wheel),
            recalled=len(self.recalled),
            queue_offset=self.queue_offset,
            deliveries_after_checkpoint=rebuilt.delivered_since_checkpoint,
        )
        if self.metrics is not None:
            for topic, count in self.wheel.pending_by_topic().items():
                self.metrics.on_timer_enqueue(topic, count)
        self.running = True
        self._task = asyncio.create_task(self._run(), name="timer-message-store")

    async def stop(self) -> None:
        """Stop firing and write the checkpoint (shutdown, or this broker became a slave). Idempotent."""
        task, self._task = self._task, None
        self.running = False
        if task is None:
            return
        await cancel_and_wait(task)
        self._prepared.clear()
        self._prepare_cursor = (0, 0)
        await self._checkpoint(now_ms(), force=True)

    def _rebuild(self) -> _Rebuilt:
        """Worker thread: the pending set as the module docstring defines it."""
        checkpoint = TimerCheckpoint.from_json(load_json(self.path))
        wheel, recalled = TimerWheel(), dict[str, int]()
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return _Rebuilt(wheel, recalled, 0, 0)
        delivered = delivered_sources(self.store.commit_log, checkpoint.commit_log_offset)
        offset = max(checkpoint.min_pending_queue_offset, cq.min_offset_in_queue)
        end = cq.max_offset_in_queue
        while offset < end:
            units = cq.read_units(offset, ENQUEUE_BATCH)
            if not units:
                break
            for unit in units:
                held = read_held_timer(self.store, unit)
                if held is None or unit.commit_log_offset in delivered:
                    continue
                if unit.queue_offset < checkpoint.queue_offset and held.deliver_ms < checkpoint.fired_until_ms:
                    continue
                _add(wheel, recalled, unit, held)
            offset = units[-1].queue_offset + 1
        return _Rebuilt(wheel, recalled, offset, len(delivered))

    # --- the loop ------------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            pause_ms = TICK_MS
            try:
                for _ in range(MAX_ENQUEUE_STEPS_PER_TICK):
                    if not self.enqueue_step():
                        break
                    await asyncio.sleep(0)
                if not await self.fire_due(now_ms()):
                    pause_ms = RETRY_AFTER_FAILURE_MS
                await self.prepare_ahead(now_ms())
                await self._checkpoint(now_ms())
            except OSError as exc:
                log.error("timer_round_failed", error=str(exc))
                pause_ms = RETRY_AFTER_FAILURE_MS
            await asyncio.sleep(pause_ms / 1000)

    def enqueue_step(self) -> bool:
        """Put up to ENQUEUE_BATCH new rmq_sys_wheel_timer units into the wheel; True when more are waiting."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return False
        self.queue_offset = max(self.queue_offset, cq.min_offset_in_queue)
        if self.queue_offset >= cq.max_offset_in_queue:
            return False
        units = cq.read_units(self.queue_offset, ENQUEUE_BATCH)
        if not units:
            return False
        counts: dict[str, int] = {}
        for unit in units:
            held = read_held_timer(self.store, unit)
            if held is not None:
                _add(self.wheel, self.recalled, unit, held)
                if held.delete_key is None:
                    counts[held.topic] = counts.get(held.topic, 0) + 1
        self.queue_offset = units[-1].queue_offset + 1
        if self.metrics is not None:
            for topic, count in counts.items():
                self.metrics.on_timer_enqueue(topic, count)
        return self.queue_offset < cq.max_offset_in_queue

    async def fire_due(self, at_ms: int) -> bool:
        """Deliver every timer due at ``at_ms``; False when a put failed (the undelivered rest goes back into the
        wheel for the next round)."""
        while True:
            entries = self.wheel.take_due(at_ms, FIRE_TAKE)
            if not entries:
                return True
            for start in range(0, len(entries), FIRE_BATCH):
                done = await self._fire(entries[start : start + FIRE_BATCH], at_ms)
                if done < min(FIRE_BATCH, len(entries) - start):
                    for entry in entries[start + done :]:
                        self.wheel.add(entry.deliver_ms, entry.commit_log_offset, entry.size, entry.queue_offset,
                                       entry.topic)  # fmt: skip
                    return False

    async def _fire(self, entries: Sequence[TimerEntry], at_ms: int) -> int:
        """One put of the deliveries of ``entries`` (prepared ahead, else built now); returns how many entries, from
        the first, are done."""
        fire_ms = now_ms()
        dequeue = f"{MessageConst.TIMER_DEQUEUE_MS}{NAME_VALUE_SEPARATOR}{fire_ms}{PROPERTY_SEPARATOR}"
        plan: list[tuple[TimerEntry, MessageExtBrokerInner | None]] = []
        markers: list[str] = []
        for entry in entries:
            prepared = self._prepared.pop(entry.commit_log_offset, None) or self._prepare(entry.commit_log_offset)
            inner = None
            if prepared.marker_key is not None:
                markers.append(prepared.marker_key)
            elif prepared.inner is not None and prepared.recall_key in self.recalled:
                log.info("timer_recalled_skipped", key=prepared.recall_key)
            elif prepared.inner is not None:
                inner = replace(prepared.inner, properties_string=prepared.inner.properties_string + dequeue)
            plan.append((entry, inner))
        inners = [inner for _, inner in plan if inner is not None]
        results = iter(await self.store.put_messages(inners) if inners else [])
        done = 0
        lateness: dict[str, list[float]] = {}
        for entry, inner in plan:
            if inner is not None:
                result: PutMessageResult = next(results)
                if result.status.is_stored:
                    lateness.setdefault(inner.topic, []).append(float(max(0, fire_ms - entry.deliver_ms)))
                elif result.status in PERMANENT_REFUSALS:
                    log.error("timer_delivery_refused", topic=inner.topic, status=result.status.value)
                else:
                    log.warning("timer_put_failed", status=result.status.value, remark=result.remark)
                    break
            done += 1
        self._changed = self._changed or done > 0
        if done == len(plan):  # a marker is done with its due time; its target (enqueued before it) too
            for key in markers:
                self.recalled.pop(key, None)
        if self.metrics is not None:
            for topic, values in lateness.items():
                self.metrics.on_timer_dequeue(topic, values)
        return done

    def _prepare(self, commit_log_offset: int) -> _Delivery:
        """The delivery of the held record at ``commit_log_offset``: the record to store (without
        TIMER_DEQUEUE_MS) and the key a recall of it has, or a delete marker's key, or nothing (unreadable)."""
        try:
            held = self.store.lookup_message_by_offset(commit_log_offset)
            if held is None:
                raise HeldRecordError(f"no record at {commit_log_offset}")
            props = held.properties
            marker_key = props.get(MessageConst.TIMER_DEL_UNIQKEY)
            if marker_key is not None:
                return _Delivery(None, "", marker_key)
            recall_key = delete_key(props.get(MessageConst.REAL_TOPIC, ""), held.uniq_key or "")
            return _Delivery(delivered_message(held, None), recall_key, None)
        except (MessageDecodeError, HeldRecordError) as exc:
            log.error("timer_record_skipped", commit_log_offset=commit_log_offset, error=str(exc))
            return _Delivery(None, "", None)

    async def prepare_ahead(self, at_ms: int) -> int:
        """Build the deliveries of the timers due within PREPARE_AHEAD_MS of ``at_ms``, second by second, at most
        PREPARE_PER_TICK of them (and PREPARE_MAX held at once): when they come due only their puts remain, so a
        second with 100,000 timers fires in a fraction of a second. Returns how many were built. A timer added to
        a second already walked, or a slot changed under the cursor, is built when it fires instead."""
        horizon_s = (at_ms + PREPARE_AHEAD_MS) // SLOT_MS
        second, index = self._prepare_cursor
        if second < at_ms // SLOT_MS:
            second, index = at_ms // SLOT_MS, 0
        built = 0
        while second <= horizon_s and built < PREPARE_PER_TICK and len(self._prepared) < PREPARE_MAX:
            want = min(PREPARE_CHUNK, PREPARE_PER_TICK - built)
            offsets = self.wheel.slot_offsets(second, index, want)
            for offset in offsets:
                if offset not in self._prepared:
                    self._prepared[offset] = self._prepare(offset)
                    built += 1
            if len(offsets) < want:
                second, index = second + 1, 0
            else:
                index += len(offsets)
            self._prepare_cursor = (second, index)
            await asyncio.sleep(0)
        return built

    # --- checkpoint ----------------------------------------------------------------------------------------------

    def checkpoint_now(self, at_ms: int) -> TimerCheckpoint:
        """The checkpoint of the state between rounds (no put in flight)."""
        earliest = self.wheel.earliest_ms()
        fired_until = at_ms + 1 if earliest is None else min(at_ms + 1, earliest)
        if at_ms - self._min_pending_at_ms >= MIN_PENDING_REFRESH_MS:
            self._min_pending, self._min_pending_at_ms = self._min_pending_now(), at_ms
            self.min_held_offset = self.wheel.min_commit_log_offset()
        return TimerCheckpoint(fired_until, self.queue_offset, self._min_pending, self.store.commit_log.max_offset)

    def _min_pending_now(self) -> int:
        lowest = self.wheel.min_queue_offset()
        return self.queue_offset if lowest is None else lowest

    async def _checkpoint(self, at_ms: int, *, force: bool = False) -> None:
        """Write the checkpoint when the wheel changed since the last one (units enqueued, timers fired), or when
        CHECKPOINT_REFRESH_MS passed and the CommitLog moved (so the recovery walk stays short); not every tick
        of a busy broker."""
        checkpoint = self.checkpoint_now(at_ms)
        written = self._written
        changed = self._changed or checkpoint.queue_offset != written.queue_offset
        stale = (
            at_ms - self._written_at_ms >= CHECKPOINT_REFRESH_MS
            and checkpoint.commit_log_offset != written.commit_log_offset
        )
        if not (force or changed or stale):
            return
        self._changed = False
        await asyncio.to_thread(persist_json, self.path, checkpoint.to_json())
        self._written, self._written_at_ms = checkpoint, at_ms

    # --- queries and recall (event loop) -------------------------------------------------------------------------

    def pending_by_topic(self) -> dict[str, int]:
        """Pending timers per real topic (recalled ones excluded)."""
        pending = self.wheel.pending_by_topic()
        pending.pop(_MARKER_TOPIC, None)
        for key in self.recalled:
            topic = key.rsplit("+", 1)[0]
            if pending.get(topic, 0) > 0:
                pending[topic] -= 1
        return {t: n for t, n in pending.items() if n > 0}

    def find_held(self, topic: str, uniq_key: str) -> tuple[list[MessageExt], list[MessageExt]]:
        """(held timers, delete markers) of ``topic`` with UNIQ_KEY ``uniq_key``, from the index."""
        found = self.store.query_message_by_unique_key(TIMER_TOPIC, uniq_key)
        held: list[MessageExt] = []
        markers: list[MessageExt] = []
        for raw in found.messages:
            try:
                msg = decode_message(raw, check_crc=False, decompress=False)
            except MessageDecodeError:
                continue
            if msg.properties.get(MessageConst.REAL_TOPIC) != topic:
                continue
            (markers if MessageConst.TIMER_DEL_UNIQKEY in msg.properties else held).append(msg)
        return held, markers

    def catch_up(self) -> None:
        """Enqueue the units stored since the last tick (bounded: MAX_ENQUEUE_STEPS_PER_TICK steps)."""
        for _ in range(MAX_ENQUEUE_STEPS_PER_TICK):
            if not self.enqueue_step():
                break

    def is_pending(self, msg: MessageExt) -> bool:
        """Whether the held record ``msg`` waits in the wheel (new units are enqueued first, so a timer sent a
        moment ago counts)."""
        self.catch_up()
        due = msg.properties.get(MessageConst.TIMER_OUT_MS, "")
        return due.isdigit() and self.wheel.contains(int(due), msg.commit_log_offset)

    def marker_for(self, topic: str, uniq_key: str, deliver_ms: int, producer_group: str) -> MessageExtBrokerInner:
        """The delete marker of a recall (RecallMessageProcessor#buildMessage)."""
        return MessageExtBrokerInner.build(
            topic=TIMER_TOPIC,
            queue_id=0,
            body=b"0",
            properties={
                MessageConst.TAGS: RECALL_TAG,
                MessageConst.TIMER_DEL_UNIQKEY: delete_key(topic, uniq_key),
                MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
                MessageConst.TIMER_OUT_MS: str(deliver_ms),
                MessageConst.REAL_TOPIC: topic,
                MessageConst.REAL_QUEUE_ID: "0",
                MessageConst.PRODUCER_GROUP: producer_group,
            },
            born_timestamp_ms=now_ms(),
        )

    def note_recalled(self, topic: str, uniq_key: str, deliver_ms: int) -> None:
        self.recalled[delete_key(topic, uniq_key)] = deliver_ms


def _add(wheel: TimerWheel, recalled: dict[str, int], unit: CqUnit, held: HeldTimer) -> None:
    if held.delete_key is not None:
        recalled[held.delete_key] = held.deliver_ms
        wheel.add(held.deliver_ms, unit.commit_log_offset, unit.size, unit.queue_offset, _MARKER_TOPIC)
    else:
        wheel.add(held.deliver_ms, unit.commit_log_offset, unit.size, unit.queue_offset, held.topic)
