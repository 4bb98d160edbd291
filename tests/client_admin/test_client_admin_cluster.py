"""PullConsumer, MQAdminClient and ``mqadmin`` against a real local cluster (mqnamesrv + two mqbroker +
mqgateway processes on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cli import app
from mq_client.consumer import PullConsumer
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendResult, SendStatus
from mq_common.constants import MessageSysFlag
from mq_common.errors import TopicNotExistError
from mq_common.protocol import MessageQueue, PullStatus, TopicConfig, TopicRouteData
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

ENV = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}
ROUTE_WAIT_ROUNDS = 150  # x 0.1 s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("admin-cluster"),
        ports=PortLayout.free(2),
        flush_disk_type="ASYNC_FLUSH",
        auto_create_topic_enable=False,
        broker_env={
            "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(8 * 1024 * 1024),
            "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "10000",
            "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000",
        },
        start_wait_s=60.0,
    )
    with LocalCluster(spec) as c:
        yield c


async def wait_route(admin: MQAdminClient, topic: str, brokers: int, read_queue_nums: int) -> TopicRouteData:
    """The route once ``brokers`` groups serve ``topic`` with ``read_queue_nums`` queues (bounded wait)."""
    route = None
    for _ in range(ROUTE_WAIT_ROUNDS):
        try:
            route = await admin.topic_route(topic)
        except TopicNotExistError:  # until the broker's next registration
            route = None
        read_nums = [] if route is None else [q.read_queue_nums for q in route.queue_datas]
        if route is not None and read_nums == [read_queue_nums] * brokers:
            return route
        await asyncio.sleep(0.1)
    raise AssertionError(f"route of {topic} never showed {brokers} brokers x {read_queue_nums} queues: {route}")


async def test_update_topic_on_cluster_then_send_status_and_consume(cluster: LocalCluster) -> None:
    async with MQAdminClient([cluster.namesrv_addr], gateway_addr=cluster.gateway_addr) as admin:
        addrs = await admin.update_topic(TopicConfig("AdminTopic", 2, 2), cluster_name="DefaultCluster")
        assert sorted(addrs) == sorted(cluster.broker_addrs.values())
        await wait_route(admin, "AdminTopic", brokers=2, read_queue_nums=2)

        sent = [await admin.send_message("AdminTopic", f"m{i}".encode(), tags="TagA", keys=[f"k{i}"]) for i in range(6)]
        assert {r.send_status for r in sent} == {"SEND_OK"}

        status = await admin.topic_status("AdminTopic")
        assert [(o.broker_name, o.queue_id) for o in status] == [
            (b, q) for b in ("broker-a", "broker-b") for q in range(2)
        ]
        assert sum(o.max_offset - o.min_offset for o in status) == 6

        first = sent[0]
        messages = await admin.consume_message("AdminTopic", first.broker_name, first.queue_id, first.queue_offset, 1)
        assert [m.body for m in messages] == [b"m0"]
        assert messages[0].keys == ["k0"]
        assert messages[0].uniq_key == first.msg_id

        everything = await admin.consume_message("AdminTopic", count=100)
        assert sorted(m.body for m in everything) == [f"m{i}".encode() for i in range(6)]


async def test_pull_consumer_tags_compression_and_statuses(cluster: LocalCluster) -> None:
    big = b"".join(b"row %d of a large body\n" % i for i in range(400))  # > 4 KiB: the gateway compresses it
    async with MQAdminClient([cluster.namesrv_addr], gateway_addr=cluster.gateway_addr) as admin:
        addr = cluster.broker_addrs["broker-b"]
        assert await admin.update_topic(TopicConfig("PullTopic", 1, 1), broker_addr=addr) == [addr]
        await wait_route(admin, "PullTopic", brokers=1, read_queue_nums=1)
        await admin.send_message("PullTopic", b"a", tags="TagA")
        await admin.send_message("PullTopic", b"b", tags="TagB")
        await admin.send_message("PullTopic", big, tags="TagA")

    async with PullConsumer([cluster.namesrv_addr], "AdminTestGroup") as consumer:
        queues = await consumer.fetch_subscribe_message_queues("PullTopic")
        assert queues == [MessageQueue("PullTopic", "broker-b", 0)]
        mq = queues[0]

        found = await consumer.pull(mq, 0, 32)
        assert found.status is PullStatus.FOUND
        assert [m.body for m in found.messages] == [b"a", b"b", big]
        assert found.messages[2].sys_flag & MessageSysFlag.COMPRESSED_FLAG
        assert (found.next_begin_offset, found.min_offset, found.max_offset) == (3, 0, 3)

        tagged = await consumer.pull(mq, 0, 32, subscription="TagA")
        assert [m.tags for m in tagged.messages] == ["TagA", "TagA"]

        empty = await consumer.pull(mq, 3, 32)
        assert empty.status is PullStatus.NO_NEW_MSG
        assert empty.messages == ()
        far = await consumer.pull(mq, 1000, 32)
        assert far.status is PullStatus.OFFSET_ILLEGAL


async def test_library_producer_sends_single_batch_and_message_batch_over_the_broker_stream(
    cluster: LocalCluster,
) -> None:
    """DefaultMQProducer.connect talks to the brokers itself (no gateway), over Broker.SendStream: the broker has
    no unary send RPC, so every SEND_OK below came through a stream frame."""
    async with MQAdminClient([cluster.namesrv_addr], gateway_addr=cluster.gateway_addr) as admin:
        await admin.update_topic(TopicConfig("LibTopic", 2, 2), cluster_name="DefaultCluster")
        await wait_route(admin, "LibTopic", brokers=2, read_queue_nums=2)

    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="lib_producer"), [cluster.namesrv_addr])
    await producer.start()
    try:
        single = await producer.send(Message("LibTopic", b"one", tags="TagL"))  # a SendStream batch frame
        assert single.send_status is SendStatus.SEND_OK
        oneway_id = await producer.send_oneway(Message("LibTopic", b"two"))
        assert len(oneway_id) == 32
        # one topic: a MessageBatch (SendStream message_batch frame)
        batch = await producer.send_batch([Message("LibTopic", b"b%d" % i) for i in range(5)])
        assert all(isinstance(r, SendResult) and r.send_status is SendStatus.SEND_OK for r in batch), batch
    finally:
        await producer.shutdown()

    async with PullConsumer([cluster.namesrv_addr], "LibTestGroup") as consumer:
        bodies: list[bytes] = []
        for mq in await consumer.fetch_subscribe_message_queues("LibTopic"):
            bodies.extend(m.body for m in (await consumer.pull(mq, 0, 32)).messages)
    assert sorted(bodies) == sorted([b"one", b"two", *(b"b%d" % i for i in range(5))])


runner = CliRunner()


def test_mqadmin_against_the_cluster(cluster: LocalCluster) -> None:
    ns = ["-n", cluster.namesrv_addr]
    addr = cluster.broker_addrs["broker-a"]
    created = runner.invoke(app, [*ns, "updateTopic", "-t", "CliTopic", "-b", addr, "-r", "1", "-w", "1"], env=ENV)
    assert created.exit_code == 0, created.output
    assert f"create topic to {addr} success." in created.stdout

    route_ok = False
    for _ in range(ROUTE_WAIT_ROUNDS):
        if runner.invoke(app, [*ns, "topicRoute", "-t", "CliTopic"], env=ENV).exit_code == 0:
            route_ok = True
            break
        asyncio.run(asyncio.sleep(0.1))
    assert route_ok

    gw = ["-g", cluster.gateway_addr]
    sent = runner.invoke(
        app, [*ns, "sendMessage", "-t", "CliTopic", "-p", "hello cli", "-k", "key1", "-c", "TagC", *gw], env=ENV
    )
    assert sent.exit_code == 0, sent.output
    assert "sendStatus=SEND_OK" in sent.stdout

    status = runner.invoke(app, [*ns, "topicStatus", "-t", "CliTopic"], env=ENV)
    assert status.exit_code == 0, status.output
    assert "broker-a" in status.stdout

    consumed = runner.invoke(
        app, [*ns, "consumeMessage", "-t", "CliTopic", "-b", "broker-a", "-i", "0", "-o", "0", "-c", "10"], env=ENV
    )
    assert consumed.exit_code == 0, consumed.output
    assert "hello cli" in consumed.stdout
    assert "TagC" in consumed.stdout
    assert "1 message(s)" in consumed.stdout

    cluster_list = runner.invoke(app, [*ns, "clusterList"], env=ENV)
    assert cluster_list.exit_code == 0, cluster_list.output
    assert addr in cluster_list.stdout
    assert cluster.broker_addrs["broker-b"] in cluster_list.stdout


def test_mqadmin_send_to_a_missing_topic_prints_the_code(cluster: LocalCluster) -> None:
    result = runner.invoke(
        app,
        ["-n", cluster.namesrv_addr, "sendMessage", "-t", "NoSuchTopic", "-p", "x", "-g", cluster.gateway_addr],
        env=ENV,
    )
    assert result.exit_code == 1
    assert "TOPIC_NOT_EXIST (17)" in result.stderr
    assert "Traceback" not in result.output
