"""Offsets resolved against the brokers, and offset ranges cut into Spark partitions (driver side).

``earliest`` is a queue's min offset, ``latest`` its max offset (one past its last message; GetTopicStats, as
MQAdminImpl#minOffset / #maxOffset), a timestamp the first offset stored at or after it (SearchOffset, as
DefaultMQPullConsumer#searchOffset). The calls go through mq_client's PullConsumer on an asyncio loop this module
runs (:func:`run`) on the calling thread: the Python worker Spark starts to plan a read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from mq_client.consumer import PullConsumer
from mq_common.protocol import MessageQueue, TopicQueueOffset

from mq_spark.source.offsets import EARLIEST, LATEST, QueueOffsets
from mq_spark.source.options import OffsetSpec, SourceOptions
from mq_spark.source.pull import QueueRange, opened

T = TypeVar("T")
Bounds = dict[MessageQueue, TopicQueueOffset]


def run(options: SourceOptions, action: Callable[[PullConsumer], Awaitable[T]]) -> T:
    """``action(consumer)`` on a fresh loop with a PullConsumer of ``options``; the consumer is closed after."""

    async def main() -> T:
        async with opened(options) as consumer:
            return await action(consumer)

    return asyncio.run(main())


async def queue_bounds(consumer: PullConsumer, topic: str) -> Bounds:
    """Min/max offsets of every readable queue of ``topic`` (a fresh route; one GetTopicStats per broker group).
    Raises TopicNotExistError (17) / MQClientError (TOPIC_NOT_EXIST) when the topic has no readable queue."""
    queues = await consumer.fetch_subscribe_message_queues(topic)
    found = await asyncio.gather(*(consumer.queue_offsets(mq) for mq in queues))
    return dict(zip(queues, found, strict=True))


async def resolve(consumer: PullConsumer, spec: OffsetSpec, bounds: Bounds, *, default_latest: bool) -> QueueOffsets:
    """Concrete offsets of every queue of ``bounds`` for ``spec``. In JSON, a queue not named gets the latest
    offset when ``default_latest`` else the earliest; a named queue that is not in ``bounds`` is ignored; offsets
    are clamped into [min, max]."""
    if spec.kind == "timestamp":
        assert spec.timestamp_ms is not None
        ts = spec.timestamp_ms
        offsets = await asyncio.gather(*(consumer.search_offset(mq, ts) for mq in bounds))
        return {mq: _clamp(o, bounds[mq]) for mq, o in zip(bounds, offsets, strict=True)}
    resolved: QueueOffsets = {}
    for mq, b in bounds.items():
        if spec.kind == "earliest":
            wanted = EARLIEST
        elif spec.kind == "latest":
            wanted = LATEST
        else:
            assert spec.queues is not None
            wanted = spec.queues.get(mq, LATEST if default_latest else EARLIEST)
        resolved[mq] = b.min_offset if wanted == EARLIEST else b.max_offset if wanted == LATEST else _clamp(wanted, b)
    return resolved


def _clamp(offset: int, bounds: TopicQueueOffset) -> int:
    return max(bounds.min_offset, min(offset, bounds.max_offset))


def split_ranges(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int], max_rows: int) -> list[QueueRange]:
    """One range per queue with ``end > start`` (a queue missing from ``start`` starts at 0; the read skips what
    the broker no longer holds), cut into pieces of at most ``max_rows`` offsets; ordered by queue then offset."""
    ranges: list[QueueRange] = []
    for mq in sorted(end):
        lo, hi = start.get(mq, 0), end[mq]
        while lo < hi:
            step = min(hi, lo + max_rows)
            ranges.append(QueueRange(mq.topic, mq.broker_name, mq.queue_id, lo, step))
            lo = step
    return ranges


def limit_offsets(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int) -> QueueOffsets:
    """Ends that take at most ``max_rows`` offsets in all past ``start``, shared by the queues in proportion to
    what each has waiting (Kafka's maxOffsetsPerTrigger rule); a queue missing from ``start`` starts at 0. Each
    queue with data gets at least one offset while the budget lasts, so every queue moves."""
    waiting = {mq: max(0, latest[mq] - start.get(mq, 0)) for mq in latest}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    take = {mq: n * max_rows // total for mq, n in waiting.items()}
    left = max_rows - sum(take.values())
    # What is left of the budget: queues that got nothing first (so every queue moves), then the most behind.
    for mq in sorted(waiting, key=lambda q: (take[q] == 0, waiting[q] - take[q]), reverse=True):
        if left <= 0:
            break
        if waiting[mq] > take[mq]:
            take[mq] += 1
            left -= 1
    return {mq: start.get(mq, 0) + take[mq] for mq in latest}
