"""Half messages of one transaction as one MessageBatch (this project's extension) in a real local cluster (mqnamesrv +
mqbroker + mqgateway processes on 127.0.0.1), on each cell of the send-path matrix (conftest.py): a SendBatch whose
messages all carry one transaction_id is stored in one put as half messages (one queue, consecutive offsets, nothing
on the real topic), and the gateway's whole-transaction EndTransaction delivers each message exactly once with its
tag, keys and properties. Plain shape (the C path when built) and with user properties (the protobuf path); a
request mixing transaction ids still goes message by message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence

import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.response_code import ResponseCode
from mq_gateway import wire
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout

pytestmark = pytest.mark.integration

GROUP = "SPARK_PRODUCER_half_batch"
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, send_path_env: Mapping[str, str]) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        data_dir=tmp_path_factory.mktemp("gw-half-batch"),
        common_env=send_path_env,
        ports=PortLayout.free(1),
        flush_disk_type="ASYNC_FLUSH",
        auto_create_topic_enable=True,
        broker_env={"MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(8 * 1024 * 1024)},
        start_wait_s=60.0,
    )
    with LocalCluster(spec) as c:
        yield c


def stub_of(cluster: LocalCluster, pool: ChannelPool) -> gateway_pb2_grpc.ProducerGatewayAsyncStub:
    return gateway_pb2_grpc.ProducerGatewayStub(pool.get(cluster.gateway_addr))


def messages(topic: str, count: int, transaction_id: str, **properties: str) -> list[gateway_pb2.Message]:
    return [
        gateway_pb2.Message(
            topic=topic,
            body=f"{topic}-{i}".encode(),
            tag="TagH",
            keys=[f"k{i}", "shared"],
            flag=i,
            transaction_id=transaction_id,
            properties=properties,
        )
        for i in range(count)
    ]


async def read_topic(
    cluster: LocalCluster, pool: ChannelPool, topic: str, queues: Sequence[tuple[str, int]], count: int
) -> list[MessageExt]:
    """Every message of ``queues`` of ``topic``, once ``count`` are there (commits are dispatched asynchronously);
    what is there after 10 s otherwise."""
    client = BrokerClient(pool)
    found: list[MessageExt] = []
    for _ in range(100):
        found = []
        for broker_name, queue_id in queues:
            pulled = await client.pull_message(cluster.broker_addrs[broker_name], topic, queue_id, 0, 1000)
            found.extend(pulled.messages)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.1)
    return found


async def end(
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str, transaction_id: str, commit: bool = True
) -> gateway_pb2.EndTransactionResponse:
    request = gateway_pb2.EndTransactionRequest(
        topic=topic, producer_group=GROUP, transaction_id=transaction_id, commit=commit
    )
    answer: gateway_pb2.EndTransactionResponse = await stub.EndTransaction(request, timeout=15)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer


@pytest.mark.parametrize("shape", ["plain", "with-properties"])
async def test_half_messages_of_one_transaction_go_as_one_batch_and_commit_once(
    cluster: LocalCluster, pool: ChannelPool, shape: str
) -> None:
    topic = f"GwHalfBatch_{shape.replace('-', '_')}"
    properties = {IMMUNITY: "600"} if shape == "with-properties" else {}
    sent = messages(topic, 60, f"tx-{shape}", **properties)
    request = gateway_pb2.SendBatchRequest(messages=sent, producer_group=GROUP, send_timeout_ms=10_000)
    if wire.AVAILABLE:  # which gateway path the request takes when the C path is on
        assert (wire.scan_send_batch(request.SerializeToString()) is not None) == (shape == "plain")
    stub = stub_of(cluster, pool)
    results = (await stub.SendBatch(request, timeout=20)).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 60, results[0].remark
    queues = {(r.broker_name, r.queue_id) for r in results}
    assert len(queues) == 1, "one MessageBatch: one queue"
    first = results[0].queue_offset
    assert [r.queue_offset for r in results] == list(range(first, first + 60)), "one put: consecutive offsets"
    assert len({r.msg_id for r in results}) == 60
    assert await read_topic(cluster, pool, topic, sorted(queues), 0) == [], "half messages are not on the topic yet"
    answer = await end(stub, topic, f"tx-{shape}")
    assert (answer.ended_count, answer.already_ended) == (60, 0)
    stored = await read_topic(cluster, pool, topic, sorted(queues), 60)
    assert [m.body for m in stored] == [m.body for m in sent], "each message once, in order"
    for m, result, i in zip(stored, results, range(60), strict=True):
        assert (m.uniq_key, m.tags, m.keys, m.flag) == (result.msg_id, "TagH", [f"k{i}", "shared"], i)
        assert (m.properties["PGROUP"], m.properties["__transactionId__"]) == (GROUP, f"tx-{shape}")
        assert m.properties.get(IMMUNITY) == properties.get(IMMUNITY)
        assert "TRAN_MSG" not in m.properties
    again = await end(stub, topic, f"tx-{shape}")
    assert (again.ended_count, again.already_ended) == (0, 60)
    await asyncio.sleep(0.3)
    assert len(await read_topic(cluster, pool, topic, sorted(queues), 0)) == 60, "nothing twice"


async def test_mixed_transaction_ids_go_message_by_message(cluster: LocalCluster, pool: ChannelPool) -> None:
    topic = "GwHalfBatchMixed"
    sent = [
        gateway_pb2.Message(topic=topic, body=f"m{i}".encode(), keys=[f"k{i}"], transaction_id=f"tx-{i % 2}")
        for i in range(16)
    ]
    stub = stub_of(cluster, pool)
    request = gateway_pb2.SendBatchRequest(messages=sent, producer_group=GROUP, send_timeout_ms=10_000)
    if wire.AVAILABLE:
        assert wire.scan_send_batch(request.SerializeToString()) is None
    results = (await stub.SendBatch(request, timeout=20)).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 16, results[0].remark
    queues = sorted({(r.broker_name, r.queue_id) for r in results})
    assert len(queues) > 1, "message by message: each message its own queue"
    assert (await end(stub, topic, "tx-0")).ended_count == 8
    assert (await end(stub, topic, "tx-1", commit=False)).ended_count == 8
    stored = await read_topic(cluster, pool, topic, queues, 8)
    assert sorted(m.body for m in stored) == sorted(f"m{i}".encode() for i in range(0, 16, 2))
    await asyncio.sleep(0.3)
    assert len(await read_topic(cluster, pool, topic, queues, 0)) == 8, "the rolled-back halves never arrive"


async def test_a_request_without_a_producer_group_is_refused_per_message(
    cluster: LocalCluster, pool: ChannelPool
) -> None:
    """No producer group: no batch (and no message) is sent; each message gets MESSAGE_ILLEGAL."""
    request = gateway_pb2.SendBatchRequest(messages=messages("GwHalfNoGroup", 3, "tx"))
    results = (await stub_of(cluster, pool).SendBatch(request, timeout=20)).results
    assert [r.code for r in results] == [ResponseCode.MESSAGE_ILLEGAL] * 3


@pytest.mark.skipif(not wire.AVAILABLE, reason="the gateway's C extension is not built or MQ_NO_EXTENSIONS=1")
def test_the_c_scan_answers_the_transaction_of_a_batch_and_refuses_a_mix() -> None:
    def scan(msgs: list[gateway_pb2.Message], group: str = GROUP) -> wire.ScannedBatch | None:
        return wire.scan_send_batch(
            gateway_pb2.SendBatchRequest(messages=msgs, producer_group=group).SerializeToString()
        )

    one = scan(messages("T", 3, "tx-1"))
    assert one is not None
    assert (one.transaction_id, one.producer_group, one.message_count) == ("tx-1", GROUP, 3)
    plain = scan(messages("T", 3, ""))
    assert plain is not None
    assert (plain.transaction_id, plain.producer_group) == ("", "")
    assert scan(messages("T", 2, "tx-1") + messages("T", 1, "tx-2")) is None
    assert scan(messages("T", 2, "tx-1") + messages("T", 1, "")) is None
    assert scan(messages("T", 2, "") + messages("T", 1, "tx-1")) is None
    assert scan(messages("T", 2, "tx\x01")) is None
    assert scan(messages("T", 2, "tx"), group="g\x02") is None
