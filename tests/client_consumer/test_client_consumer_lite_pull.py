"""LitePullConsumer against a real local cluster: queue sharing and rebalancing within a group, committed
offsets across leaves and restarts, where new groups start, send-back through %RETRY%<group>, long polling."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from lite_pull_testkit import (
    bodies,
    drain,
    poll_quiet,
    send_bodies,
    started,
    topic_queues,
    wait_for,
    wait_split,
)
from mq_client.consumer import ConsumeFromWhere, LitePullConsumer, PullConsumer, allocate_message_queue_averagely
from mq_client.producer import DefaultMQProducer
from mq_common.constants import MessageConst, retry_topic
from mq_common.errors import MQClientError
from mq_common.protocol import MessageQueue, PullResult
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

pytestmark = pytest.mark.integration

QUEUES_PER_BROKER = 4
QUEUES = 2 * QUEUES_PER_BROKER  # two broker groups
Factory = Callable[..., LitePullConsumer]
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_two_consumers_split_the_queues_and_get_every_message_exactly_once(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "split", QUEUES_PER_BROKER)
    group = [await started(consumers("g_split", consume_from_where=FIRST), topic) for _ in range(2)]
    shares = await wait_split(group, topic, QUEUES)
    assert [len(s) for s in shares] == [4, 4]
    # AllocateMessageQueueAveragely over the sorted client ids: each one holds its contiguous slice
    mq_all = sorted(set().union(*shares))
    cid_all = sorted(c.client_id for c in group)
    for c, share in zip(group, shares, strict=True):
        assert share == set(allocate_message_queue_averagely("g_split", c.client_id, mq_all, cid_all))

    sent = await send_bodies(producer, topic, "split", 120)
    got = await drain(group, len(sent))
    assert sorted(b for g in got for b in bodies(g)) == sorted(f"split-{i}".encode() for i in range(120))
    queue_of = {r.msg_id: r.message_queue for r in sent}
    for c, share, messages in zip(group, shares, got, strict=True):
        assert {queue_of[m.uniq_key or ""] for m in messages} <= share, c.client_id
    assert [m for c in group for m in await poll_quiet(c)] == []


async def test_a_third_consumer_joining_gets_its_share(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "join", QUEUES_PER_BROKER)
    group = [await started(consumers("g_join", consume_from_where=FIRST), topic) for _ in range(2)]
    await wait_split(group, topic, QUEUES)

    group.append(await started(consumers("g_join", consume_from_where=FIRST), topic))
    shares = await wait_split(group, topic, QUEUES)
    assert sorted(len(s) for s in shares) == [2, 3, 3]

    await send_bodies(producer, topic, "join", 90)
    got = await drain(group, 90)
    assert Counter(b for g in got for b in bodies(g)) == Counter(f"join-{i}".encode() for i in range(90))
    assert all(got), "every consumer got messages of its queues"


async def test_a_leaving_consumer_hands_its_queues_over_from_the_committed_offsets(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "leave", QUEUES_PER_BROKER)
    stays, leaves = [
        await started(consumers("g_leave", consume_from_where=FIRST, auto_commit=False), topic) for _ in range(2)
    ]
    await wait_split([stays, leaves], topic, QUEUES)

    await send_bodies(producer, topic, "a", 80)
    first = await drain([stays, leaves], 80)
    for c in (stays, leaves):
        await c.commit_sync()
    # `leaves` polls part of batch b and leaves without committing it: only that window may come again
    await send_bodies(producer, topic, "b", 80)
    window = await drain([leaves], 1)
    uncommitted = set(bodies(window[0]))
    await leaves.close()

    await wait_for(lambda: _holds(stays, topic), "the staying consumer to take every queue")
    await send_bodies(producer, topic, "c", 40)
    # stays gets all of b (its own queues' and, again from the committed offsets, those of `leaves`) and c
    got_b_and_c = bodies((await drain([stays], 80 + 40))[0])
    later = bodies(await poll_quiet(stays))
    everything = Counter(bodies(first[0]) + bodies(first[1]) + bodies(window[0]) + got_b_and_c + later)
    expected = {f"{p}-{i}".encode() for p, n in (("a", 80), ("b", 80), ("c", 40)) for i in range(n)}
    assert set(everything) == expected, "nothing lost"
    duplicated = {b for b, n in everything.items() if n > 1}
    assert duplicated == uncommitted, "duplicates are exactly what was polled and not committed"


async def test_a_restarted_consumer_resumes_from_the_committed_offset(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "restart", QUEUES_PER_BROKER)
    first = await started(consumers("g_restart", consume_from_where=FIRST), topic)
    await wait_for(lambda: _holds(first, topic), "the queues")
    await send_bodies(producer, topic, "before", 40)
    assert len((await drain([first], 40))[0]) == 40
    await first.commit_sync()
    await first.close()

    await send_bodies(producer, topic, "after", 40)
    # FIRST would start at 0 for a new group; this group's committed offsets win
    again = await started(consumers("g_restart", consume_from_where=FIRST), topic)
    got = bodies((await drain([again], 40))[0]) + bodies(await poll_quiet(again))
    assert sorted(got) == sorted(f"after-{i}".encode() for i in range(40))
    mq = sorted(topic_queues(again, topic))[0]
    assert await again.committed(mq) >= 0


@pytest.mark.parametrize("where", list(ConsumeFromWhere))
async def test_a_new_group_starts_where_consume_from_where_says(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory, where: ConsumeFromWhere
) -> None:
    topic = await make_topic(cluster, f"from_{where.name}", QUEUES_PER_BROKER)
    await send_bodies(producer, topic, "old", 24)
    stored = await read_all(cluster.namesrv_addr, topic)
    boundary_ms = max(m.store_timestamp_ms for _, m in stored) + 1
    await wait_for(lambda: _after(boundary_ms), "the clock to pass the old messages' store times")
    await send_bodies(producer, topic, "mid", 24)

    kwargs: dict[str, Any] = {"consume_from_where": where, "consume_timestamp_ms": boundary_ms}
    consumer = await started(consumers(f"g_from_{where.name}", **kwargs), topic)
    await wait_for(lambda: _holds(consumer, topic), "the queues")
    await send_bodies(producer, topic, "new", 24)

    expected = {
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET: ("old", "mid", "new"),
        ConsumeFromWhere.CONSUME_FROM_TIMESTAMP: ("mid", "new"),
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET: ("new",),
    }[where]
    got = bodies((await drain([consumer], 24 * len(expected)))[0]) + bodies(await poll_quiet(consumer))
    assert sorted(got) == sorted(f"{p}-{i}".encode() for p in expected for i in range(24))


async def _after(timestamp_ms: int) -> bool:
    return time.time() * 1000 > timestamp_ms


async def test_send_message_back_comes_again_through_the_retry_topic(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "retry", QUEUES_PER_BROKER)
    consumer = await started(consumers("g_retry", consume_from_where=FIRST), topic)
    await send_bodies(producer, topic, "retry", 1)
    [msg] = (await drain([consumer], 1))[0]
    assert msg.reconsume_times == 0

    await consumer.send_message_back(msg)
    [again] = (await drain([consumer], 1))[0]
    assert again.body == msg.body
    assert again.reconsume_times == 1
    assert again.topic == topic, "the original topic comes back (resetRetryAndNamespace)"
    assert again.properties[MessageConst.RETRY_TOPIC] == topic
    assert any(mq.topic == retry_topic("g_retry") for mq in consumer.assignment())


async def test_long_polling_delivers_a_message_sent_while_the_pull_is_parked(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = await make_topic(cluster, "longpoll", 1)
    consumer = consumers("g_longpoll", broker_suspend_max_time_ms=15_000)
    pulls: list[tuple[MessageQueue, bool]] = []  # (queue, started after the send)
    delivering: list[bool] = []
    sent = asyncio.Event()
    queues: PullConsumer = consumer._queues
    real_pull = queues.pull

    async def watched_pull(mq: MessageQueue, *args: Any, **kwargs: Any) -> PullResult:
        started_after_send = sent.is_set()
        pulls.append((mq, started_after_send))
        result = await real_pull(mq, *args, **kwargs)
        if mq.topic == topic and result.messages:
            delivering.append(started_after_send)
        return result

    monkeypatch.setattr(queues, "pull", watched_pull)
    await started(consumer, topic)

    async def parked() -> bool:
        return {mq for mq, _ in pulls if mq.topic == topic} == topic_queues(consumer, topic) != set()

    await wait_for(parked, "a pull of every queue of the topic")
    assert await consumer.poll(500) == []
    per_queue = Counter(mq for mq, _ in pulls if mq.topic == topic)
    assert set(per_queue.values()) == {1}, f"each queue's first pull is still held by its broker: {per_queue}"
    polling = asyncio.create_task(consumer.poll(60_000))
    sent.set()
    await send_bodies(producer, topic, "parked", 1)
    got = await polling
    assert bodies(got) == [b"parked-0"]
    assert delivering == [False], "the pull parked before the send brought the message"


async def test_seek_replays_a_queue_and_refuses_offsets_outside_it(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory
) -> None:
    topic = await make_topic(cluster, "seek", 1)
    consumer = await started(consumers("g_seek", consume_from_where=FIRST), topic)
    await wait_for(lambda: _holds(consumer, topic, 2), "both queues")
    sent = await send_bodies(producer, topic, "seek", 10)
    await drain([consumer], 10)

    mq = sent[0].message_queue
    on_mq = [r for r in sent if r.message_queue == mq]
    from_one = sorted(f"seek-{sent.index(r)}".encode() for r in on_mq if r.queue_offset >= 1)
    await consumer.seek(mq, 1)
    replayed = bodies((await drain([consumer], len(from_one)))[0]) + bodies(await poll_quiet(consumer))
    assert sorted(replayed) == from_one

    with pytest.raises(MQClientError) as outside:
        await consumer.seek(mq, len(on_mq) + 1)
    assert outside.value.code == ResponseCode.INVALID_PARAMETER
    with pytest.raises(MQClientError, match="not in assigned list"):
        await consumer.seek(MessageQueue(topic, "no-such-broker", 0), 0)


async def _holds(consumer: LitePullConsumer, topic: str, count: int = QUEUES) -> bool:
    return len(topic_queues(consumer, topic)) == count
