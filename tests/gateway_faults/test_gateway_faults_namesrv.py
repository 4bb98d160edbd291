"""Fault isolation (c): every name server down — the gateway keeps sending from its route cache.

The gateway refreshes routes every 300 ms here, so several refreshes fail while the name server is gone;
the cached route (both brokers) must stay in use. What was acknowledged is read back from the brokers
directly (the consumer's route lookup needs the name server).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from gateway_faults_testkit import Publisher, body_of, brokers_of, fault_spec, gateway_stub
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.protocol import PullStatus
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

QUEUES = 4
BEFORE = 400
AFTER = 2_000
REFRESH_MS = 300
DOWN_BEFORE_SENDING_S = 1.5


async def stored_bodies(cluster: LocalCluster, topic: str) -> list[bytes]:
    """Every body of ``topic`` on every broker and queue, pulled straight from the brokers (bounded)."""
    bodies: list[bytes] = []
    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        for addr in cluster.broker_addrs.values():
            for queue_id in range(QUEUES):
                offset = 0
                for _ in range(100):
                    result = await client.pull_message(addr, topic, queue_id, offset, 1024)
                    if result.status is not PullStatus.FOUND:
                        break
                    bodies.extend(m.body for m in result.messages)
                    offset = result.next_begin_offset
    finally:
        await pool.close()
    return bodies


async def test_sends_continue_from_the_route_cache_with_every_name_server_down(tmp_path: Path) -> None:
    spec = fault_spec(
        tmp_path / "data", isolation=False, gateway_env={"MQ_GATEWAY_POLL_NAME_SERVER_INTERVAL_MS": str(REFRESH_MS)}
    )
    with LocalCluster(spec) as cluster:
        topic = await make_topic(cluster, "fault_namesrv_down", queues=QUEUES)
        async with gateway_stub(cluster.gateway_addr) as stub:
            deadline = time.monotonic() + 120.0
            before = await Publisher(stub, topic, workers=4).run(BEFORE, deadline)
            assert cluster.namesrv.stop(cluster.spec.stop_grace_s) is not None
            assert not cluster.namesrv.running()
            await asyncio.sleep(DOWN_BEFORE_SENDING_S)  # several failed route refreshes
            publisher = Publisher(stub, topic, workers=4, first_index=BEFORE)
            after = await publisher.run(BEFORE + AFTER, deadline)
        stored = await stored_bodies(cluster, topic)

    assert [r.code for r in before] == [0] * BEFORE
    assert len(after) == AFTER
    assert [r for r in after if not r.ok] == []
    assert set(brokers_of(after)) == {"broker-a", "broker-b"}  # the whole cached route, not just one broker
    assert sorted(stored) == sorted(body_of(i) for i in range(BEFORE + AFTER))
