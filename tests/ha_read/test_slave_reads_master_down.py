"""A master SIGKILLed: the lite pull consumer reads the replicated messages from the slave, keeps its offsets
while the master is away (offsets go to masters only) and commits them to the master when it returns. Real
processes: name server, master and slave of broker-a (slave_testkit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mq_client.consumer import ConsumeFromWhere, LitePullConsumer
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import MixAll
from mq_common.errors import MQError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from slave_testkit import (
    BROKER,
    SLAVE_ID,
    MasterSlaveGroup,
    add_slave,
    make_filled_topic,
    start_cluster,
    wait_for,
    wait_route_ids,
)

pytestmark = pytest.mark.integration

MESSAGES = 5
GROUP = "slave_reads_master_down"


async def _poll_all(consumer: LitePullConsumer, want: int) -> list[MessageExt]:
    got: list[MessageExt] = []

    async def enough() -> bool:
        got.extend(await consumer.poll(200))
        return len(got) >= want

    await wait_for(enough, f"{want} messages polled")
    return got


async def _committed_on(calls: ConsumerBrokerCalls, addr: str, topic: str) -> int:
    try:
        return await calls.query_consumer_offset(addr, GROUP, topic, 0)
    except MQError as exc:
        if exc.code != ResponseCode.QUERY_NOT_FOUND:
            raise
        return -1


async def _read_while_master_down(group: MasterSlaveGroup, pool: ChannelPool) -> None:
    cluster, topic = group.cluster, group.topic
    await wait_route_ids(cluster.namesrv_addr, topic, {MixAll.MASTER_ID, SLAVE_ID})
    await asyncio.to_thread(cluster.kill_broker, BROKER)
    await wait_route_ids(cluster.namesrv_addr, topic, {SLAVE_ID})  # the master expired; the slave keeps the queues
    consumer = LitePullConsumer(
        [cluster.namesrv_addr],
        GROUP,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=300,
        heartbeat_interval_ms=500,
        auto_commit_interval_ms=1000,
        pool=pool,
    )
    consumer.subscribe(topic)
    await consumer.start()
    mq = MessageQueue(topic, BROKER, 0)
    try:
        got = await _poll_all(consumer, MESSAGES)
        assert [m.body for m in got] == [f"m-{i}".encode() for i in range(MESSAGES)]
        await consumer.commit_sync()
        assert await consumer.committed(mq) == MESSAGES  # kept by the consumer: no master to commit to
        calls = ConsumerBrokerCalls(pool)
        assert await _committed_on(calls, group.slave_addr, topic) == -1  # offsets never go to a slave
        await asyncio.to_thread(cluster.start_broker, BROKER)

        async def on_master() -> bool:
            return await _committed_on(calls, group.master_addr, topic) == MESSAGES

        await wait_for(on_master, "the consumer's offset committed to the returned master")
    finally:
        await consumer.close()


async def test_consumer_reads_from_the_slave_and_commits_to_the_returned_master(
    tmp_path: Path, pool: ChannelPool
) -> None:
    cluster: LocalCluster = await asyncio.to_thread(start_cluster, tmp_path / "data")
    group: MasterSlaveGroup | None = None
    try:
        topic = await make_filled_topic(cluster, "master_down", MESSAGES)
        group = await asyncio.to_thread(add_slave, cluster, topic)
        await _read_while_master_down(group, pool)
    finally:
        await asyncio.to_thread(group.stop if group is not None else cluster.stop)
