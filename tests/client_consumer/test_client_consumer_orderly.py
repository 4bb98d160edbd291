"""Orderly lite pull consumers own their queues through broker-side locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) on a real
local cluster: a queue another client holds is not pulled until it is freed, two orderly consumers hold every
queue between them (a third client locks none), and a closing consumer frees its locks so the other takes its
queues at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from lite_pull_testkit import drain, send_bodies, started, topic_queues, wait_for, wait_split
from mq_client.consumer import ConsumeFromWhere, LitePullConsumer
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_client.producer import DefaultMQProducer
from mq_common.channels import ChannelPool
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import MessageQueue
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

pytestmark = pytest.mark.integration
Factory = Callable[..., LitePullConsumer]
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
QUEUES_PER_BROKER = 2


@pytest.fixture
async def lock_calls() -> AsyncIterator[ConsumerBrokerCalls]:
    pool = ChannelPool()
    try:
        yield ConsumerBrokerCalls(pool)
    finally:
        await pool.close()


async def masters(cluster: LocalCluster, topic: str) -> dict[str, str]:
    pool = ChannelPool()
    try:
        route = await NameServerClient([cluster.namesrv_addr], pool).get_route_info_by_topic(topic)
    finally:
        await pool.close()
    return {b.broker_name: addr for b in route.broker_datas if (addr := b.master_addr()) is not None}


async def lock_as(
    calls: ConsumerBrokerCalls, addrs: dict[str, str], group: str, client_id: str, queues: set[MessageQueue]
) -> set[MessageQueue]:
    locked: set[MessageQueue] = set()
    for name, addr in addrs.items():
        locked |= await calls.lock_batch_mq(addr, group, client_id, [q for q in queues if q.broker_name == name])
    return locked


async def test_a_queue_another_client_holds_is_pulled_only_once_freed(
    cluster: LocalCluster, producer: DefaultMQProducer, consumers: Factory, lock_calls: ConsumerBrokerCalls
) -> None:
    topic = await make_topic(cluster, "orderly_held", QUEUES_PER_BROKER)
    addrs = await masters(cluster, topic)
    sent = await send_bodies(producer, topic, "held", 40)
    held = sent[0].message_queue
    assert await lock_as(lock_calls, addrs, "g_orderly_held", "intruder", {held}) == {held}
    consumer = await started(consumers("g_orderly_held", consume_from_where=FIRST, orderly=True), topic)

    async def three_queues() -> bool:
        return len(topic_queues(consumer, topic)) == 2 * QUEUES_PER_BROKER - 1

    await wait_for(three_queues, "the consumer to pull every queue but the held one")
    assert held not in topic_queues(consumer, topic)
    others = [r for r in sent if r.message_queue != held]
    got = [m for batch in await drain([consumer], len(others)) for m in batch]
    assert {m.uniq_key for m in got} == {r.msg_id for r in others}
    await lock_calls.unlock_batch_mq(addrs[held.broker_name], "g_orderly_held", "intruder", [held])
    rest = [m for batch in await drain([consumer], len(sent) - len(others)) for m in batch]
    assert {m.uniq_key for m in rest} == {r.msg_id for r in sent if r.message_queue == held}


async def test_two_orderly_consumers_hold_every_queue_and_a_closing_one_hands_over_at_once(
    cluster: LocalCluster, consumers: Factory, lock_calls: ConsumerBrokerCalls
) -> None:
    topic = await make_topic(cluster, "orderly_split", QUEUES_PER_BROKER)
    addrs = await masters(cluster, topic)
    options: dict[str, Any] = {"consume_from_where": FIRST, "orderly": True}
    first, second = [await started(consumers("g_orderly_split", **options), topic) for _ in range(2)]
    shares = await wait_split([first, second], topic, 2 * QUEUES_PER_BROKER)
    every = set().union(*shares)
    assert await lock_as(lock_calls, addrs, "g_orderly_split", "intruder", every) == set()
    await first.close()  # frees its locks: the other one need not wait for them to expire (60 s)

    async def all_second() -> bool:
        return topic_queues(second, topic) == every

    await wait_for(all_second, "the remaining consumer to take every queue", deadline_s=30)
