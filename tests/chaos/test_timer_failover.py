"""Timers and delay levels across a controller failover (issue 32): the SYNC_MASTER group of the HA rounds
(ha_group.py: etcd, mqcontroller, name server, two broker replicas in controller mode) holds timer messages and
delay-level messages sent to its master (timer_testkit.send_round: a few hundred timers due over 2-10 s, every fifth
recalled, a burst of thousands due at one instant, delay levels "1s 2s 3s"); the master is SIGKILLed while the burst
fires. The slave is promoted: its timer store starts from the master's timerCheckpoint.json (copied by
SlaveSynchronize) and the replicated CommitLog. The killed one restarts, rejoins as a slave and catches up; the next
round sends to the new master and kills it in turn; ``MQ_CHAOS_TIMER_HA_ROUNDS`` rounds (default 2; ``make chaos``:
4), so both replicas are killed as masters.

At the end the real topic is read back from the last master (timer_testkit.drain_and_judge): every timer and
delay-level message not recalled is there exactly once, none early, none lost, no recalled one; and both replicas'
CommitLogs are byte-identical (the old masters' unreplicated tails, if any, are gone).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from ha_group import (
    ELECTION_DEADLINE_S,
    GROUP,
    ROUND_DEADLINE_S,
    check_replicas_identical,
    replicas,
    restart,
    start_group,
    wait_in_sync,
    wait_master,
)
from mq_local.cluster import LocalCluster
from mq_local.processes import ManagedProcess
from timer_testkit import (
    DELAY_LEVEL_SETTING,
    TimerLedger,
    broker_client,
    delay_topic,
    drain_and_judge,
    kill_at_ms,
    send_round,
    sleep_until_ms,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(900)]

TOPIC: Final = "TimerFailoverTopic"
QUEUES: Final = 4


def timer_ha_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_TIMER_HA_ROUNDS", "2")))


def recoveries(proc: ManagedProcess) -> list[dict[str, object]]:
    """The ``timer_store_recovered`` log lines of a replica (one each time it became master), oldest first."""
    lines = proc.log_path.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if '"timer_store_recovered"' in line]


async def promoted_recovery(proc: ManagedProcess, seen: int) -> str:
    """What the promoted replica's timer store recovered: "<pending>/<deliveries found after the checkpoint>" of
    its first ``timer_store_recovered`` line after the ``seen`` it had before."""
    for _ in range(100):
        events = recoveries(proc)
        if len(events) > seen:
            return f"{events[seen].get('pending')}/{events[seen].get('delivered_since_checkpoint')}"
        await asyncio.sleep(0.1)
    return "no timer_store_recovered line"


@pytest.fixture
def group(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = start_group(tmp_path / "data", MQ_BROKER_MESSAGE_DELAY_LEVEL=DELAY_LEVEL_SETTING)
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_master_killed_while_timers_fire(group: LocalCluster) -> None:
    rng = random.Random(f"timer-failover-{os.environ.get('MQ_CHAOS_SEED', '')}")
    ledger = TimerLedger()
    kills: list[str] = []
    async with broker_client() as client:
        for addr in replicas(group):
            await client.create_topic(addr, delay_topic(TOPIC, QUEUES))
        for round_no in range(timer_ha_rounds()):
            async with asyncio.timeout(ROUND_DEADLINE_S * 3):
                master = await wait_master(group, ELECTION_DEADLINE_S)
                (slave_addr,) = [a for a in replicas(group) if a != master.master_addr]
                await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)  # SYNC_MASTER: every put is on both
                seen = len(recoveries(replicas(group)[slave_addr]))
                burst_ms = await send_round(client, master.master_addr, TOPIC, QUEUES, GROUP, ledger, rng, round_no)
                await sleep_until_ms(kill_at_ms(burst_ms, rng))
                victim = replicas(group)[master.master_addr]
                victim.send_signal(signal.SIGKILL)
                assert victim.wait_exit(10.0)
                new_master = await wait_master(group, ELECTION_DEADLINE_S, not_addr=master.master_addr)
                promoted = replicas(group)[new_master.master_addr]
                recovered = await promoted_recovery(promoted, seen)
                kills.append(f"{master.master_addr} -> {new_master.master_addr}: {recovered}")
                await asyncio.to_thread(restart, victim, ROUND_DEADLINE_S)
                await wait_in_sync(group, master.master_addr, ROUND_DEADLINE_S)
        master = await wait_master(group, ELECTION_DEADLINE_S)
        found = await drain_and_judge(client, master.master_addr, TOPIC, QUEUES, ledger)
        assert found.ok, found.summary()
    await check_replicas_identical(group, master.master_addr)
    print(
        f"\ntimer failover rounds: {timer_ha_rounds()} ({kills}), {found.delivered} delivered exactly once, "
        f"{len(ledger.recalled)} recalled never delivered; lateness max {max(found.lateness_ms)} ms (failovers "
        "included)"
    )
