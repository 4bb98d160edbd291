"""Fault isolation (a): broker-b SIGKILLed during a publish through the gateway, fault isolation on.

Timeline (by message index, ``MQ_FAULT_MESSAGES`` messages, default 20,000; the long run is 100,000):
the first quarter goes to both brokers; at a quarter, broker-b is SIGKILLed while 16 callers keep sending;
then broker-b is restarted from its SYNC_FLUSH store and re-registers; the last quarter is only sent once it
is back. Checks: the only failed sends are those whose whole budget ran out; after the kill every send lands
on broker-a, also after broker-b is serving again (it is isolated for notAvailableDuration, 600 s for a
failure with RocketMQ 4.x's tables); broker-b's store holds nothing sent after the kill; every acknowledged
message is stored.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from gateway_faults_testkit import (
    Publisher,
    SendRecord,
    body_of,
    brokers_of,
    budget_ran_out,
    env_int,
    fault_spec,
    gateway_stub,
)
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MESSAGES = env_int("MQ_FAULT_MESSAGES", 20_000)
WORKERS = 16
KILL_AT = MESSAGES // 4
RESUME_AT = MESSAGES * 3 // 4
PUBLISH_DEADLINE_S = max(240.0, MESSAGES / 100)
RESTART_WAIT_S = 120.0


class KillController:
    """Kills broker-b when message KILL_AT is about to be sent, restarts it, holds messages >= RESUME_AT."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.kill_now = asyncio.Event()
        self.restarted = asyncio.Event()
        self.killed_s = 0.0
        self.kill_status: int | None = None

    async def before_send(self, index: int) -> None:
        if index == KILL_AT:
            self.kill_now.set()
        if index >= RESUME_AT:
            await asyncio.wait_for(self.restarted.wait(), RESTART_WAIT_S)

    async def run(self) -> None:
        await self.kill_now.wait()
        self.killed_s = time.monotonic()
        self.kill_status = await asyncio.to_thread(self.cluster.kill_broker, "broker-b", signal.SIGKILL)
        await asyncio.to_thread(self.cluster.start_broker, "broker-b")
        self.restarted.set()


async def test_sigkill_of_broker_b_during_publish(tmp_path: Path) -> None:
    with LocalCluster(fault_spec(tmp_path / "data", isolation=True)) as cluster:
        topic = await make_topic(cluster, "fault_kill_b")
        controller = KillController(cluster)
        async with gateway_stub(cluster.gateway_addr) as stub:
            publisher = Publisher(stub, topic, workers=WORKERS, before_send=controller.before_send)
            deadline = time.monotonic() + PUBLISH_DEADLINE_S
            records, _ = await asyncio.gather(publisher.run(MESSAGES, deadline), controller.run())
        stored = await read_all(cluster.namesrv_addr, topic, max_pulls_per_queue=1_000)

    assert controller.kill_status == -signal.SIGKILL
    assert len(records) == MESSAGES
    _check_failures(records)
    before = [r for r in records if r.index < KILL_AT]
    after_kill = [r for r in records if r.started_s > controller.killed_s]
    after_restart = [r for r in records if r.index >= RESUME_AT]
    assert set(brokers_of(before)) == {"broker-a", "broker-b"}
    assert set(brokers_of(after_kill)) == {"broker-a"}
    assert brokers_of(after_restart) == {"broker-a": len(after_restart)}  # back, but isolated: no traffic

    stored_bodies = {m.body for _, m in stored}
    assert {body_of(r.index) for r in records if r.ok} <= stored_bodies  # every ack is durable
    sent_before_kill = {body_of(r.index) for r in records if r.started_s <= controller.killed_s}
    on_b = {m.body for q, m in stored if q.broker_name == "broker-b"}
    assert on_b <= sent_before_kill
    assert len(on_b) >= brokers_of(before)["broker-b"]


def _check_failures(records: list[SendRecord]) -> None:
    failed = [r for r in records if not r.ok]
    print(f"\n[fault kill] {len(records)} sends, {len(failed)} failed, by broker {dict(brokers_of(records))}")
    assert all(budget_ran_out(r) for r in failed), [(r.code, r.remark) for r in failed if not budget_ran_out(r)][:5]
