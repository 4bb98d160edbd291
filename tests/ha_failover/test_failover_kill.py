"""Automatic failover (issue 20 item 4) with real processes and a real etcd: a SYNC_MASTER group of two replicas in
controller mode. SIGKILL of the master elects the in-sync peer within 10 s, every acknowledged message is served by
the new master byte-identical; the old master comes back as a slave, truncates nothing it should keep and ends with
a byte-identical CommitLog; a second kill fails back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from failover_testkit import (
    FAILOVER_TARGET_S,
    GROUP,
    PEER,
    commit_log_bytes,
    producer_for,
    replica_info,
    start_group,
    wait_for,
    wait_master,
    wait_sync_state_set,
    wait_topic_on,
)
from mq.gateway.v1 import gateway_pb2_grpc
from mq_local.testing import make_topic

pytestmark = pytest.mark.integration


async def test_kill_master_fails_over_and_back_without_losing_acknowledged_messages(tmp_path: Path) -> None:
    with start_group(tmp_path / "cluster") as cluster:
        spec = cluster.spec
        assert cluster.current_master(GROUP) == GROUP
        topic = await make_topic(cluster, "failover", queues=2)
        sends = await producer_for(cluster, topic, "failover_producer")
        channel = grpc.aio.insecure_channel(cluster.gateway_addr)
        sends.gateway = gateway_pb2_grpc.ProducerGatewayStub(channel)
        try:
            await sends.first_ok_after("warm-up")
            first = await wait_sync_state_set(cluster, 2)
            assert first.master_broker_id == 1
            await sends.send_many(50, "before")
            assert await sends.send_through_gateway(b"before-gateway")
            await wait_topic_on(cluster, PEER, topic)

            await asyncio.to_thread(cluster.kill_broker, GROUP)
            took_s, gateway_s = await asyncio.gather(
                sends.first_ok_after("after-kill"), sends.first_gateway_ok_after("after-kill-gateway")
            )
            print(
                f"kill -> first SEND_OK through DefaultMQProducer: {took_s:.2f} s, "
                f"through the gateway: {gateway_s:.2f} s"
            )
            assert took_s < FAILOVER_TARGET_S
            assert gateway_s < FAILOVER_TARGET_S
            await wait_master(cluster, PEER)
            info = await replica_info(cluster)
            assert info is not None
            assert (info.master_broker_id, info.master_epoch) == (2, first.master_epoch + 1)
            await sends.send_many(50, "after")
            assert await sends.missing(cluster) == {}

            await asyncio.to_thread(cluster.start_broker, GROUP)  # back as a slave of the new master
            await wait_sync_state_set(cluster, 2)
            old, new = spec.broker_store_dir(GROUP), spec.broker_store_dir(PEER)

            async def identical() -> bool:
                return commit_log_bytes(old) == commit_log_bytes(new)

            await wait_for(identical, "the old master's CommitLog is byte-identical to the new master's")

            await asyncio.to_thread(cluster.kill_broker, PEER)
            back_s = await sends.first_ok_after("fail-back")
            print(f"second kill -> first SEND_OK: {back_s:.2f} s")
            await wait_master(cluster, GROUP)
            await sends.send_many(20, "failed-back")
            assert await sends.missing(cluster) == {}
            assert len(sends.acked) >= 122
        finally:
            await sends.producer.shutdown()
            await channel.close()
