"""``mqadmin clusterList`` on a real replicated broker group (mq_local: name server, an ASYNC_MASTER and two slaves,
gateway): each broker's role (by id and as it reports itself), CommitLog max offset and a slave's lag in bytes.

Slave ``broker-a-s1`` replicates from the master; slave ``broker-a-s2`` is told a static master HA address nothing
listens on, so it holds nothing and its lag is, deterministically, the master's whole CommitLog."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from mq_client.admin.cli import app
from mq_client.broker_client import BrokerClient
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendStatus
from mq_common.channels import ChannelPool
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import make_topic, spec_for_tests
from typer.testing import CliRunner

pytestmark = [pytest.mark.integration]

ENV: Final = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}
MESSAGES: Final = 20
DEADLINE_S: Final = 90.0
MASTER: Final = "broker-a"
REPLICATING: Final = "broker-a-s1"
DETACHED: Final = "broker-a-s2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        Path(tmp_path_factory.mktemp("cluster_list_ha")),
        broker_groups=1,
        replicas_per_broker_group=3,
        broker_role="ASYNC_MASTER",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000"},
        start_wait_s=DEADLINE_S,
    )
    local = LocalCluster(spec)
    local.slaves[DETACHED].env["MQ_BROKER_HA_MASTER_ADDRESS"] = f"127.0.0.1:{free_port()}"
    with local:
        asyncio.run(_send(local))
        yield local


async def _send(cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "cluster_list_ha", queues=2)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="cluster_list_ha"), [cluster.namesrv_addr])
    await producer.start()
    try:
        for i in range(MESSAGES):
            result = await producer.send(Message(topic, f"m-{i}".encode() * 50))
            assert result.send_status is SendStatus.SEND_OK
    finally:
        await producer.shutdown()


def _cluster_list(cluster: LocalCluster, *extra: str) -> str:
    result = CliRunner().invoke(app, ["-n", cluster.namesrv_addr, "clusterList", *extra], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def _rows_when_caught_up(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """clusterList's JSON rows by address, once all three brokers are listed and the replicating slave's lag is 0."""
    addrs = {cluster.broker_addrs[MASTER], *cluster.slave_addrs.values()}
    deadline = time.monotonic() + DEADLINE_S
    while True:
        rows = {r["addr"]: r for r in json.loads(_cluster_list(cluster, "--output", "json"))["brokers"]}
        if set(rows) == addrs and rows[cluster.slave_addrs[REPLICATING]]["lag_bytes"] == 0:
            return rows
        assert time.monotonic() < deadline, f"the slaves were not listed and caught up: {rows}"
        time.sleep(0.5)


def test_roles_offsets_and_lag(cluster: LocalCluster) -> None:
    rows = _rows_when_caught_up(cluster)
    master = rows[cluster.broker_addrs[MASTER]]
    replicating = rows[cluster.slave_addrs[REPLICATING]]
    detached = rows[cluster.slave_addrs[DETACHED]]
    assert (master["broker_id"], master["role"], master["broker_role"]) == (0, "MASTER", "ASYNC_MASTER")
    assert master["max_offset"] > MESSAGES * 100
    assert master["lag_bytes"] is None
    assert master["version"].startswith("mqbroker ")
    assert master["error"] is None
    assert (replicating["broker_id"], replicating["role"], replicating["broker_role"]) == (1, "SLAVE", "SLAVE")
    assert replicating["max_offset"] == master["max_offset"]
    assert (detached["broker_id"], detached["role"], detached["broker_role"]) == (2, "SLAVE", "SLAVE")
    assert detached["max_offset"] == 0
    assert detached["lag_bytes"] == master["max_offset"]

    table = _cluster_list(cluster)
    for header in ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#Role", "#MaxOffset", "#Lag"):
        assert header in table
    master_line = next(line for line in table.splitlines() if cluster.broker_addrs[MASTER] in line)
    assert "ASYNC_MASTER" in master_line
    assert str(master["max_offset"]) in master_line
    detached_line = next(line for line in table.splitlines() if cluster.slave_addrs[DETACHED] in line)
    assert detached_line.count(str(master["max_offset"])) == 1  # the lag column; its own max offset is 0


def test_master_reports_its_slave_connections(cluster: LocalCluster) -> None:
    """The master's runtime table: one connected slave (the replicating one), in sync, acknowledging everything."""
    rows = _rows_when_caught_up(cluster)
    master_addr = cluster.broker_addrs[MASTER]

    async def runtime() -> dict[str, str]:
        pool = ChannelPool()
        try:
            return await BrokerClient(pool).get_broker_runtime_info(master_addr)
        finally:
            await pool.close()

    table = asyncio.run(runtime())
    assert table["haInSyncSlaveNums"] == "1"
    (connection,) = json.loads(table["haConnectionInfo"])
    assert connection["inSync"] is True
    assert connection["slaveAckOffset"] == rows[master_addr]["max_offset"]
    assert connection["diff"] == 0


def test_unreachable_broker_is_listed_with_its_error(cluster: LocalCluster) -> None:
    """A SIGKILLed slave stays listed (the name server keeps it until its 120 s expiry) with the id's role, no
    report and the error that replaced it; the others still report."""
    cluster.kill_broker(DETACHED)
    try:
        rows = {r["addr"]: r for r in json.loads(_cluster_list(cluster, "--output", "json"))["brokers"]}
        detached = rows[cluster.slave_addrs[DETACHED]]
        assert (detached["role"], detached["broker_role"], detached["max_offset"]) == ("SLAVE", None, None)
        assert detached["lag_bytes"] is None
        assert detached["error"]
        assert rows[cluster.broker_addrs[MASTER]]["broker_role"] == "ASYNC_MASTER"
        line = next(x for x in _cluster_list(cluster).splitlines() if cluster.slave_addrs[DETACHED] in x)
        assert "SLAVE (no answer)" in line
    finally:
        cluster.start_broker(DETACHED)
