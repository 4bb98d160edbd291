"""The controller against a REAL etcd and real ``mqcontroller`` processes (started and stopped by each test)."""

from __future__ import annotations

import asyncio
import random
import signal
import urllib.request
from pathlib import Path

import pytest
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol.controller import ControllerRole
from mq_common.response_code import ResponseCode
from mq_local.ports import free_port

from tests.controller.controller_testkit import (
    CLUSTER,
    HEARTBEAT_TIMEOUT_MS,
    Heartbeats,
    client_of,
    controllers,
    heartbeat_of,
    wait_replica_info,
)

pytestmark = pytest.mark.integration

# Lease TTL (2 s) + etcd's expiry check (0.5 s) + the scan (0.2 s) + ~1 s, with slack for a loaded 2-core machine.
FAILOVER_BOUND_S = HEARTBEAT_TIMEOUT_MS / 1000 + 1.0 + 4.0


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


async def test_first_heartbeat_makes_a_master_with_epoch_1(tmp_path: Path, pool: ChannelPool) -> None:
    with controllers(tmp_path) as ctl:
        client = client_of(ctl.addrs, pool)
        first = await client.broker_heartbeat(heartbeat_of(1))
        assert first.role is ControllerRole.MASTER
        info = first.replica_info
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == (
            1,
            1,
            {1},
            1,
        )
        assert (info.master_addr, info.master_ha_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")
        second = await client.broker_heartbeat(heartbeat_of(2))
        assert second.role is ControllerRole.SLAVE
        assert second.replica_info == info
        with pytest.raises(MQError) as unknown:
            await client.get_replica_info("no-such-group")
        assert unknown.value.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
        with pytest.raises(MQError) as bad_id:
            await client.broker_heartbeat(heartbeat_of(0))
        assert bad_id.value.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID


async def test_master_lease_expiry_elects_the_in_sync_slave_with_the_larger_offset(
    tmp_path: Path, pool: ChannelPool
) -> None:
    metrics_port = free_port()
    with controllers(tmp_path, env={"MQ_CONTROLLER_METRICS_PORT": str(metrics_port)}) as ctl:
        client = client_of(ctl.addrs, pool)
        with Heartbeats(client) as beats:
            for broker_id, offset in ((1, 1000), (2, 500), (3, 800)):
                beats.beating[broker_id] = heartbeat_of(broker_id, offset, epoch=1)
                await client.broker_heartbeat(beats.beating[broker_id])
            altered = await client.alter_sync_state_set(CLUSTER, "g1", 1, 1, frozenset({1, 2, 3}), 1)
            assert (altered.sync_state_set, altered.sync_state_set_epoch) == ({1, 2, 3}, 2)
            del beats.beating[1]  # the master goes silent
            info, waited_s = await wait_replica_info(client, "g1", lambda i: i.master_broker_id != 1)
        assert waited_s < FAILOVER_BOUND_S
        assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == (
            3,
            2,
            {3},
            3,
        )
        text = await asyncio.to_thread(_scrape, metrics_port)
        assert 'mq_controller_elections_total{broker_name="g1",' in text
        assert 'reason="master_dead"' in text
        assert 'reason="no_master"' in text
        assert 'mq_controller_sync_state_set_size{broker_name="g1"' in text


async def test_an_out_of_set_slave_is_elected_only_with_unclean_election(tmp_path: Path, pool: ChannelPool) -> None:
    with controllers(tmp_path, count=1) as ctl:
        client = client_of(ctl.addrs, pool)
        with Heartbeats(client) as beats:
            beats.beating = {1: heartbeat_of(1, 10), 2: heartbeat_of(2, 99)}
            await client.broker_heartbeat(beats.beating[1])
            await client.broker_heartbeat(beats.beating[2])
            del beats.beating[1]
            info, _ = await wait_replica_info(client, "g1", lambda i: not i.has_master)
            assert (info.master_epoch, info.sync_state_set) == (1, {1})
            with pytest.raises(MQError) as none:
                await client.broker_heartbeat(beats.beating[2])
            assert none.value.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
            back = await client.broker_heartbeat(heartbeat_of(1, 10))  # the in-sync master returns
            assert (back.role, back.replica_info.master_epoch) == (ControllerRole.MASTER, 2)
    with controllers(tmp_path / "unclean", env={"MQ_CONTROLLER_ENABLE_ELECT_UNCLEAN_MASTER": "true"}) as ctl:
        client = client_of(ctl.addrs, pool)
        with Heartbeats(client) as beats:
            beats.beating = {1: heartbeat_of(1, 10), 2: heartbeat_of(2, 99)}
            await client.broker_heartbeat(beats.beating[1])
            await client.broker_heartbeat(beats.beating[2])
            del beats.beating[1]
            info, _ = await wait_replica_info(client, "g1", lambda i: i.master_broker_id == 2)
            assert (info.master_epoch, info.sync_state_set) == (2, {2})


async def test_stale_or_invalid_alter_sync_state_set_is_refused(tmp_path: Path, pool: ChannelPool) -> None:
    with controllers(tmp_path) as ctl:
        client = client_of(ctl.addrs, pool)
        with Heartbeats(client) as beats:
            beats.beating = {1: heartbeat_of(1), 2: heartbeat_of(2)}
            await client.broker_heartbeat(beats.beating[1])
            await client.broker_heartbeat(beats.beating[2])
            ok = await client.alter_sync_state_set(CLUSTER, "g1", 1, 1, frozenset({1, 2}), 1)
            assert ok.sync_state_set_epoch == 2
            cases = [
                ((1, 1, {1}, 1), ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
                ((1, 0, {1}, 2), ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
                ((2, 1, {1, 2}, 2), ResponseCode.CONTROLLER_INVALID_MASTER),
                ((1, 1, {2}, 2), ResponseCode.CONTROLLER_INVALID_MASTER),
                ((1, 1, {1, 2, 7}, 2), ResponseCode.CONTROLLER_INVALID_REPLICAS),
            ]
            for (master, master_epoch, new_set, sss_epoch), code in cases:
                with pytest.raises(MQError) as refused:
                    await client.alter_sync_state_set(
                        CLUSTER, "g1", master, master_epoch, frozenset(new_set), sss_epoch
                    )
                assert refused.value.code == code, refused.value.remark
            info = await client.get_replica_info("g1")
            assert (info.sync_state_set, info.sync_state_set_epoch) == ({1, 2}, 2)


async def test_two_controllers_never_grant_one_epoch_twice(tmp_path: Path, pool: ChannelPool) -> None:
    env = {"MQ_CONTROLLER_ENABLE_ELECT_UNCLEAN_MASTER": "true"}
    with controllers(tmp_path, count=2, env=env) as ctl:
        clients = [client_of([addr], pool) for addr in ctl.addrs]
        for broker_id in (1, 2, 3):
            await clients[broker_id % 2].broker_heartbeat(heartbeat_of(broker_id))
        rng = random.Random(20)
        granted: dict[int, set[int]] = {}
        refusals: list[int] = []
        wins = 0

        async def elect_once(i: int) -> None:
            nonlocal wins
            try:
                info = await clients[i % 2].elect_master(CLUSTER, "g1", rng.choice((1, 2, 3)))
            except MQError as exc:
                refusals.append(exc.code)
                return
            wins += 1
            granted.setdefault(info.master_epoch, set()).add(info.master_broker_id)

        async def beat_once(i: int) -> None:
            result = await clients[i % 2].broker_heartbeat(heartbeat_of(1 + i % 3))
            info = result.replica_info
            granted.setdefault(info.master_epoch, set()).add(info.master_broker_id)

        with Heartbeats(clients[1]) as beats:
            beats.beating = {b: heartbeat_of(b) for b in (1, 2, 3)}
            for _ in range(5):
                await asyncio.gather(*(elect_once(i) for i in range(16)), *(beat_once(i) for i in range(6)))
            final = await clients[0].get_replica_info("g1")
        assert all(len(masters) == 1 for masters in granted.values()), granted
        assert set(refusals) <= {ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ResponseCode.SYSTEM_BUSY}, refusals
        assert wins > 0
        assert final.master_epoch == 1 + wins  # every successful election took exactly one new epoch


AFTER_MEMBER_DEATH_MS = 20_000


async def test_the_controller_goes_on_when_one_of_three_etcd_members_dies(tmp_path: Path, pool: ChannelPool) -> None:
    with controllers(tmp_path, etcd_members=3) as ctl:
        client = client_of(ctl.addrs, pool)
        await client.broker_heartbeat(heartbeat_of(1))
        await asyncio.to_thread(ctl.etcd.kill_member, ctl.etcd.members[0].name, signal.SIGKILL)
        with Heartbeats(client) as beats:
            beats.beating = {b: heartbeat_of(b) for b in (1, 2, 3)}
            # Each call retries past the dead member (bounded), then answers; when the killed member led the etcd
            # cluster, writes wait for the survivors' leader election too (seconds on a loaded machine: a 3 s
            # default RPC deadline was missed once in a CI run), hence the longer deadline of these calls.
            for broker_id in (1, 2, 3):
                result = await client.broker_heartbeat(heartbeat_of(broker_id), timeout_ms=AFTER_MEMBER_DEATH_MS)
                assert (result.replica_info.master_broker_id, result.replica_info.master_epoch) == (1, 1)
            altered = await client.alter_sync_state_set(
                CLUSTER, "g1", 1, 1, frozenset({1, 2}), 1, timeout_ms=AFTER_MEMBER_DEATH_MS
            )
            assert altered.sync_state_set == {1, 2}
            del beats.beating[1]  # the two live members still expire its lease and the controller elects
            info, _ = await wait_replica_info(client, "g1", lambda i: i.master_broker_id == 2, wait_s=60)
            assert info.master_epoch == 2
        meta = await client.get_controller_meta_data()
        assert meta.etcd_leader_id
