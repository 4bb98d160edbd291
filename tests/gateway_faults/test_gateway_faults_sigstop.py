"""Fault isolation (b): broker-b SIGSTOPped for 2 s during a steady publish, fault isolation on.

Four callers send one message at a time with an 800 ms budget. While broker-b is stopped, the sends that
picked it run out of budget (RPC_TIME_OUT); the failure isolates broker-b, so traffic moves to broker-a; once
broker-b runs again and its isolation ends, traffic comes back. The gateway runs with RocketMQ 5.x's latency
tables (MQ_GATEWAY_LATENCY_FAULT_TABLES=5.x: a failure isolates a broker for 10 s) so the return fits in a test.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from gateway_faults_testkit import (
    Publisher,
    SendRecord,
    brokers_of,
    budget_ran_out,
    fault_spec,
    gateway_stub,
)
from mq_client.producer.fault_strategy import LATENCY_TABLES
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WORKERS = 4
SEND_TIMEOUT_MS = 800
STOP_S = 2.0
WARMUP_SENDS = 400
# A failed send counts as the 5.x isolation latency, which maps onto this unavailable duration.
FAILURE_ISOLATION_5X_MS = LATENCY_TABLES["5.x"].not_available_duration_ms[-2]
COME_BACK_WAIT_S = FAILURE_ISOLATION_5X_MS / 1000 + 20.0
MAX_MESSAGES = 200_000
POLL_S = 0.05


class StopController:
    """Warm up, SIGSTOP broker-b for STOP_S, SIGCONT, wait until broker-b takes a send again, stop."""

    def __init__(self, cluster: LocalCluster, publisher: Publisher) -> None:
        self.cluster = cluster
        self.publisher = publisher
        self.stopped_s = 0.0
        self.continued_s = 0.0

    async def run(self) -> None:
        broker_b = self.cluster.brokers["broker-b"]
        try:
            await self._until(lambda: len(self.publisher.records) >= WARMUP_SENDS, 60.0)
            self.stopped_s = time.monotonic()
            broker_b.send_signal(signal.SIGSTOP)
            await asyncio.sleep(STOP_S)
        finally:
            broker_b.send_signal(signal.SIGCONT)
            self.continued_s = time.monotonic()
        try:
            await self._until(self._b_is_back, COME_BACK_WAIT_S)
            await asyncio.sleep(0.5)  # a few more sends after the return
        finally:
            self.publisher.stop()

    def _b_is_back(self) -> bool:
        return any(
            r.ok and r.broker_name == "broker-b" and r.started_s > self.continued_s for r in self.publisher.records
        )

    async def _until(self, condition: Callable[[], bool], wait_s: float) -> None:
        """Poll ``condition`` every POLL_S until it holds or ``wait_s`` passes."""
        for _ in range(int(wait_s / POLL_S)):
            if condition():
                return
            await asyncio.sleep(POLL_S)


async def test_sigstop_moves_traffic_away_and_back(tmp_path: Path) -> None:
    spec = fault_spec(
        tmp_path / "data",
        isolation=True,
        gateway_env={"MQ_GATEWAY_LATENCY_FAULT_TABLES": "5.x"},
    )
    with LocalCluster(spec) as cluster:
        topic = await make_topic(cluster, "fault_sigstop")
        async with gateway_stub(cluster.gateway_addr) as stub:
            publisher = Publisher(stub, topic, workers=WORKERS, send_timeout_ms=SEND_TIMEOUT_MS)
            controller = StopController(cluster, publisher)
            deadline = time.monotonic() + 120.0
            records, _ = await asyncio.gather(publisher.run(MAX_MESSAGES, deadline), controller.run())

    _print_windows(records, controller.stopped_s)
    failed = [r for r in records if not r.ok]
    assert failed, "no send ran into the stopped broker"
    assert all(budget_ran_out(r) and "broker-b" in r.remark for r in failed), [r.remark for r in failed][:3]
    first_failure_s = min(r.finished_s for r in failed)
    before = [r for r in records if r.finished_s < controller.stopped_s]
    moved = [r for r in records if first_failure_s < r.started_s < controller.continued_s]
    came_back = [r for r in records if r.started_s > controller.continued_s]
    assert set(brokers_of(before)) == {"broker-a", "broker-b"}
    assert moved  # traffic kept flowing while broker-b was stopped ...
    assert brokers_of(moved) == {"broker-a": len(moved)}  # ... all of it to broker-a
    assert brokers_of(came_back)["broker-b"] > 0  # and back once the isolation ended


def _print_windows(records: list[SendRecord], origin_s: float) -> None:
    """Per-second successes per broker, relative to the SIGSTOP (shown with pytest -s)."""
    windows: dict[int, Counter[str]] = {}
    for r in records:
        windows.setdefault(int((r.started_s - origin_s) // 1), Counter())[r.broker_name if r.ok else "failed"] += 1
    lines = [f"  t={second:+3d}s {dict(sorted(counts.items()))}" for second, counts in sorted(windows.items())]
    print("\n[fault sigstop] sends per 1 s window (t=0: SIGSTOP of broker-b)\n" + "\n".join(lines))
