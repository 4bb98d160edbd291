"""Half messages of one transaction as one MessageBatch (this project's extension) in a real local cluster (mqnamesrv +
mqbroker + mqgateway processes on 127.0.0.1), on each cell of the send-path matrix (conftest.py): a SendBatch whose
messages all carry one transaction_id is stored in one put as half messages (one queue, consecutive offsets, nothing
on the real topic), and the gateway's whole-transaction EndTransaction delivers each message exactly once with its
tag, keys and properties. The C path (when built) for the plain shape and for user properties shared by every
message (sent once, as the batch's properties), the protobuf path for messages with their own properties and for
sharding keys (one MessageBatch per key's queue); a request mixing transaction ids still goes message by message."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_client.producer import message_batch as message_batch_module
from mq_client.producer.batch_transaction import BatchTransaction
from mq_client.producer.message_batch import ENCODED_FIXED_PROPERTIES
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt, decode_properties
from mq_common.response_code import ResponseCode
from mq_gateway import wire
from mq_gateway.grpc_api import batch_from_protos
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


def messages(topic: str, count: int, transaction_id: str) -> list[gateway_pb2.Message]:
    return [
        gateway_pb2.Message(
            topic=topic,
            body=f"{topic}-{i}".encode(),
            tag="TagH",
            keys=[f"k{i}", "shared"],
            flag=i,
            transaction_id=transaction_id,
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


# shape -> (each message's own user properties, its sharding key, whether the C scan takes the request)
SHAPES: dict[str, tuple[Callable[[int], dict[str, str]], Callable[[int], str], bool]] = {
    "plain": (lambda i: {}, lambda i: "", True),
    # the Spark sink's shape without a key column: one user property on every message (sent once, as the batch's)
    "shared-properties": (lambda i: {IMMUNITY: "600"}, lambda i: "", True),
    "own-properties": (lambda i: {IMMUNITY: "600", "row": str(i)}, lambda i: "", False),
    # the Spark sink's shape with a key column: one MessageBatch per key's queue
    "sharding-keys": (lambda i: {IMMUNITY: "600"}, lambda i: f"key{i % 5}", False),
}


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_half_messages_of_one_transaction_go_as_one_batch_and_commit_once(
    cluster: LocalCluster, pool: ChannelPool, shape: str
) -> None:
    topic = f"GwHalfBatch_{shape.replace('-', '_')}"
    own_properties, sharding_key, c_scan = SHAPES[shape]
    sent = messages(topic, 60, f"tx-{shape}")
    for i, msg in enumerate(sent):
        msg.properties.update(own_properties(i))
        msg.sharding_key = sharding_key(i)
    request = gateway_pb2.SendBatchRequest(messages=sent, producer_group=GROUP, send_timeout_ms=10_000)
    if wire.AVAILABLE:  # which gateway path the request takes when the C path is on
        assert (wire.scan_send_batch(request.SerializeToString()) is not None) == c_scan
    stub = stub_of(cluster, pool)
    results = (await stub.SendBatch(request, timeout=20)).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 60, results[0].remark
    by_queue: dict[tuple[str, int], list[int]] = {}
    for i, r in enumerate(results):
        by_queue.setdefault((r.broker_name, r.queue_id), []).append(i)
    if not sharding_key(0):
        assert len(by_queue) == 1, "one MessageBatch: one queue"
    for positions in by_queue.values():  # one MessageBatch per queue, stored in one put: consecutive offsets
        first = results[positions[0]].queue_offset
        assert [results[i].queue_offset for i in positions] == list(range(first, first + len(positions)))
    assert len({r.msg_id for r in results}) == 60
    queues = sorted(by_queue)
    assert await read_topic(cluster, pool, topic, queues, 0) == [], "half messages are not on the topic yet"
    answer = await end(stub, topic, f"tx-{shape}")
    assert (answer.ended_count, answer.already_ended) == (60, 0)
    stored = await read_topic(cluster, pool, topic, queues, 60)
    assert sorted(m.body for m in stored) == sorted(m.body for m in sent), "each message once"
    index = {r.msg_id: i for i, r in enumerate(results)}
    for m in stored:
        i = index[m.uniq_key]
        assert (m.body, m.tags, m.keys, m.flag) == (sent[i].body, "TagH", [f"k{i}", "shared"], i)
        assert (m.properties["PGROUP"], m.properties["__transactionId__"]) == (GROUP, f"tx-{shape}")
        assert {name: m.properties.get(name) for name in own_properties(i)} == own_properties(i)
        assert m.properties.get("__SHARDINGKEY", "") == sharding_key(i)
        assert "TRAN_MSG" not in m.properties
    again = await end(stub, topic, f"tx-{shape}")
    assert (again.ended_count, again.already_ended) == (0, 60)
    await asyncio.sleep(0.3)
    assert len(await read_topic(cluster, pool, topic, queues, 0)) == 60, "nothing twice"


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
    shared = scan([*messages("T", 2, "tx")])
    assert shared is not None
    assert shared.shared_properties == b""
    with_props = messages("T", 3, "tx")
    for msg in with_props:
        msg.properties[IMMUNITY] = "600"
    found = scan(with_props)
    assert found is not None
    assert dict(gateway_pb2.Message.FromString(found.shared_properties).properties) == {IMMUNITY: "600"}
    with_props[2].properties[IMMUNITY] = "601"
    assert scan(with_props) is None, "properties that differ: the protobuf path"
    plain_with_props = messages("T", 2, "")
    plain_with_props[0].properties[IMMUNITY] = "600"
    plain_with_props[1].properties[IMMUNITY] = "600"
    assert scan(plain_with_props) is None, "a plain message's properties: the protobuf path"


@pytest.mark.skipif(not wire.AVAILABLE, reason="the gateway's C extension is not built or MQ_NO_EXTENSIONS=1")
def test_the_c_path_and_the_protobuf_path_send_the_same_half_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = messages("T", 5, "tx-9")
    for msg in sent:
        msg.properties[IMMUNITY] = "600"
    request = gateway_pb2.SendBatchRequest(messages=sent, producer_group=GROUP)
    raw = request.SerializeToString()
    scanned = wire.scan_send_batch(raw)
    assert scanned is not None
    ids = [f"7F00000100{i:022X}" for i in range(5)]
    total, _longest = wire.encoded_size(scanned, ENCODED_FIXED_PROPERTIES, len(ids[0]))
    c_body = wire.encode_send_batch(raw, ids, ENCODED_FIXED_PROPERTIES, total)
    batch = batch_from_protos(request.messages, request.producer_group)
    assert batch is not None
    assert batch.properties == (), "the shared property travels as the batch's"
    assert batch.transaction == BatchTransaction(GROUP, "tx-9", {IMMUNITY: "600"})
    monkeypatch.setattr(message_batch_module, "create_uniq_ids", lambda count: list(ids[:count]))
    prepared = message_batch_module.prepare(batch)
    assert not isinstance(prepared, str)
    assert c_body == prepared.encode(batch.bodies, 0, len(batch))
    assert decode_properties(batch.transaction.properties_text()) == {
        IMMUNITY: "600",
        "TRAN_MSG": "true",
        "PGROUP": GROUP,
        "__transactionId__": "tx-9",
    }
