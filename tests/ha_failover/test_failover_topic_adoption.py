"""A topic the master created after its slave's last SlaveSynchronize round (real processes, controller mode): the
slave holds the topic's messages (replicated, dispatched into consume queues) but not its config. When the master is
SIGKILLed, the promoted slave adopts the topic from its consume queues with the store's queue count, registers it,
and serves every acknowledged message; the producer goes on sending to the same two queues."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from failover_testkit import FAILOVER_TARGET_S, GROUP, PEER, producer_for, start_group, wait_master, wait_sync_state_set
from mq_local.testing import make_topic

pytestmark = pytest.mark.integration
NEVER_MS = "600000"  # SlaveSynchronize's first round would run 10 minutes after the slave started


def topic_config(store: Path, topic: str) -> dict[str, object] | None:
    path = store / "config" / "topics.json"
    if not path.is_file():
        return None
    table: dict[str, dict[str, object]] = json.loads(path.read_text(encoding="utf-8"))["topicConfigTable"]
    return table.get(topic)


async def test_promoted_slave_adopts_a_topic_it_never_synchronised(tmp_path: Path) -> None:
    env = {"MQ_BROKER_SLAVE_SYNCHRONIZE_INTERVAL_MS": NEVER_MS}
    with start_group(tmp_path / "cluster", broker_env=env) as cluster:
        await wait_sync_state_set(cluster, 2)
        topic = await make_topic(cluster, "adopted", queues=2)
        sends = await producer_for(cluster, topic, "adoption_producer")
        try:
            await sends.send_many(40, "before")
            peer_store = cluster.spec.broker_store_dir(PEER)
            assert topic_config(peer_store, topic) is None  # the slave never copied the master's topic table

            await asyncio.to_thread(cluster.kill_broker, GROUP)
            took_s = await sends.first_ok_after("after-kill")
            assert took_s < FAILOVER_TARGET_S
            await wait_master(cluster, PEER)
            adopted = topic_config(peer_store, topic)
            assert adopted is not None
            assert (adopted["readQueueNums"], adopted["writeQueueNums"], adopted["perm"]) == (2, 2, 6)
            await sends.send_many(20, "after")
            assert await sends.missing(cluster) == {}
            assert len(sends.acked) >= 61
        finally:
            await sends.producer.shutdown()
