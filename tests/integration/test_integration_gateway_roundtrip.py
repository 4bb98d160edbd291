"""Publish through the real gateway (Send and SendBatch) and read every message back from the brokers."""

from __future__ import annotations

from collections import Counter

import pytest
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.constants import MessageConst
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all

pytestmark = pytest.mark.integration


async def test_send_one_by_one_then_read_back_every_message(
    cluster: LocalCluster, topic: str, gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub
) -> None:
    sent: dict[str, gateway_pb2.SendResult] = {}
    for i in range(40):
        outgoing = gateway_pb2.Message(
            topic=topic, body=f"send-{i}".encode(), tag=f"T{i % 3}", keys=[f"k{i}", "all"], properties={"seq": str(i)}
        )
        response = await gateway.Send(gateway_pb2.SendRequest(message=outgoing, producer_group="it_send"), timeout=15)
        result = response.result
        assert (result.code, result.send_status) == (0, common_pb2.SEND_STATUS_SEND_OK), result.remark
        sent[f"send-{i}"] = result

    stored = await read_all(cluster.namesrv_addr, topic)
    assert sorted(m.body.decode() for _, m in stored) == sorted(sent)
    for queue, message in stored:
        i = int(message.body.decode().split("-")[1])
        result = sent[message.body.decode()]
        assert (queue.broker_name, queue.queue_id, message.queue_offset) == (
            result.broker_name,
            result.queue_id,
            result.queue_offset,
        )
        assert message.uniq_key == result.msg_id
        assert message.offset_msg_id == result.offset_msg_id
        assert message.tags == f"T{i % 3}"
        assert message.keys == [f"k{i}", "all"]
        assert message.properties["seq"] == str(i)
    assert set(Counter(q.broker_name for q, _ in stored)) == {"broker-a", "broker-b"}


async def test_send_batch_results_match_what_the_brokers_store(
    cluster: LocalCluster, topic: str, gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub
) -> None:
    total = 0
    results: dict[bytes, gateway_pb2.SendResult] = {}
    for batch_no in range(4):
        messages = [
            gateway_pb2.Message(topic=topic, body=f"batch-{batch_no}-{i}".encode(), sharding_key=f"key{i % 10}")
            for i in range(250)
        ]
        response = await gateway.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=30)
        assert len(response.results) == len(messages)
        for outgoing, result in zip(messages, response.results, strict=True):
            assert result.code == 0, result.remark
            results[outgoing.body] = result
        total += len(messages)

    stored = await read_all(cluster.namesrv_addr, topic)
    assert len(stored) == total
    assert {m.body for _, m in stored} == set(results)
    for queue, message in stored:
        result = results[message.body]
        assert (queue.broker_name, queue.queue_id, message.queue_offset) == (
            result.broker_name,
            result.queue_id,
            result.queue_offset,
        )
        assert message.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
    # one sharding key -> one queue (the selector by sharding key)
    queues_per_key: dict[str, set[tuple[str, int]]] = {}
    for body, result in results.items():
        key = f"key{int(body.decode().rsplit('-', 1)[1]) % 10}"
        queues_per_key.setdefault(key, set()).add((result.broker_name, result.queue_id))
    assert all(len(queues) == 1 for queues in queues_per_key.values()), queues_per_key
