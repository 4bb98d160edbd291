"""Helpers for the timer rounds (test_timer_kill.py, test_timer_failover.py) and the timer benchmark
(tests/bench/bench_timer.py): timer and delay-level sends over a broker's SendStream, recalls, the read-back of a real
topic, and the exactly-once verdict.

A round (:func:`send_round`) sends a few hundred timers due over the next 2-10 s, a burst of thousands due at one
instant (the moment to kill the broker), delay-level messages (levels "1s 2s 3s"; a thousand of them at level 3, due
with the burst), then recalls every fifth timer
due far enough ahead (RecallMessage, handles built as the producer builds them); the next round, on the restarted or
promoted broker, first recalls some of the timers still pending from before the kill. What the rounds check
(:func:`verdict`): every message that should be delivered is on its real topic exactly once (counted by UNIQ_KEY),
none was stored before it was due (a timer: TIMER_OUT_MS; a delay level: the held record's store time + the level's
delay), no recalled one and nothing never sent is there. Lateness = the delivered record's store time - its due time.
Runs on the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt, decode_properties, encode_properties
from mq_common.constants import SCHEDULE_TOPIC, MessageConst
from mq_common.message_id import create_offset_msg_id, decode_offset_msg_id
from mq_common.protocol import PullStatus, SendMessageRequestHeader, SendMessageResponseHeader, TopicConfig
from mq_common.recall_handle import build_recall_handle
from mq_common.response_code import ResponseCode

PULL_BATCH: Final = 256
PULL_TIMEOUT_MS: Final = 30_000
SEND_TIMEOUT_MS: Final = 60_000
DELAY_TOPIC_ATTRIBUTES: Final = {"+message.type": "DELAY"}
"""A topic that takes DELAY messages (RocketMQ's ``-a +message.type=DELAY``)."""
# A round (send_round).
DELAY_LEVEL_SETTING: Final = "1s 2s 3s"
"""MQ_BROKER_MESSAGE_DELAY_LEVEL of the rounds' brokers."""
DELAY_LEVELS_MS: Final = (1000, 2000, 3000)
SPREAD_TIMERS: Final = 300
SPREAD_MS: Final = (2_000, 10_000)
"""When a round's spread timers are due, after its sends begin."""
BURST_TIMERS: Final = 4_000
BURST_AT_MS: Final = (3_000, 3_600)
"""When the round's burst is due, after its sends begin (firing it takes a few hundred ms: a kill lands inside); the
delay-level burst (level 3, 3 s) comes due then too."""
KILL_AROUND_BURST_MS: Final = (-50, 300)
DELAY_MESSAGES: Final = 60
"""Delay-level messages of random levels per round."""
DELAY_BURST: Final = 1_000
"""Delay-level messages of the last level (3 s) per round, sent with the rest."""
RECALL_EVERY: Final = 5
RECALL_AHEAD_MS: Final = 1_500
"""Only timers due at least this long after the recall are recalled (a recall of a due one is refused, rightly)."""
ROUND_FRAME: Final = 200
BODY_BYTES: Final = (16, 2_048)
DRAIN_DEADLINE_S: Final = 60.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def delay_topic(name: str, queues: int) -> TopicConfig:
    return TopicConfig(name, queues, queues, attributes=DELAY_TOPIC_ATTRIBUTES)


def timer_request(topic: str, body: bytes, uniq_key: str, deliver_ms: int, queue_id: int) -> SendMessageRequestHeader:
    """A timer message due at ``deliver_ms`` (TIMER_DELIVER_MS, ms since the epoch)."""
    properties = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key, MessageConst.TIMER_DELIVER_MS: str(deliver_ms)}
    return SendMessageRequestHeader(
        topic=topic, body=body, producer_group="timer_pg", queue_id=queue_id, born_timestamp_ms=now_ms(),
        properties=encode_properties(properties),
    )  # fmt: skip


def delay_request(topic: str, body: bytes, uniq_key: str, level: int, queue_id: int) -> SendMessageRequestHeader:
    """A delay-level message (DELAY = ``level``, 1-based)."""
    properties = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key, MessageConst.DELAY_TIME_LEVEL: str(level)}
    return SendMessageRequestHeader(
        topic=topic, body=body, producer_group="timer_pg", queue_id=queue_id, born_timestamp_ms=now_ms(),
        properties=encode_properties(properties),
    )  # fmt: skip


def frames(requests: Sequence[SendMessageRequestHeader], size: int) -> list[Sequence[SendMessageRequestHeader]]:
    """``requests`` cut into SendBatch frames of at most ``size``."""
    return [requests[i : i + size] for i in range(0, len(requests), size)]


async def send_frames(
    client: BrokerClient, addr: str, batches: Iterable[Sequence[SendMessageRequestHeader]], in_flight: int
) -> list[SendMessageResponseHeader]:
    """Every batch as one SendBatch frame on ``addr``'s SendStream, ``in_flight`` frames at a time; the answers in
    request order. Raises AssertionError naming the first refused send (a round on a partial set means nothing)."""
    todo = enumerate(batches)  # shared by the workers; taken one at a time (a generator's batches built lazily)
    answers: dict[int, list[SendMessageResponseHeader]] = {}

    async def worker() -> None:
        for index, batch in todo:
            answers[index] = await client.send_batch(addr, batch, SEND_TIMEOUT_MS)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    out = [a for i in sorted(answers) for a in answers[i]]
    refused = next((a for a in out if a.code != ResponseCode.SUCCESS), None)
    assert refused is None, f"send refused: {refused}"
    return out


@dataclass(frozen=True, slots=True)
class Delivered:
    """One record on the real topic: its UNIQ_KEY, due time (TIMER_OUT_MS, 0 for a delay level), store time, fire
    time (TIMER_DEQUEUE_MS, 0 when absent) and the held record it came from (DELIVERED_FROM_OFFSET, -1 when none)."""

    uniq_key: str
    timer_out_ms: int
    store_ms: int
    dequeue_ms: int
    delivered_from: int


def delivered_of(message: MessageExt) -> Delivered:
    props = message.properties
    return Delivered(
        message.uniq_key or "",
        int(props.get(MessageConst.TIMER_OUT_MS, "0") or 0),
        message.store_timestamp_ms,
        int(props.get(MessageConst.TIMER_DEQUEUE_MS, "0") or 0),
        int(props.get(MessageConst.DELIVERED_FROM_OFFSET, "-1") or -1),
    )


async def pull_delivered(client: BrokerClient, addr: str, topic: str, queues: int) -> list[Delivered]:
    """Every record of every queue of ``topic`` on ``addr`` (from offset 0) as :class:`Delivered` (bodies dropped
    as the pull goes)."""
    out: list[Delivered] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            result = await client.pull_message(addr, topic, queue_id, offset, PULL_BATCH, timeout_ms=PULL_TIMEOUT_MS)
            if result.status is not PullStatus.FOUND:
                break
            out.extend(delivered_of(m) for m in result.messages)
            offset = result.next_begin_offset
    return out


@dataclass
class Verdict:
    """What :func:`verdict` found; ``lateness_ms`` has one value per expected message delivered."""

    expected: int
    delivered: int = 0
    missing: list[str] = field(default_factory=list)
    duplicated: dict[str, int] = field(default_factory=dict)
    early: list[tuple[str, int]] = field(default_factory=list)  # (UNIQ_KEY, ms before due)
    recalled_delivered: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    lateness_ms: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.early or self.recalled_delivered or self.unknown)

    def summary(self) -> str:
        return (
            f"expected {self.expected}, delivered {self.delivered}, missing {len(self.missing)} "
            f"{self.missing[:5]}, duplicated {len(self.duplicated)} {list(self.duplicated.items())[:5]}, early "
            f"{len(self.early)} {self.early[:5]}, recalled but delivered {len(self.recalled_delivered)} "
            f"{self.recalled_delivered[:5]}, never sent {len(self.unknown)} {self.unknown[:5]}"
        )


def verdict(due_ms: Mapping[str, int], records: Sequence[Delivered], recalled: Iterable[str] = ()) -> Verdict:
    """Judge ``records`` (what the real topic holds) against ``due_ms`` (UNIQ_KEY -> the earliest time it may be
    stored, for every message that must be delivered) and ``recalled`` (UNIQ_KEYs that must never be). A key in
    neither is "never sent"."""
    recalled_set = set(recalled)
    counts = Counter(r.uniq_key for r in records)
    out = Verdict(expected=len(due_ms))
    out.duplicated = {k: n for k, n in counts.items() if n > 1}
    out.missing = sorted(k for k in due_ms if k not in counts)
    for record in records:
        key = record.uniq_key
        if key in recalled_set:
            out.recalled_delivered.append(key)
            continue
        due = due_ms.get(key)
        if due is None:
            out.unknown.append(key)
            continue
        out.delivered += 1
        if record.store_ms < due:
            out.early.append((key, due - record.store_ms))
        out.lateness_ms.append(record.store_ms - due)
    return out


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank, ``pct`` in [0, 100]) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * pct / 100) - 1))])


# --- rounds ----------------------------------------------------------------------------------------------------------


@dataclass
class TimerLedger:
    """What was sent over every round: timers (UNIQ_KEY -> due ms), delay-level messages (UNIQ_KEY -> level, and the
    CommitLog offset of the held record its send answer named), and the recalled timers."""

    timers: dict[str, int] = field(default_factory=dict)
    delays: dict[str, int] = field(default_factory=dict)
    held_offsets: dict[str, int] = field(default_factory=dict)
    recalled: set[str] = field(default_factory=set)

    def last_due_ms(self) -> int:
        return max(self.timers.values(), default=0)

    def to_deliver(self) -> int:
        return len(self.timers) - len(self.recalled) + len(self.delays)


@contextlib.asynccontextmanager
async def broker_client() -> AsyncIterator[BrokerClient]:
    """A BrokerClient on a channel pool of its own, closed at the end."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        await pool.close()


async def send_round(
    client: BrokerClient, addr: str, topic: str, queues: int, broker_name: str, ledger: TimerLedger,
    rng: random.Random, round_no: int,
) -> int:  # fmt: skip
    """One round on the master ``addr`` (see the module docstring), recorded in ``ledger``; returns when the burst is
    due (ms). It begins by recalling some timers of the earlier rounds still pending (sent before the last kill: the
    restarted or promoted broker must know them). Raises AssertionError when a send or a recall is refused."""
    earlier = set(ledger.timers)
    await recall_some(client, addr, topic, broker_name, ledger, sorted(earlier))  # sent before the last kill
    began = now_ms()
    burst_ms = began + rng.randint(*BURST_AT_MS)
    spread = {f"T{round_no:02d}S{i:05d}": began + rng.randint(*SPREAD_MS) for i in range(SPREAD_TIMERS)}
    timers = dict(spread) | {f"T{round_no:02d}B{i:05d}": burst_ms for i in range(BURST_TIMERS)}
    requests = [
        timer_request(topic, rng.randbytes(rng.randint(*BODY_BYTES)), key, due, n % queues)
        for n, (key, due) in enumerate(timers.items())
    ]
    delays = {f"D{round_no:02d}N{i:05d}": rng.randint(1, len(DELAY_LEVELS_MS)) for i in range(DELAY_MESSAGES)}
    delays |= {f"D{round_no:02d}B{i:05d}": len(DELAY_LEVELS_MS) for i in range(DELAY_BURST)}
    requests += [
        delay_request(topic, rng.randbytes(rng.randint(*BODY_BYTES)), key, level, n % queues)
        for n, (key, level) in enumerate(delays.items())
    ]
    rng.shuffle(requests)
    answers = await send_frames(client, addr, frames(requests, ROUND_FRAME), 4)
    for request, answer in zip(requests, answers, strict=True):
        key = decode_properties(request.properties)[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        if key in delays:
            ledger.held_offsets[key] = decode_offset_msg_id(answer.msg_id)[2]
    ledger.timers.update(timers)
    ledger.delays.update(delays)
    await recall_some(client, addr, topic, broker_name, ledger, list(spread))
    return burst_ms


async def recall_some(
    client: BrokerClient, addr: str, topic: str, broker_name: str, ledger: TimerLedger, keys: Sequence[str]
) -> None:
    """Recall every RECALL_EVERY-th timer of ``keys`` not recalled yet and due RECALL_AHEAD_MS or more from now."""
    soon = now_ms() + RECALL_AHEAD_MS
    for key in [k for k in keys if k not in ledger.recalled and ledger.timers[k] > soon][::RECALL_EVERY]:
        handle = build_recall_handle(topic, broker_name, ledger.timers[key], key)
        assert await client.recall_message(addr, "timer_pg", topic, handle) == key, key
        ledger.recalled.add(key)


def kill_at_ms(burst_ms: int, rng: random.Random) -> int:
    """When to SIGKILL the broker of a round whose burst is due at ``burst_ms``: while it fires."""
    return burst_ms + rng.randint(*KILL_AROUND_BURST_MS)


async def sleep_until_ms(at_ms: int) -> None:
    await asyncio.sleep(max(0.0, (at_ms - now_ms()) / 1000))


async def held_store_ms(client: BrokerClient, addr: str, ledger: TimerLedger) -> dict[str, int]:
    """UNIQ_KEY -> store time of every held delay-level record (on SCHEDULE_TOPIC_XXXX, viewed on ``addr`` by its
    CommitLog offset; a replica holds it at the same offset)."""
    host, port = addr.rsplit(":", 1)
    out: dict[str, int] = {}
    for key, offset in ledger.held_offsets.items():
        held = await client.view_message_by_id(addr, create_offset_msg_id(host, int(port), offset))
        assert (held.topic, held.uniq_key) == (SCHEDULE_TOPIC, key), held
        out[key] = held.store_timestamp_ms
    return out


def due_of(ledger: TimerLedger, held_ms: Mapping[str, int]) -> dict[str, int]:
    """UNIQ_KEY -> earliest allowed store time of every message that must be delivered."""
    due = {k: d for k, d in ledger.timers.items() if k not in ledger.recalled}
    for key, level in ledger.delays.items():
        assert key in held_ms, f"delay-level message {key} not held"
        due[key] = held_ms[key] + DELAY_LEVELS_MS[level - 1]
    return due


async def drain_and_judge(client: BrokerClient, addr: str, topic: str, queues: int, ledger: TimerLedger) -> Verdict:
    """Once everything of ``ledger`` is due: read ``topic`` back from ``addr`` until every message is there (or
    DRAIN_DEADLINE_S passed), once more a second later (a second delivery would show), and judge it."""
    await sleep_until_ms(ledger.last_due_ms() + max(DELAY_LEVELS_MS))
    deadline = time.monotonic() + DRAIN_DEADLINE_S
    while len(await pull_delivered(client, addr, topic, queues)) < ledger.to_deliver():
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)
    records = await pull_delivered(client, addr, topic, queues)
    return verdict(due_of(ledger, await held_store_ms(client, addr, ledger)), records, ledger.recalled)
