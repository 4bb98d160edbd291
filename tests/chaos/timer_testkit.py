"""Helpers for the timer rounds (test_timer_kill.py) and the timer benchmark (tests/bench/bench_timer.py): timer and
delay-level sends over a broker's SendStream, recalls, the read-back of a real topic, and the exactly-once verdict.

What a round checks (:func:`verdict`): every message that should be delivered is on its real topic exactly once
(counted by UNIQ_KEY), none was stored before it was due (a timer: TIMER_OUT_MS; a delay level: the held record's
store time + the level's delay), no recalled one and nothing never sent is there. Lateness = the delivered record's
store time - its due time. Runs on the caller's loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mq_client.broker_client import BrokerClient
from mq_common.codec import MessageExt, encode_properties
from mq_common.constants import MessageConst
from mq_common.protocol import PullStatus, SendMessageRequestHeader, SendMessageResponseHeader, TopicConfig
from mq_common.response_code import ResponseCode

PULL_BATCH: Final = 256
PULL_TIMEOUT_MS: Final = 30_000
SEND_TIMEOUT_MS: Final = 60_000
DELAY_TOPIC_ATTRIBUTES: Final = {"+message.type": "DELAY"}
"""A topic that takes DELAY messages (RocketMQ's ``-a +message.type=DELAY``)."""


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
