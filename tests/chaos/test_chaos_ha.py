"""HA chaos rounds (issue 20, Faults): a SYNC_MASTER broker group of two replicas in controller mode (real etcd,
mqcontroller, name server and brokers from mq_local) under 32 DefaultMQProducer SYNC senders.

- SIGKILL the current master ``MQ_CHAOS_HA_ROUNDS`` times (default 2; ``make chaos``: 10), once (in a seeded round)
  deleting its whole store directory before it restarts; the killed one restarts each round, rejoins as a slave
  and catches up before the next kill. After each failover every acknowledged message is served by the new master
  byte-identical at the queue offset its answer named; the failover time (kill -> first SEND_OK stored by the new
  master) is printed as p50/max and must stay within 10 s.
- SIGSTOP the master longer than the controller's heartbeat timeout: another master is elected; after SIGCONT the old
  one refuses a direct send, nothing acknowledged is missing on the new master (no split brain), and the old one
  truncates and rejoins as a slave.
- A slave killed while catching up a backlog restarts from what it had and finishes, byte-identical.
- An etcd member killed (of 3): sends, heartbeats and a failover still work.

Every round is bounded (ROUND_DEADLINE_S) and so is each test (pytest-timeout); every process is stopped by the
cluster fixture. ``MQ_CHAOS_SEED`` varies the seeds.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from ha_chaos_testkit import poll_until, verify_on
from ha_group import (
    ACKS_PER_ROUND,
    COMMIT_LOG_FILE_BYTES,
    CONTROLLER_HEARTBEAT_TIMEOUT_MS,
    ELECTION_DEADLINE_S,
    QUEUES,
    ROUND_DEADLINE_S,
    TOPIC,
    check_replicas_identical,
    create_topic,
    full_disk_flag,
    kill_and_fail_over,
    producing,
    replica_info,
    replicas,
    restart,
    runtime_info,
    start_group,
    wait_in_sync,
    wait_master,
)
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol import SendMessageRequestHeader
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(1800)]

FAILOVER_MAX_S: Final = 10.0
BACKLOG_BODY_BYTES: Final = 60 * 1024
BACKLOG_BATCHES: Final = 128  # x 16 bodies of 60 KiB: 120 MiB behind
HA_FRAME_BYTES: Final = 1024  # small frames: a catch-up lasts long enough to be caught in the middle


def chaos_ha_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_HA_ROUNDS", "2")))


def seeded(name: str) -> random.Random:
    return random.Random(f"{name}-{os.environ.get('MQ_CHAOS_SEED', '')}")


@pytest.fixture
def group(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    params: dict[str, Any] = getattr(request, "param", {})
    cluster = start_group(tmp_path / "data", **params)
    try:
        yield cluster
    finally:
        for proc in replicas(cluster).values():
            proc.send_signal(signal.SIGCONT)  # a stopped process cannot take the SIGTERM of stop()
        cluster.stop()


def print_failover(times_s: list[float]) -> None:
    print(
        f"\nHA failover (kill -> first SEND_OK on the new master), {len(times_s)} kills: "
        f"p50 {statistics.median(times_s):.2f} s, max {max(times_s):.2f} s"
    )


async def test_sigkill_master_rounds(group: LocalCluster) -> None:
    rng = seeded("sigkill-master")
    rounds = chaos_ha_rounds()
    wipe_round = rng.randrange(rounds)
    failovers: list[float] = []
    async with producing(group, rng) as fleet:
        ledger = fleet.ledger
        for round_no in range(rounds):
            async with asyncio.timeout(ROUND_DEADLINE_S * 3):
                failovers.append(await kill_and_fail_over(group, fleet, rng, wipe=round_no == wipe_round))
    master = await wait_master(group, ELECTION_DEADLINE_S)
    checked = await verify_on(master.master_addr, TOPIC, QUEUES, ledger)
    await check_replicas_identical(group, master.master_addr)
    print_failover(failovers)
    outcomes = f"outcomes {dict(ledger.statuses)}, errors {dict(ledger.errors)}"
    print(f"acknowledged {checked} messages, lost 0; {outcomes}")
    assert max(failovers) <= FAILOVER_MAX_S, failovers


async def direct_send_code(addr: str) -> int:
    """The code a direct SendMessage to ``addr`` gets (a transport failure counts as SYSTEM_ERROR)."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    header = SendMessageRequestHeader(topic=TOPIC, body=b"split-brain?", queue_id=0, properties="")
    try:
        return (await client.send_message(addr, header, 5_000)).code
    except MQError:  # no answer at all (RemotingError) is a refusal too
        return ResponseCode.SYSTEM_ERROR
    finally:
        await client.close()
        await pool.close()


async def test_sigstop_master_no_split_brain(group: LocalCluster) -> None:
    rng = seeded("sigstop-master")
    async with producing(group, rng) as fleet:
        ledger = fleet.ledger
        master = await wait_master(group, ELECTION_DEADLINE_S)
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
        old = replicas(group)[master.master_addr]
        stopped_at = time.monotonic()
        old.send_signal(signal.SIGSTOP)
        new_master = await wait_master(group, ELECTION_DEADLINE_S, not_addr=master.master_addr)
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
        old.send_signal(signal.SIGCONT)
        assert await direct_send_code(master.master_addr) != ResponseCode.SUCCESS
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
        await wait_in_sync(group, master.master_addr, ROUND_DEADLINE_S)
    late = ledger.acks_from(master.master_addr, stopped_at)
    await verify_on(new_master.master_addr, TOPIC, QUEUES, ledger)  # includes every late ack of the old master
    await check_replicas_identical(group, new_master.master_addr)  # the old master's own tail is gone
    table = await runtime_info(master.master_addr)
    assert table is not None
    assert table["brokerRole"] == "SLAVE"
    print(f"\nSIGSTOP: acks by the stopped master after the stop: {len(late)}, all on the new master")


async def fill_backlog(addr: str, rng: random.Random) -> None:
    """About 120 MiB stored on ``addr`` (SendBatch frames of 16 x 60 KiB; the answers' codes do not matter here)."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        for _ in range(BACKLOG_BATCHES):
            requests = [
                SendMessageRequestHeader(topic=TOPIC, body=rng.randbytes(BACKLOG_BODY_BYTES), queue_id=i % QUEUES)
                for i in range(16)
            ]
            await client.send_batch(addr, requests, 30_000)
    finally:
        await client.close()
        await pool.close()


def connected_offsets(log_path: Path) -> list[int]:
    """``slave_offset`` of every ``ha_client_connected`` line of a broker log (where each connection started)."""
    lines = log_path.read_text(errors="replace").splitlines()
    return [int(json.loads(line)["slave_offset"]) for line in lines if '"ha_client_connected"' in line]


@pytest.mark.parametrize("group", [{"MQ_BROKER_HA_TRANSFER_BATCH_SIZE_BYTES": str(HA_FRAME_BYTES)}], indirect=True)
async def test_slave_killed_mid_catch_up(group: LocalCluster) -> None:
    rng = seeded("slave-catch-up")
    await create_topic(group)
    master = await wait_master(group, ELECTION_DEADLINE_S)
    (slave_addr,) = [a for a in replicas(group) if a != master.master_addr]
    slave = replicas(group)[slave_addr]
    await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)
    slave.send_signal(signal.SIGKILL)
    assert slave.wait_exit(10.0)
    await fill_backlog(master.master_addr, rng)
    target = int((await runtime_info(master.master_addr) or {})["commitLogMaxOffset"])
    await asyncio.to_thread(restart, slave, ROUND_DEADLINE_S)
    held: list[int] = []

    async def catching_up() -> bool:
        table = await runtime_info(slave_addr)
        offset = int(table["commitLogMaxOffset"]) if table is not None else 0
        assert offset < target, "the slave caught up before it could be killed mid-way: make the backlog larger"
        held.append(offset)
        return offset > held[0] + target // 10

    await poll_until(catching_up, "the slave catching up", ROUND_DEADLINE_S)
    slave.send_signal(signal.SIGKILL)
    assert slave.wait_exit(10.0)
    await asyncio.to_thread(restart, slave, ROUND_DEADLINE_S)
    await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)
    resumed_from = connected_offsets(slave.log_path)[-1]
    assert held[-1] - COMMIT_LOG_FILE_BYTES <= resumed_from < target  # went on from what it had, not from 0
    await check_replicas_identical(group, master.master_addr)


@pytest.mark.parametrize("group", [{"full_disk": True}], indirect=True)
async def test_slave_disk_full(group: LocalCluster) -> None:
    """The slave's disk fills (its clean service says DISK_FULL): it takes no more bytes and leaves the SyncStateSet,
    the master goes on acknowledging alone; when space returns the slave catches up and rejoins the set."""
    rng = seeded("slave-disk-full")
    async with producing(group, rng) as fleet:
        ledger = fleet.ledger
        master = await wait_master(group, ELECTION_DEADLINE_S)
        (slave_addr,) = [a for a in replicas(group) if a != master.master_addr]
        await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
        flag = full_disk_flag(group, replicas(group)[slave_addr])
        flag.touch()

        async def slave_left() -> bool:
            info = await replica_info(group)
            return info is not None and info.sync_state_set == {master.master_broker_id}

        await poll_until(slave_left, "the full slave leaves the SyncStateSet", ROUND_DEADLINE_S)
        held = int((await runtime_info(slave_addr) or {})["commitLogMaxOffset"])
        full_since = time.monotonic()
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)  # the master goes on
        assert {a.store_addr for a in ledger.acks_from(master.master_addr, full_since)} == {master.master_addr}
        slave_table, master_table = await runtime_info(slave_addr), await runtime_info(master.master_addr)
        assert slave_table is not None
        assert master_table is not None
        assert int(slave_table["commitLogMaxOffset"]) == held < int(master_table["commitLogMaxOffset"])
        flag.unlink()
        await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)  # space returned: it catches up and rejoins
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
    await wait_in_sync(group, slave_addr, ROUND_DEADLINE_S)
    await verify_on(master.master_addr, TOPIC, QUEUES, ledger)
    await verify_on(slave_addr, TOPIC, QUEUES, ledger)  # the slave holds every acknowledged message again


@pytest.mark.parametrize("group", [{"etcd_members": 3}], indirect=True)
async def test_etcd_member_killed(group: LocalCluster) -> None:
    rng = seeded("etcd-member")
    assert group.etcd is not None
    async with producing(group, rng) as fleet:
        ledger = fleet.ledger
        before = await wait_master(group, ELECTION_DEADLINE_S)
        await asyncio.to_thread(group.etcd.kill_member, rng.choice(sorted(group.etcd.processes)), signal.SIGKILL)
        await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)  # sends go on
        await asyncio.sleep(CONTROLLER_HEARTBEAT_TIMEOUT_MS * 3 / 1000)  # past the heartbeat timeout, three times
        after = await replica_info(group)
        assert after is not None  # the controller still answers, from the two members left
        assert (after.master_addr, after.master_epoch) == (before.master_addr, before.master_epoch)  # heartbeats held
        assert len(after.sync_state_set) == 2
        failover_s = await kill_and_fail_over(group, fleet, rng, wipe=False)  # an election still works
    await verify_on((await wait_master(group, ELECTION_DEADLINE_S)).master_addr, TOPIC, QUEUES, ledger)
    assert failover_s <= FAILOVER_MAX_S
