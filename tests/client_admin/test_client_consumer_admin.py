"""PullConsumer and MQAdminClient parts that need only a real (in-process) name server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mq_client.admin.admin_client import MQAdminClient
from mq_client.consumer import PullConsumer, filter_by_tags, parse_subscription
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import PermName
from mq_common.errors import MQClientError, RemotingError, TopicNotExistError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import BrokerRegistration, MessageQueue, TopicConfig
from mq_common.response_code import ResponseCode
from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings

# Registered but never started: calls to it fail with UNAVAILABLE (nothing listens on port 1).
DEAD_BROKER_ADDR = "127.0.0.1:1"


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvController]:
    ctl = NamesrvController(NamesrvSettings(listen_host="127.0.0.1", listen_port=0))
    await ctl.start()
    pool = ChannelPool()
    client = NameServerClient([ctl.addr], pool)
    brokers = (
        ("broker-a", "DefaultCluster", DEAD_BROKER_ADDR),
        ("broker-b", "DefaultCluster", "127.0.0.1:2"),
        ("broker-c", "Other", "127.0.0.1:3"),
    )
    for name, cluster, addr in brokers:
        await client.register_broker(
            ctl.addr,
            BrokerRegistration(
                cluster_name=cluster,
                broker_name=name,
                broker_id=0,
                broker_addr=addr,
                topic_configs={
                    "TopicA": TopicConfig("TopicA", 2, 4),
                    "NoRead": TopicConfig("NoRead", 2, 2, PermName.PERM_WRITE),
                },
            ),
        )
    await pool.close()
    try:
        yield ctl
    finally:
        await ctl.stop(0)


def test_parse_subscription() -> None:
    assert parse_subscription("*") == frozenset()
    assert parse_subscription("  ") == frozenset()
    assert parse_subscription("TagA || TagB ||") == {"TagA", "TagB"}


def msg(tags: str | None) -> MessageExt:
    props = {} if tags is None else {"TAGS": tags}
    return MessageExt("T", b"", 0, props, 0, 0, 0, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2))


def test_filter_by_tags() -> None:
    messages = [msg("TagA"), msg("TagB"), msg(None)]
    assert filter_by_tags(messages, frozenset()) == tuple(messages)
    assert [m.tags for m in filter_by_tags(messages, frozenset({"TagB"}))] == ["TagB"]


async def test_fetch_subscribe_message_queues_lists_read_queues(namesrv: NamesrvController) -> None:
    async with PullConsumer([namesrv.addr]) as consumer:
        queues = await consumer.fetch_subscribe_message_queues("TopicA")
        assert queues == [MessageQueue("TopicA", b, i) for b in ("broker-a", "broker-b", "broker-c") for i in range(2)]
        with pytest.raises(MQClientError) as no_read:
            await consumer.fetch_subscribe_message_queues("NoRead")
        assert no_read.value.code == ResponseCode.TOPIC_NOT_EXIST
        with pytest.raises(TopicNotExistError):
            await consumer.fetch_subscribe_message_queues("Missing")


async def test_pull_validates_and_resolves_broker(namesrv: NamesrvController) -> None:
    async with PullConsumer([namesrv.addr], pull_timeout_ms=2000) as consumer:
        with pytest.raises(MQClientError) as neg:
            await consumer.pull(MessageQueue("TopicA", "broker-a", 0), -1, 1)
        assert neg.value.code == ResponseCode.INVALID_PARAMETER
        with pytest.raises(MQClientError) as zero:
            await consumer.pull(MessageQueue("TopicA", "broker-a", 0), 0, 0)
        assert zero.value.code == ResponseCode.INVALID_PARAMETER
        with pytest.raises(MQClientError) as unknown:
            await consumer.pull(MessageQueue("TopicA", "broker-x", 0), 0, 1)
        assert unknown.value.code == ResponseCode.BROKER_NOT_EXIST
        assert await consumer.find_broker_addr("broker-a", "TopicA") == DEAD_BROKER_ADDR
        with pytest.raises(RemotingError):
            await consumer.pull(MessageQueue("TopicA", "broker-a", 0), 0, 1)


async def test_admin_name_server_views(namesrv: NamesrvController) -> None:
    async with MQAdminClient([namesrv.addr]) as admin:
        info = await admin.cluster_list()
        assert info.cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b"), "Other": ("broker-c",)}
        assert await admin.topic_list() == ["NoRead", "TopicA"]
        route = await admin.topic_route("TopicA")
        assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b", "broker-c"]
        with pytest.raises(TopicNotExistError):
            await admin.topic_route("Missing")


async def test_admin_argument_errors(namesrv: NamesrvController) -> None:
    async with MQAdminClient([namesrv.addr]) as admin:
        with pytest.raises(MQClientError) as both:
            await admin.update_topic(TopicConfig("T"), broker_addr="127.0.0.1:3", cluster_name="DefaultCluster")
        assert both.value.code == ResponseCode.INVALID_PARAMETER
        with pytest.raises(MQClientError) as illegal:
            await admin.update_topic(TopicConfig("bad topic!"), broker_addr="127.0.0.1:3")
        assert "illegal characters" in illegal.value.remark
        with pytest.raises(MQClientError) as no_cluster:
            await admin.update_topic(TopicConfig("T"), cluster_name="NoSuchCluster")
        assert no_cluster.value.code == ResponseCode.BROKER_NOT_EXIST
        assert "clusterName exists" in no_cluster.value.remark
        with pytest.raises(MQClientError) as queue_without_broker:
            await admin.consume_message("TopicA", queue_id=0)
        assert queue_without_broker.value.remark == "Please set the brokerName before queueId!"
        with pytest.raises(RemotingError):  # a master of the cluster that is not running
            await admin.topic_status("TopicA")


async def test_pull_failure_refreshes_the_cached_route(namesrv: NamesrvController) -> None:
    async with PullConsumer([namesrv.addr], pull_timeout_ms=2000) as consumer:
        mq = MessageQueue("TopicA", "broker-a", 0)
        assert await consumer.find_broker_addr("broker-a", "TopicA") == DEAD_BROKER_ADDR  # cached now
        pool = ChannelPool()
        client = NameServerClient([namesrv.addr], pool)
        await client.unregister_broker(
            namesrv.addr, BrokerRegistration("DefaultCluster", "broker-a", 0, DEAD_BROKER_ADDR)
        )
        moved = BrokerRegistration("DefaultCluster", "broker-a", 0, "127.0.0.1:4", {"TopicA": TopicConfig("TopicA")})
        await client.register_broker(namesrv.addr, moved)
        await pool.close()

        with pytest.raises(RemotingError) as info:  # fails at the old address, refreshes, fails at the new one
            await consumer.pull(mq, 0, 1)
        assert "127.0.0.1:4" in info.value.remark
        assert await consumer.find_broker_addr("broker-a", "TopicA") == "127.0.0.1:4"
