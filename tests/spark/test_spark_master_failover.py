"""Exactly-once publishing across a broker master failover mid-job (issue 34 part 1): a real Spark job (local[2,4]: up
to 4 attempts per task) writes through the gateway to a SYNC_MASTER group of two replicas in controller mode (etcd,
mqcontroller, name server, broker-a + broker-a-s1, gateway: the failover tests' setup, tests/ha_failover). The first
attempt of partition 0 SIGKILLs the master once it has handed two Arrow batches (500 rows) to its sender, so half
messages of the job are stored (and, with two in-sync replicas, on the slave too) when the master dies. The controller
promotes the slave; the attempts that failed are retried by Spark and send to the new master; the driver's commit
commits the winners there and rolls back the rest of the job's producer group, including the half messages the dead
master had stored and the slave had replicated.

Then the topic is read back from the new master: every row once, and nothing of the job is left open
(QueryOpenTransactions, the call behind mqadmin queryTransactions).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest
from mq_common.channels import ChannelPool
from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import make_topic, spec_for_tests
from mq_spark.datasource import read_summary
from pyspark.sql import DataFrame, SparkSession

if str(Path(__file__).parent) not in sys.path:  # the failure kit sits next to this file (tests are no package)
    sys.path.insert(0, str(Path(__file__).parent))
from spark_failure_kit import FAILING_FORMAT, assert_each_row_once, open_transactions, register_failing

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

GROUP: Final = "broker-a"
PEER: Final = "broker-a-s1"
ROWS: Final = 4_000
PARTITIONS: Final = 4
ARROW_BATCH_ROWS: Final = 250
KILL_AT_BATCH: Final = 2  # partition 0's first attempt kills the master when it asks for its third Arrow batch
DEADLINE_S: Final = 60.0
CONTROLLER_MODE_ENV: Final = {  # as tests/ha_failover: an acknowledged message is on both replicas
    "MQ_BROKER_IN_SYNC_REPLICAS": "2",
    "MQ_BROKER_HA_SEND_HEARTBEAT_INTERVAL_MS": "1000",
    "MQ_BROKER_HA_HOUSEKEEPING_INTERVAL_MS": "5000",
    "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "2000",
    "MQ_BROKER_SLAVE_SYNCHRONIZE_INTERVAL_MS": "1000",
}


@pytest.fixture
def group(spark: SparkSession, tmp_path: Path) -> Iterator[LocalCluster]:
    """The replicated group, started after the Spark session (its JVM is launched before any gRPC thread)."""
    spec = spec_for_tests(
        tmp_path / "cluster",
        broker_groups=1,
        controller=True,
        controller_port=free_port(),
        replicas_per_broker_group=2,
        broker_role="SYNC_MASTER",
        broker_env=CONTROLLER_MODE_ENV,
    )
    with LocalCluster(spec) as cluster:
        yield cluster


def _sync_state_set_size(cluster: LocalCluster) -> int:
    async def ask() -> int:
        pool = ChannelPool()
        try:
            info = await ControllerClient([cluster.spec.controller_addr], pool).get_replica_info(GROUP)
        except MQError:
            return 0
        finally:
            await pool.close()
        return len(info.sync_state_set) if info.has_master else 0

    return asyncio.run(ask())


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S:.0f} s: {what}"
        time.sleep(0.2)


def _frame(spark: SparkSession) -> DataFrame:
    data = [(i, f"N{i % 13:03d}", ["UA", "AA", "DL"][i % 3]) for i in range(ROWS)]
    return spark.createDataFrame(data, "row_id long, tailnum string, carrier string").repartition(PARTITIONS)


def test_a_master_killed_mid_job_fails_over_and_every_row_is_stored_once(
    spark: SparkSession, group: LocalCluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    register_failing(spark)
    topic = asyncio.run(make_topic(group, "eo_master_failover"))
    peer_topics = group.spec.broker_store_dir(PEER) / "config" / "topics.json"
    _wait(lambda: peer_topics.is_file() and topic in peer_topics.read_text(encoding="utf-8"), f"{PEER} has {topic}")
    _wait(lambda: _sync_state_set_size(group) == 2, "both replicas in the SyncStateSet")
    assert group.current_master(GROUP) == GROUP
    master = group.brokers[GROUP]

    summary = tmp_path / "summary.json"
    options = {
        "gateway": group.gateway_addr,
        "topic": topic,
        "keyColumn": "tailnum",
        "tagColumn": "carrier",
        "batchSize": "50",
        "summaryPath": str(summary),
        "injectFailure": f"0:0:killpid{master.pid}@{KILL_AT_BATCH}",
    }
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    try:
        _frame(spark).write.format(FAILING_FORMAT).mode("append").options(**options).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    job_s = time.monotonic() - started

    assert not master.running(), "partition 0's first attempt killed the master"
    assert group.current_master(GROUP) == PEER, "the controller promoted the slave"
    result = read_summary(summary)
    assert (result["committed"], result["guarantee"], result["rows"]) == (True, "exactly_once", ROWS)
    assert (result["tasks"], result["committed_transactions"]) == (PARTITIONS, PARTITIONS)
    assert result["rolled_back_half_messages"] > 0, "what the killed attempts had stored was rolled back"
    assert_each_row_once(group.namesrv_addr, topic, ROWS)
    assert open_transactions([group.group_processes(GROUP)[PEER]], topic) == [], "nothing of the job is left open"
    print(
        f"\nmaster failover: killed {GROUP} mid-job, {PEER} promoted; rolled back "
        f"{result['rolled_back_half_messages']} half messages; {ROWS} rows once; {job_s:.1f} s"
    )
