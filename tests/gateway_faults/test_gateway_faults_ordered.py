"""Fault isolation (d): 1,000 sharding keys x N messages through SendBatch, read back with PullConsumer —
each key's messages sit on one queue, in send order, each exactly once.

N is ``MQ_FAULT_MESSAGES_PER_KEY`` (default 100, the full size: 100,000 messages; lower it for a quick
run). Each SendBatch carries the next sequence number of every key (1,000 messages), one request after another.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from gateway_faults_testkit import RPC_TIMEOUT_S, env_int, fault_spec, gateway_stub
from mq.gateway.v1 import gateway_pb2
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

KEYS = 1_000
PER_KEY = env_int("MQ_FAULT_MESSAGES_PER_KEY", 100)
QUEUES = 4


def key_of(k: int) -> str:
    return f"order-{k:04d}"


async def test_each_sharding_key_reads_back_on_one_queue_in_send_order(tmp_path: Path) -> None:
    sent_on: dict[str, set[tuple[str, int]]] = defaultdict(set)
    with LocalCluster(fault_spec(tmp_path / "data", isolation=False)) as cluster:
        topic = await make_topic(cluster, "fault_ordered", queues=QUEUES)
        async with gateway_stub(cluster.gateway_addr) as stub:
            for seq in range(PER_KEY):
                messages = [
                    gateway_pb2.Message(topic=topic, body=f"{key_of(k)}:{seq}".encode(), sharding_key=key_of(k))
                    for k in range(KEYS)
                ]
                request = gateway_pb2.SendBatchRequest(messages=messages)
                response = await stub.SendBatch(request, timeout=RPC_TIMEOUT_S)
                failed = [(r.code, r.remark) for r in response.results if r.code != 0]
                assert failed == [], failed[:3]
                for message, result in zip(messages, response.results, strict=True):
                    sent_on[message.sharding_key].add((result.broker_name, result.queue_id))
        stored = await read_all(cluster.namesrv_addr, topic)

    assert len(stored) == KEYS * PER_KEY
    read_on: dict[str, set[tuple[str, int]]] = defaultdict(set)
    seqs: dict[str, list[int]] = defaultdict(list)
    for queue, message in stored:  # queue by queue, in offset order
        key, seq = message.body.decode().split(":")
        read_on[key].add((queue.broker_name, queue.queue_id))
        seqs[key].append(int(seq))
    assert all(len(queues) == 1 for queues in sent_on.values())
    assert read_on == sent_on
    assert {key: order for key, order in seqs.items() if order != list(range(PER_KEY))} == {}
    assert len(seqs) == KEYS
    used = {q for queues in read_on.values() for q in queues}
    assert len(used) == 2 * QUEUES  # 1,000 keys spread over every queue of both brokers
