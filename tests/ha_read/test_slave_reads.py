"""Reads from slaves with real processes: a master and a slave (a copy of the master's store) of broker-a,
registered under one name (see slave_testkit).

- routes list both broker ids; the v2 route of the gateway still names the master only;
- the master answers suggest_which_broker_id = 1 for data "no longer in memory" (in-memory ratio 0), and the pull
  consumer then reads that queue from the slave, which sends it back to the master once it caught up;
- SlaveSynchronize copies a topic created on the master, a subscription group and committed offsets to the slave;
- with the master SIGKILLed, a lite pull consumer reads the replicated messages from the slave, keeps its offsets
  while the master is away and commits them to the master when it returns.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_client.admin.cli import app
from mq_client.broker_client import BrokerClient
from mq_client.consumer import PullConsumer
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_common.channels import ChannelPool
from mq_common.constants import MixAll
from mq_common.errors import MQError
from mq_common.protocol import ConsumerQueueOffset, MessageQueue, PullStatus, SubscriptionGroupConfig, TopicConfig
from mq_common.response_code import ResponseCode
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
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

MESSAGES = 6


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterSlaveGroup]:
    """The cluster with one topic of 1 queue holding MESSAGES messages, then the slave on a copy of the store."""
    cluster = start_cluster(tmp_path_factory.mktemp("slave-reads"))
    try:
        topic = asyncio.run(make_filled_topic(cluster, "slave_reads", MESSAGES))
        made = add_slave(cluster, topic)
    except BaseException:
        cluster.stop()
        raise
    try:
        yield made
    finally:
        made.stop()


async def test_routes_list_master_and_slave(group: MasterSlaveGroup) -> None:
    route = await wait_route_ids(group.cluster.namesrv_addr, group.topic, {MixAll.MASTER_ID, SLAVE_ID})
    data = route.broker_data(BROKER)
    assert data is not None
    assert data.broker_addrs == {MixAll.MASTER_ID: group.master_addr, SLAVE_ID: group.slave_addr}
    # QueueData comes from the master only: one entry for broker-a, the master's queue counts.
    assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [(BROKER, 1)]


async def test_master_suggests_the_slave_for_data_out_of_memory(group: MasterSlaveGroup) -> None:
    topic = group.topic
    await wait_route_ids(group.cluster.namesrv_addr, topic, {MixAll.MASTER_ID, SLAVE_ID})
    mq = MessageQueue(topic, BROKER, 0)
    async with PullConsumer([group.cluster.namesrv_addr], "slave_reads_suggest") as consumer:
        first = await consumer.find_pull_broker(mq)
        assert first.broker_addr == group.master_addr
        result = await consumer.pull(mq, 0, 1)
        assert [m.body for m in result.messages] == [b"m-0"]
        # Newer bytes follow the message read and the in-memory ratio is 0: the master suggests the slave.
        assert result.suggest_which_broker_id == SLAVE_ID
        then = await consumer.find_pull_broker(mq)
        assert (then.broker_addr, then.broker_id) == (group.slave_addr, SLAVE_ID)
        rest = await consumer.pull(mq, result.next_begin_offset, 32)
        assert [m.body for m in rest.messages] == [f"m-{i}".encode() for i in range(1, MESSAGES)]
        # The slave read up to the end: not slow, and its master is online, so it sends the consumer back.
        assert rest.suggest_which_broker_id == MixAll.MASTER_ID
        assert (await consumer.find_pull_broker(mq)).broker_addr == group.master_addr
        caught_up = await consumer.pull(mq, rest.next_begin_offset, 32)
        assert caught_up.status is PullStatus.NO_NEW_MSG


async def test_slave_synchronize_copies_topics_groups_and_offsets(group: MasterSlaveGroup, pool: ChannelPool) -> None:
    broker, admin = BrokerClient(pool), ConsumerAdminCalls(pool)
    new_topic = f"{group.topic}_created_later"
    await broker.create_topic(group.master_addr, TopicConfig(new_topic, read_queue_nums=2, write_queue_nums=2))
    new_group = "slave_reads_synced_group"
    await admin.update_subscription_group(
        group.master_addr, SubscriptionGroupConfig(new_group, which_broker_when_consume_slowly=SLAVE_ID)
    )
    offset = ConsumerQueueOffset(new_group, group.topic, 0, 4)
    assert await admin.update_consumer_offsets(group.master_addr, [offset]) == [None]

    async def topic_synced() -> bool:
        try:
            stats = await broker.get_topic_stats(group.slave_addr, new_topic)
        except MQError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            return False
        return len(stats) == 2

    async def group_synced() -> bool:
        return new_group in {c.group_name for c in await admin.get_all_subscription_groups(group.slave_addr)}

    async def offset_synced() -> bool:
        try:
            return await admin.query_consumer_offset(group.slave_addr, new_group, group.topic, 0) == 4
        except MQError as exc:
            if exc.code != ResponseCode.QUERY_NOT_FOUND:
                raise
            return False

    await wait_for(topic_synced, "the new topic on the slave")
    await wait_for(group_synced, "the new group on the slave")
    await wait_for(offset_synced, "the committed offset on the slave")
    # Persisted: the slave's config files hold them (a slave promoted later starts with them).
    config_dir = Path(group.slave.env["MQ_BROKER_STORE_PATH_ROOT_DIR"]) / "config"

    async def persisted() -> bool:
        files = [(config_dir / n).read_text() for n in ("topics.json", "subscriptionGroup.json", "consumerOffset.json")]
        return new_topic in files[0] and new_group in files[1] and f"{group.topic}@{new_group}" in files[2]

    await wait_for(persisted, "the synchronised tables in the slave's config files")


def test_cluster_list_shows_each_broker_id(group: MasterSlaveGroup) -> None:
    asyncio.run(wait_route_ids(group.cluster.namesrv_addr, group.topic, {MixAll.MASTER_ID, SLAVE_ID}))
    env = {"COLUMNS": "200", "MQ_NAMESRV_ADDR": ""}
    result = CliRunner().invoke(app, ["-n", group.cluster.namesrv_addr, "clusterList", "--output", "json"], env=env)
    assert result.exit_code == 0, result.output
    rows = {(r["broker_name"], r["broker_id"], r["addr"]) for r in json.loads(result.stdout)["brokers"]}
    assert rows == {(BROKER, MixAll.MASTER_ID, group.master_addr), (BROKER, SLAVE_ID, group.slave_addr)}
