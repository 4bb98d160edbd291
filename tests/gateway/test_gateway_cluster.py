"""The gateway in a real local cluster (mqnamesrv + two mqbroker + mqgateway processes on 127.0.0.1):
auto-created topics through TBW102, what the broker stored, batches with sharding keys, a broker dying. Every test
runs on each cell of the send-path matrix (conftest.py: C paths, Python paths)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_broker.store import native_append
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.constants import MessageSysFlag
from mq_common.extensions import NO_EXTENSIONS_ENV
from mq_common.response_code import ResponseCode
from mq_gateway import wire
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout

pytestmark = pytest.mark.integration

SMALL_STORE = {
    "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(8 * 1024 * 1024),
    "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "10000",
}


def cluster_spec(data_dir: Path, common_env: Mapping[str, str]) -> ClusterSpec:
    return ClusterSpec(
        data_dir=data_dir,
        common_env=common_env,
        ports=PortLayout.free(2),
        flush_disk_type="ASYNC_FLUSH",
        auto_create_topic_enable=True,
        broker_env=SMALL_STORE,
        start_wait_s=60.0,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, send_path_env: Mapping[str, str]) -> Iterator[LocalCluster]:
    with LocalCluster(cluster_spec(tmp_path_factory.mktemp("gw-cluster"), send_path_env)) as c:
        yield c


def test_the_services_run_the_send_paths_of_their_matrix_cell(
    cluster: LocalCluster, send_path_env: Mapping[str, str]
) -> None:
    """The gateway maps mq_gateway._wire and each broker mq_broker.store._native exactly in the C-paths cell (when
    they are built here): MQ_NO_EXTENSIONS reaches the service processes."""
    c_paths = send_path_env[NO_EXTENSIONS_ENV] == "0"
    gateway_maps = Path(f"/proc/{cluster.gateway.pid}/maps").read_text()
    assert ("/mq_gateway/_wire." in gateway_maps) == (c_paths and wire.AVAILABLE)
    for broker in cluster.brokers.values():
        broker_maps = Path(f"/proc/{broker.pid}/maps").read_text()
        assert ("/mq_broker/store/_native." in broker_maps) == (c_paths and native_append.AVAILABLE)


def gateway_stub(cluster: LocalCluster, pool: ChannelPool) -> gateway_pb2_grpc.ProducerGatewayAsyncStub:
    return gateway_pb2_grpc.ProducerGatewayStub(pool.get(cluster.gateway_addr))


async def test_send_to_a_new_topic_is_stored_as_sent(cluster: LocalCluster, pool: ChannelPool) -> None:
    stub = gateway_stub(cluster, pool)
    message = gateway_pb2.Message(topic="GwNewTopic", body=b"hello", tag="TagA", keys=["k1", "k2"], flag=5)
    result = (await stub.Send(gateway_pb2.SendRequest(message=message), timeout=10)).result
    assert result.code == ResponseCode.SUCCESS, result.remark
    assert result.send_status == common_pb2.SEND_STATUS_SEND_OK
    pulled = await BrokerClient(pool).pull_message(
        cluster.broker_addrs[result.broker_name], "GwNewTopic", result.queue_id, result.queue_offset, 1
    )
    (stored,) = pulled.messages
    assert stored.body == b"hello"
    assert (stored.tags, stored.keys, stored.flag) == ("TagA", ["k1", "k2"], 5)
    assert stored.uniq_key == result.msg_id
    assert stored.offset_msg_id == result.offset_msg_id


async def test_compressed_body_round_trip(cluster: LocalCluster, pool: ChannelPool) -> None:
    body = b"".join(b"line %d of a large message\n" % i for i in range(600))  # ~17 KiB
    stub = gateway_stub(cluster, pool)
    result = (await stub.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="GwZip", body=body)))).result
    assert result.code == ResponseCode.SUCCESS, result.remark
    pulled = await BrokerClient(pool).pull_message(
        cluster.broker_addrs[result.broker_name], "GwZip", result.queue_id, result.queue_offset, 1
    )
    (stored,) = pulled.messages
    assert stored.sys_flag & MessageSysFlag.COMPRESSED_FLAG
    stored_body = stored.body if stored.body == body else zlib.decompress(stored.body)
    assert stored_body == body


async def test_batch_with_sharding_keys_keeps_each_key_on_one_queue_in_order(
    cluster: LocalCluster, pool: ChannelPool
) -> None:
    stub = gateway_stub(cluster, pool)
    keys = [f"order-{k}" for k in range(8)]
    messages = [
        gateway_pb2.Message(topic="GwOrdered", body=f"{key}:{seq}".encode(), sharding_key=key)
        for seq in range(12)
        for key in keys
    ]
    # two requests of 48: the second one sees the topic's own route or still TBW102's — same queue list
    results: list[gateway_pb2.SendResult] = []
    for start in (0, 48):
        request = gateway_pb2.SendBatchRequest(messages=messages[start : start + 48])
        results.extend((await stub.SendBatch(request, timeout=15)).results)
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * len(messages)
    queue_of: dict[str, set[tuple[str, int]]] = {}
    for msg, res in zip(messages, results, strict=True):
        queue_of.setdefault(msg.sharding_key, set()).add((res.broker_name, res.queue_id))
    assert all(len(q) == 1 for q in queue_of.values())
    assert len({next(iter(q)) for q in queue_of.values()}) > 1  # 8 keys do not all share one queue
    broker = BrokerClient(pool)
    for key, ((broker_name, queue_id),) in ((k, tuple(v)) for k, v in queue_of.items()):
        pulled = await broker.pull_message(cluster.broker_addrs[broker_name], "GwOrdered", queue_id, 0, 1000)
        seqs = [int(m.body.split(b":")[1]) for m in pulled.messages if m.body.startswith(f"{key}:".encode())]
        assert seqs == list(range(12)), key


@pytest.fixture
def own_cluster(tmp_path: Path, send_path_env: Mapping[str, str]) -> Iterator[LocalCluster]:
    with LocalCluster(cluster_spec(tmp_path / "gw-kill", send_path_env)) as c:
        yield c


async def test_sends_survive_a_killed_broker(own_cluster: LocalCluster) -> None:
    pool = ChannelPool()
    try:
        stub = gateway_stub(own_cluster, pool)

        async def send(i: int) -> gateway_pb2.SendResult:
            message = gateway_pb2.Message(topic="GwFailover", body=b"m%d" % i)
            return (await stub.Send(gateway_pb2.SendRequest(message=message), timeout=15)).result

        before = [await send(i) for i in range(8)]
        assert {r.broker_name for r in before} == {"broker-a", "broker-b"}
        own_cluster.kill_broker("broker-a")
        after = [await send(i) for i in range(8, 24)]
        assert [r.code for r in after] == [ResponseCode.SUCCESS] * 16, [r.remark for r in after]
        assert {r.broker_name for r in after} == {"broker-b"}
    finally:
        await pool.close()


async def test_gateway_refuses_a_malformed_batch(cluster: LocalCluster) -> None:
    async with grpc.aio.insecure_channel(cluster.gateway_addr) as channel:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        too_many = gateway_pb2.SendBatchRequest(messages=[gateway_pb2.Message(topic="T", body=b"x")] * 1001)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SendBatch(too_many, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_one_topic_batches_are_stored_as_message_batches(cluster: LocalCluster, pool: ChannelPool) -> None:
    """SendBatch of one topic goes as MessageBatches (one queue per call): 1,000 messages in 10 calls come back
    exactly once, in send order per queue, with their properties; each call's results share one queue."""
    stub = gateway_stub(cluster, pool)
    sent: list[tuple[gateway_pb2.Message, gateway_pb2.SendResult]] = []
    for call in range(10):
        messages = [
            gateway_pb2.Message(
                topic="GwMessageBatch", body=f"b{call * 100 + i}".encode(), tag="TagB", keys=[f"k{call * 100 + i}"]
            )
            for i in range(100)
        ]
        results = (await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=15)).results
        assert [r.code for r in results] == [ResponseCode.SUCCESS] * 100, results[0].remark
        assert len({(r.broker_name, r.queue_id) for r in results}) == 1
        assert [r.queue_offset for r in results] == list(range(results[0].queue_offset, results[0].queue_offset + 100))
        sent.extend(zip(messages, results, strict=True))
    broker = BrokerClient(pool)
    by_queue: dict[tuple[str, int], list[tuple[gateway_pb2.Message, gateway_pb2.SendResult]]] = {}
    for msg, res in sent:
        by_queue.setdefault((res.broker_name, res.queue_id), []).append((msg, res))
    assert len(by_queue) > 1  # the calls went round the queues
    stored = 0
    for (broker_name, queue_id), items in by_queue.items():
        pulled = await broker.pull_message(cluster.broker_addrs[broker_name], "GwMessageBatch", queue_id, 0, 1000)
        assert [m.body for m in pulled.messages] == [msg.body for msg, _ in items]  # once each, in send order
        for m, (msg, res) in zip(pulled.messages, items, strict=True):
            assert (m.tags, m.keys, m.uniq_key, m.offset_msg_id) == (
                "TagB",
                list(msg.keys),
                res.msg_id,
                res.offset_msg_id,
            )
        stored += len(pulled.messages)
    assert stored == 1000


async def test_concurrent_batches_are_stored_once_each_in_order(cluster: LocalCluster, pool: ChannelPool) -> None:
    """24 concurrent SendBatch calls of one topic (the gateway may merge their MessageBatches into one broker call):
    every message is stored exactly once where its result says, each call's messages together and in order, with
    their bodies and properties."""
    stub = gateway_stub(cluster, pool)

    def message(call: int, i: int) -> gateway_pb2.Message:
        extra = {"properties": {"call": str(call)}} if i % 2 else {}
        return gateway_pb2.Message(topic="GwMerged", body=f"c{call}-{i}".encode(), tag=f"T{call}", **extra)  # type: ignore[arg-type]

    calls = [[message(call, i) for i in range(40)] for call in range(24)]
    responses = await asyncio.gather(
        *(stub.SendBatch(gateway_pb2.SendBatchRequest(messages=m), timeout=15) for m in calls)
    )
    sent: dict[tuple[str, int, int], tuple[gateway_pb2.Message, gateway_pb2.SendResult]] = {}
    for messages, response in zip(calls, responses, strict=True):
        results = response.results
        assert [r.code for r in results] == [ResponseCode.SUCCESS] * 40, results[0].remark
        assert len({(r.broker_name, r.queue_id) for r in results}) == 1
        assert [r.queue_offset for r in results] == list(range(results[0].queue_offset, results[0].queue_offset + 40))
        for msg, res in zip(messages, results, strict=True):
            sent[(res.broker_name, res.queue_id, res.queue_offset)] = (msg, res)
    assert len(sent) == 24 * 40
    broker = BrokerClient(pool)
    pulled_count = 0
    for broker_name, queue_id in {(b, q) for b, q, _ in sent}:
        pulled = await broker.pull_message(cluster.broker_addrs[broker_name], "GwMerged", queue_id, 0, 1000)
        for m in pulled.messages:
            msg, res = sent[(broker_name, queue_id, m.queue_offset)]
            assert (m.body, m.tags, m.uniq_key, m.offset_msg_id) == (msg.body, msg.tag, res.msg_id, res.offset_msg_id)
            assert m.properties.get("call") == msg.properties.get("call")
        pulled_count += len(pulled.messages)
    assert pulled_count == 24 * 40  # nothing stored twice or lost
