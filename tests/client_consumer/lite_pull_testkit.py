"""Helpers of the lite pull consumer tests: send numbered bodies, wait for conditions with generous deadlines, poll
consumers until enough messages came."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from mq_client.consumer import LitePullConsumer
from mq_client.producer import DefaultMQProducer, Message, SendResult, SendStatus
from mq_common.codec import MessageExt
from mq_common.protocol import MessageQueue

DEADLINE_S: Final = 90.0
"""Bound of every wait for a condition (a loaded 2-core machine runs five clusters at once)."""
# Short intervals so that a join, a leave or a new retry topic shows within a second or two.
FAST: Final[dict[str, Any]] = {
    "rebalance_interval_ms": 300,
    "heartbeat_interval_ms": 500,
    "auto_commit_interval_ms": 1000,
}


async def send_bodies(producer: DefaultMQProducer, topic: str, prefix: str, count: int) -> list[SendResult]:
    """Send ``count`` messages ``prefix-0`` .. with SEND_OK (each queue of the route gets some)."""
    results = [await producer.send(Message(topic, f"{prefix}-{i}".encode())) for i in range(count)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    return results


async def started(consumer: LitePullConsumer, topic: str) -> LitePullConsumer:
    """``consumer`` subscribed to every tag of ``topic`` and started."""
    consumer.subscribe(topic)
    await consumer.start()
    return consumer


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` every 0.1 s until true; fail naming ``what`` after ``deadline_s``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not await condition():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def topic_queues(consumer: LitePullConsumer, topic: str) -> set[MessageQueue]:
    return {mq for mq in consumer.assignment() if mq.topic == topic}


async def wait_split(group: Sequence[LitePullConsumer], topic: str, queue_count: int) -> list[set[MessageQueue]]:
    """Wait until ``group`` holds every queue of ``topic`` exactly once with shares differing by at most one."""

    async def split() -> bool:
        shares = [topic_queues(c, topic) for c in group]
        sizes = [len(s) for s in shares]
        return sum(sizes) == queue_count == len(set().union(*shares)) and max(sizes) - min(sizes) <= 1

    await wait_for(split, f"{len(group)} consumers to split {queue_count} queues of {topic}")
    return [topic_queues(c, topic) for c in group]


async def drain(
    group: Sequence[LitePullConsumer], want: int, *, deadline_s: float = DEADLINE_S
) -> list[list[MessageExt]]:
    """Poll every consumer of ``group`` in turn until ``want`` messages came in total (or fail)."""
    got: list[list[MessageExt]] = [[] for _ in group]
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while sum(len(g) for g in got) < want:
        if loop.time() > end:
            raise AssertionError(f"only {sum(len(g) for g in got)} of {want} messages came")
        for i, consumer in enumerate(group):
            got[i].extend(await consumer.poll(100))
    return got


async def poll_quiet(consumer: LitePullConsumer, rounds: int = 5) -> list[MessageExt]:
    """What ``consumer`` still delivers over a few short polls (the caller asserts it is nothing)."""
    extra: list[MessageExt] = []
    for _ in range(rounds):
        extra.extend(await consumer.poll(200))
    return extra


def bodies(messages: Sequence[MessageExt]) -> list[bytes]:
    return [m.body for m in messages]
