"""mqadmin getSyncStateSet / electMaster / getControllerMetaData against real controllers, and mq_local's
``ClusterSpec(controller=True)``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mq_client.admin.cli import app
from mq_common.channels import ChannelPool
from mq_common.controller_client import ControllerClient
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import spec_for_tests
from typer.testing import CliRunner

from tests.controller.controller_testkit import CLUSTER, controllers, heartbeat_of

pytestmark = pytest.mark.integration


def _heartbeats(addr: str, *broker_ids: int, alter_to: frozenset[int] | None = None) -> None:
    async def main() -> None:
        pool = ChannelPool()
        try:
            client = ControllerClient([addr], pool)
            for broker_id in broker_ids:
                await client.broker_heartbeat(heartbeat_of(broker_id))
            if alter_to is not None:
                await client.alter_sync_state_set(CLUSTER, "g1", 1, 1, alter_to, 1)
        finally:
            await pool.close()

    asyncio.run(main())


def test_mqadmin_controller_verbs(tmp_path: Path) -> None:
    runner = CliRunner()
    with controllers(tmp_path) as ctl:
        addr = ctl.addrs[0]
        _heartbeats(addr, 1, 2, 3, alter_to=frozenset({1, 2}))
        shown = runner.invoke(app, ["getSyncStateSet", "-a", addr, "-b", "g1"])
        assert shown.exit_code == 0, shown.output
        for line in ("#brokerName\tg1", "#MasterBrokerId\t1", "#MasterEpoch\t1", "#SyncStateSetEpoch\t2"):
            assert line in shown.output
        assert "#SyncStateSetNums\t2" in shown.output
        assert "InSyncReplica:\tReplicaIdentity{brokerName='g1', brokerId=2" in shown.output
        assert "NotInSyncReplica:\tReplicaIdentity{brokerName='g1', brokerId=3" in shown.output
        by_cluster = runner.invoke(app, ["getSyncStateSet", "-a", addr, "-c", CLUSTER, "--output", "json"])
        groups = json.loads(by_cluster.output)["groups"]
        assert [g["broker_name"] for g in groups] == ["g1"]

        _heartbeats(addr, 1, 2)
        switched = runner.invoke(app, ["electMaster", "-a", addr, "-c", CLUSTER, "-bn", "g1", "-b", "2"])
        assert switched.exit_code == 0, switched.output
        assert "#BrokerMasterAddr\t127.0.0.2:10911" in switched.output
        assert "#MasterEpoch\t2" in switched.output
        refused = runner.invoke(app, ["electMaster", "-a", addr, "-c", CLUSTER, "-bn", "g1", "-b", "3"])
        assert refused.exit_code == 1
        assert "CONTROLLER_ELECT_MASTER_FAILED (2012)" in refused.output

        meta = runner.invoke(app, ["getControllerMetaData", "-a", addr])
        assert meta.exit_code == 0, meta.output
        assert f"#ControllerLeaderAddress\t{addr}" in meta.output
        assert f"#Peer:\t{ctl.etcd.endpoints[0]}" in meta.output


def test_local_cluster_starts_etcd_and_a_controller(tmp_path: Path) -> None:
    spec = spec_for_tests(tmp_path / "cluster", broker_groups=1, controller=True, controller_port=free_port())
    with LocalCluster(spec) as cluster:
        assert cluster.controller is not None
        assert cluster.controller.running()
        assert cluster.etcd is not None
        env = cluster.brokers["broker-a"].env
        assert env["MQ_BROKER_CONTROLLER_ADDR"] == spec.controller_addr
        assert env["MQ_BROKER_ENABLE_CONTROLLER_MODE"] == "true"
        _heartbeats(spec.controller_addr, 1)
        names = {r.name for r in cluster.state().processes}
        assert {"controller", "etcd0"} <= names
        etcd_procs = list(cluster.etcd.processes.values())
    assert not any(p.running() for p in etcd_procs)
