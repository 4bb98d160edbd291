"""The replicated broker group of the HA chaos rounds (test_chaos_ha.py) and of bench_ha.py's failover row: a
SYNC_MASTER group of two replicas in controller mode from mq_local (etcd, mqcontroller, name server, brokers); who is
master (the controller's replica info, checked against the broker's own GetBrokerRuntimeInfo); waits until a replica
is a caught-up slave in the SyncStateSet; restarts; one failover round (:func:`kill_and_fail_over`).

Replicas are told apart by address only (process names are mq_local's: ``broker-a``, ``broker-a-s1``); which one is
master changes with every failover. Blocking helpers say so; the rest run on the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from ha_chaos_testkit import HaLedger, ProducerFleet, poll_until, verify_on
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_common.protocol import TopicConfig
from mq_common.protocol.controller import ReplicaInfo
from mq_local.cluster import LocalCluster
from mq_local.ports import LOCAL_HOST
from mq_local.processes import ManagedProcess
from mq_local.readiness import wait_serving
from mq_local.testing import spec_for_tests

GROUP: Final = "broker-a"
TOPIC: Final = "ChaosHaTopic"
QUEUES: Final = 4
ROUND_DEADLINE_S: Final = 120.0
ELECTION_DEADLINE_S: Final = 30.0
SEND_BEFORE_KILL_S: Final = (1.0, 3.0)
ACKS_PER_ROUND: Final = 200
CONTROLLER_HEARTBEAT_TIMEOUT_MS: Final = 2_000
COMMIT_LOG_FILE_BYTES: Final = 1024 * 1024
FULL_DISK_HOOK: Final = Path(__file__).resolve().parent / "full_disk"


def start_group(
    data_dir: Path, *, etcd_members: int = 1, full_disk: bool = False, **extra_broker_env: str
) -> LocalCluster:
    """The replicated group; ``full_disk``: every replica loads the fake of full_disk/sitecustomize.py with its own
    flag file (:func:`full_disk_flag`) and measures its disk every 500 ms."""
    if full_disk:
        extra_broker_env["MQ_BROKER_CLEAN_RESOURCE_INTERVAL_MS"] = "500"
    spec = spec_for_tests(
        data_dir,
        broker_groups=1,
        controller=True,
        etcd_members=etcd_members,
        replicas_per_broker_group=2,
        broker_role="SYNC_MASTER",
        start_wait_s=ROUND_DEADLINE_S,
        broker_env={
            "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(COMMIT_LOG_FILE_BYTES),
            "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000",
            "MQ_BROKER_SYNC_FLUSH_TIMEOUT_MS": "3000",
            **extra_broker_env,
        },
        namesrv_env={
            "MQ_NAMESRV_BROKER_CHANNEL_EXPIRED_MS": "6000",
            "MQ_NAMESRV_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "500",
        },
        controller_env={
            "MQ_CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS": str(CONTROLLER_HEARTBEAT_TIMEOUT_MS),
            "MQ_CONTROLLER_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "200",
        },
    )
    cluster = LocalCluster(spec)
    if full_disk:
        for proc in replicas(cluster).values():
            python_path = [str(FULL_DISK_HOOK), *filter(None, [proc.env.get("PYTHONPATH")])]
            proc.env["PYTHONPATH"] = os.pathsep.join(python_path)
            proc.env["CHAOS_FULL_DISK_FLAG"] = str(full_disk_flag(cluster, proc))
    return cluster.start()


def full_disk_flag(cluster: LocalCluster, proc: ManagedProcess) -> Path:
    """While this file exists, ``proc`` sees every file system full (full_disk/sitecustomize.py)."""
    return cluster.spec.data_dir / f"{proc.name}.disk-full"


async def create_topic(cluster: LocalCluster) -> None:
    """The topic on every replica (a slave takes the master's table by SlaveSynchronize; this spares the wait)."""
    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        for addr in replicas(cluster):
            await client.create_topic(addr, TopicConfig(TOPIC, QUEUES, QUEUES))
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def producing(cluster: LocalCluster, rng: random.Random) -> AsyncIterator[ProducerFleet]:
    """TOPIC on every replica, then the 32 producers of ha_chaos_testkit sending to it until the block ends (what they
    recorded: ``fleet.ledger``)."""
    await create_topic(cluster)
    fleet = ProducerFleet(cluster.namesrv_addr, TOPIC, HaLedger(), rng.getrandbits(64))
    await fleet.start()
    try:
        yield fleet
    finally:
        await fleet.stop()


# --- the replicas --------------------------------------------------------------------------------------------------


def replicas(cluster: LocalCluster) -> dict[str, ManagedProcess]:
    """Every broker process of the group, by address."""
    procs = [*cluster.brokers.values(), *cluster.slaves.values()]
    return {f"{LOCAL_HOST}:{p.port}": p for p in procs}


async def replica_info(cluster: LocalCluster) -> ReplicaInfo | None:
    """The controller's view of the group, None when the controller does not answer."""
    pool = ChannelPool()
    try:
        return await ControllerClient([cluster.spec.controller_addr], pool).get_replica_info(GROUP, 3_000)
    except MQError:
        return None
    finally:
        await pool.close()


async def wait_master(cluster: LocalCluster, deadline_s: float, *, not_addr: str = "") -> ReplicaInfo:
    """The controller's replica info once it names a master (other than ``not_addr``) that answers as a master."""
    found: list[ReplicaInfo] = []

    async def elected() -> bool:
        info = await replica_info(cluster)
        if info is None or not info.has_master or info.master_addr == not_addr:
            return False
        table = await runtime_info(info.master_addr)
        if table is None or table.get("brokerRole") == "SLAVE":
            return False
        found.append(info)
        return True

    await poll_until(elected, f"a master other than {not_addr!r}", deadline_s)
    return found[-1]


async def runtime_info(addr: str) -> dict[str, str] | None:
    """GetBrokerRuntimeInfo of ``addr``, None when it does not answer."""
    pool = ChannelPool()
    try:
        return await BrokerClient(pool).get_broker_runtime_info(addr, 2_000)
    except MQError:
        return None
    finally:
        await pool.close()


async def wait_in_sync(cluster: LocalCluster, addr: str, deadline_s: float) -> None:
    """Until broker ``addr`` is a SLAVE holding the master's whole CommitLog and in the SyncStateSet."""

    async def caught_up() -> bool:
        info = await replica_info(cluster)
        if info is None or not info.has_master or info.master_addr == addr:
            return False
        slave, master = await runtime_info(addr), await runtime_info(info.master_addr)
        if slave is None or master is None or slave.get("brokerRole") != "SLAVE":
            return False
        in_set = len(info.sync_state_set) >= cluster.spec.replicas_per_broker_group
        return in_set and int(slave["commitLogMaxOffset"]) >= int(master["commitLogMaxOffset"])

    await poll_until(caught_up, f"{addr} rejoins as a slave in the SyncStateSet, caught up", deadline_s)


def restart(proc: ManagedProcess, deadline_s: float) -> None:
    """Start a stopped replica on its port and store; until it answers grpc.health SERVING. Blocking."""
    assert not proc.running(), f"{proc.name} still runs"
    proc.start()
    addr = f"{LOCAL_HOST}:{proc.port}"
    if not wait_serving(addr, time.monotonic() + deadline_s, proc.running):
        raise AssertionError(f"{proc.name} did not serve again:\n{proc.log_tail()}")


def store_dir(cluster: LocalCluster, proc: ManagedProcess) -> Path:
    return cluster.spec.broker_store_dir(proc.name)


def commit_log_bytes(store: Path) -> bytes:
    """The CommitLog files' bytes up to the last non-zero byte (a preallocated tail is zeros on both sides)."""
    return b"".join(f.read_bytes() for f in sorted((store / "commitlog").iterdir())).rstrip(b"\0")


async def check_replicas_identical(cluster: LocalCluster, master_addr: str) -> None:
    """With no send running: every replica is a caught-up slave of ``master_addr`` and its CommitLog is
    byte-identical to the master's."""
    procs = replicas(cluster)
    for addr in procs:
        if addr != master_addr:
            await wait_in_sync(cluster, addr, ROUND_DEADLINE_S)
    expected = await asyncio.to_thread(commit_log_bytes, store_dir(cluster, procs[master_addr]))
    for addr, proc in procs.items():
        assert await asyncio.to_thread(commit_log_bytes, store_dir(cluster, proc)) == expected, f"{addr} differs"


async def kill_and_fail_over(cluster: LocalCluster, fleet: ProducerFleet, rng: random.Random, wipe: bool) -> float:
    """One round: SIGKILL the current master, time the failover, restart the killed one (its store deleted first
    when ``wipe``), wait until it is a caught-up slave in the SyncStateSet and check every acknowledged message on
    the new master. Returns the failover time in seconds."""
    ledger = fleet.ledger
    master = await wait_master(cluster, ELECTION_DEADLINE_S)
    await fleet.wait_new_acks(ACKS_PER_ROUND, ROUND_DEADLINE_S)
    await asyncio.sleep(rng.uniform(*SEND_BEFORE_KILL_S))
    victim = replicas(cluster)[master.master_addr]
    killed_at = time.monotonic()
    victim.send_signal(signal.SIGKILL)
    assert victim.wait_exit(10.0)
    await poll_until(lambda: ledger.first_ack_not_from(master.master_addr, killed_at), "a SEND_OK", ROUND_DEADLINE_S)
    first = ledger.first_ack_not_from(master.master_addr, killed_at)
    assert first is not None
    new_master = await wait_master(cluster, ELECTION_DEADLINE_S, not_addr=master.master_addr)
    assert first.store_addr == new_master.master_addr
    assert new_master.master_epoch > master.master_epoch
    await verify_on(new_master.master_addr, TOPIC, QUEUES, ledger)
    if wipe:
        shutil.rmtree(store_dir(cluster, victim))
    await asyncio.to_thread(restart, victim, ROUND_DEADLINE_S)
    await wait_in_sync(cluster, master.master_addr, ROUND_DEADLINE_S)
    return first.acked_monotonic_s - killed_at
