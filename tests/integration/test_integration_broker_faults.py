"""Broker faults with real processes: SIGKILL of broker-b mid-stream, and a clean broker restart."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, spec_for_tests

pytestmark = pytest.mark.integration

STREAM_MESSAGES = 2_000
BATCH = 20  # 100 SendBatch calls
PAUSE_S = 0.03  # about 3 s of sending plus the calls themselves
KILL_AFTER_BATCHES = 30


@pytest.fixture(params=[False, True], ids=["retry-only", "latency-fault-isolation"])
def own_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster this test may break (not the session one)."""
    gateway_env = {"MQ_GATEWAY_SEND_LATENCY_FAULT_ENABLE": "true" if request.param else "false"}
    with LocalCluster(spec_for_tests(tmp_path / "data", gateway_env=gateway_env)) as cluster:
        yield cluster


async def test_sigkill_of_broker_b_mid_stream_every_send_still_succeeds(own_cluster: LocalCluster) -> None:
    topic = await make_topic(own_cluster, "kill_b")
    results: list[gateway_pb2.SendResult] = []
    async with grpc.aio.insecure_channel(own_cluster.gateway_addr, options=CHANNEL_OPTIONS) as channel:
        gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        for batch_no in range(STREAM_MESSAGES // BATCH):
            if batch_no == KILL_AFTER_BATCHES:
                assert own_cluster.kill_broker("broker-b", signal.SIGKILL) == -signal.SIGKILL
            messages = [
                gateway_pb2.Message(topic=topic, body=f"m-{batch_no * BATCH + i}".encode()) for i in range(BATCH)
            ]
            response = await gateway.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=30)
            results.extend(response.results)
            await asyncio.sleep(PAUSE_S)

    failed = [(r.code, r.remark) for r in results if r.code != ResponseCode.SUCCESS]
    assert failed == []
    after_kill = results[KILL_AFTER_BATCHES * BATCH :]
    assert {r.broker_name for r in after_kill} == {"broker-a"}
    assert {r.broker_name for r in results[: KILL_AFTER_BATCHES * BATCH]} == {"broker-a", "broker-b"}

    # broker-b comes back from its SYNC_FLUSH store; every acknowledged message is there
    own_cluster.start_broker("broker-b")
    stored = await read_all(own_cluster.namesrv_addr, topic)
    bodies = Counter(m.body for _, m in stored)
    expected = {f"m-{i}".encode() for i in range(STREAM_MESSAGES)}
    assert expected <= set(bodies)
    assert set(bodies) == expected
    acked_on_b = sum(1 for r in results if r.broker_name == "broker-b")
    assert sum(1 for q, _ in stored if q.broker_name == "broker-b") >= acked_on_b


async def test_clean_broker_restart_serves_every_message_it_had(tmp_path: Path) -> None:
    with LocalCluster(spec_for_tests(tmp_path / "data", broker_groups=1)) as cluster:
        topic = await make_topic(cluster, "restart")
        async with grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS) as channel:
            gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub = gateway_pb2_grpc.ProducerGatewayStub(channel)
            messages = [gateway_pb2.Message(topic=topic, body=f"r-{i}".encode(), tag=f"T{i % 2}") for i in range(600)]
            for start in range(0, len(messages), 200):
                request = gateway_pb2.SendBatchRequest(messages=messages[start : start + 200])
                response = await gateway.SendBatch(request, timeout=30)
                assert all(r.code == ResponseCode.SUCCESS for r in response.results)
        before = await read_all(cluster.namesrv_addr, topic)
        assert cluster.stop_broker("broker-a") == 0  # clean exit on SIGTERM
        cluster.start_broker("broker-a")
        after = await read_all(cluster.namesrv_addr, topic)
    assert len(before) == 600
    key = [(q.queue_id, m.queue_offset, m.commit_log_offset, m.body, m.tags, m.uniq_key) for q, m in before]
    assert [(q.queue_id, m.queue_offset, m.commit_log_offset, m.body, m.tags, m.uniq_key) for q, m in after] == key
