"""Exactly-once publishing with task retries on (issue 34 part 1): failures injected into real Spark jobs
(local[2,4]: up to 4 attempts per task) against a real local cluster, then the topic read back — every row once.

- a task attempt that fails after sending all its rows (its half messages are rolled back; the retry's committed);
- a Python worker SIGKILLed inside its task after sending;
- two attempts of the same partitions that both finish (what a speculative copy does; local mode never launches
  speculative copies, so the test plays Spark's part: both attempts write, commit() gets the winner's message);
- a broker restarted in the middle of a job, and the gateway SIGKILLed and restarted in the middle of one;
- at_least_once still works, and an aborted exactly-once job leaves nothing on the topic.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all
from mq_spark import datasource
from mq_spark.datasource import FORMAT_NAME, PublishCommitMessage, RocketMQArrowWriter, read_summary
from mq_spark.options import WriterOptions
from pyspark.sql import DataFrame, SparkSession

if str(Path(__file__).parent) not in sys.path:  # the failure kit sits next to this file (tests are no package)
    sys.path.insert(0, str(Path(__file__).parent))
from spark_failure_kit import FAILING_FORMAT, register_failing

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ROWS = 400


def _frame(spark: SparkSession, rows: int = ROWS, partitions: int = 4) -> DataFrame:
    data = [(i, f"N{i % 13:03d}", ["UA", "AA", "DL"][i % 3]) for i in range(rows)]
    return spark.createDataFrame(data, "row_id long, tailnum string, carrier string").repartition(partitions)


def _options(cluster: LocalCluster, topic: str, summary: Path, **extra: str) -> dict[str, str]:
    options = {
        "gateway": cluster.gateway_addr,
        "topic": topic,
        "keyColumn": "tailnum",
        "tagColumn": "carrier",
        "batchSize": "25",
        "summaryPath": str(summary),
    }
    options.update(extra)
    return options


def _row_ids(cluster: LocalCluster, topic: str) -> Counter[int]:
    stored = asyncio.run(read_all(cluster.namesrv_addr, topic))
    return Counter(json.loads(m.body)["row_id"] for _, m in stored)


def _assert_each_once(cluster: LocalCluster, topic: str, rows: int = ROWS) -> None:
    """Every row id once; the read is repeated for up to 30 s while rows are missing (a broker that just restarted
    may still be building its ConsumeQueues)."""
    deadline = time.monotonic() + 30
    counts = _row_ids(cluster, topic)
    while sum(counts.values()) < rows and time.monotonic() < deadline:
        time.sleep(0.5)
        counts = _row_ids(cluster, topic)
    missing = [i for i in range(rows) if counts[i] == 0]
    twice = {i: n for i, n in counts.items() if n > 1}
    assert (missing[:10], twice) == ([], {}), f"{len(missing)} missing, {len(twice)} duplicated"
    assert sum(counts.values()) == rows


@pytest.fixture(scope="module")
def failing(spark: SparkSession) -> SparkSession:
    register_failing(spark)
    return spark


@pytest.mark.parametrize("action", ["raise", "kill"])
def test_a_task_that_fails_after_sending_is_retried_and_every_row_stored_once(
    failing: SparkSession, spark_cluster: LocalCluster, tmp_path: Path, action: str
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, f"eo_{action}"))
    summary = tmp_path / "summary.json"
    options = _options(spark_cluster, topic, summary, injectFailure=f"1:0:{action},3:0:{action},3:1:{action}")
    _frame(failing).write.format(FAILING_FORMAT).mode("append").options(**options).save()
    result = read_summary(summary)
    assert (result["committed"], result["guarantee"], result["rows"]) == (True, "exactly_once", ROWS)
    assert result["committed_transactions"] == 4
    assert result["rolled_back_half_messages"] > 0, "the failed attempts' half messages were rolled back"
    _assert_each_once(spark_cluster, topic)


def test_two_finished_attempts_of_a_partition_publish_once(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A speculative copy: attempts 0 and 1 of every partition send all their rows; Spark commits one of them."""
    topic = asyncio.run(make_topic(spark_cluster, "eo_speculative"))
    options = WriterOptions.parse(_options(spark_cluster, topic, tmp_path / "summary.json"))
    writer = RocketMQArrowWriter(options, "spec0123456789ab")
    winners: list[PublishCommitMessage] = []
    for partition in range(3):
        rows = list(range(partition * 100, partition * 100 + 100))
        batch = pa.RecordBatch.from_pydict(
            {"row_id": rows, "tailnum": [f"N{i % 5}" for i in rows], "carrier": ["UA"] * len(rows)}
        )
        messages = []
        for attempt in (0, 1):
            txid = f"spec0123456789ab-p{partition}-a{attempt}-t{partition * 10 + attempt}"
            monkeypatch.setattr(datasource, "attempt_transaction_id", lambda _key, txid=txid: txid)
            messages.append(writer.write(iter([batch])))
        winners.append(messages[partition % 2])  # the coordinator lets one attempt commit, either may win
    assert _row_ids(spark_cluster, topic) == Counter(), "nothing is visible before the job commits"
    writer.commit(winners)
    result = read_summary(tmp_path / "summary.json")
    assert (result["committed_transactions"], result["rolled_back_half_messages"]) == (3, 300)
    _assert_each_once(spark_cluster, topic, 300)
    writer.commit(winners)  # a commit repeated (a driver retry) changes nothing
    _assert_each_once(spark_cluster, topic, 300)


def test_an_aborted_job_leaves_nothing_and_at_least_once_still_works(
    failing: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "eo_abort"))
    summary = tmp_path / "summary.json"
    every_attempt = ",".join(f"0:{a}:raise" for a in range(4))
    options = _options(spark_cluster, topic, summary, injectFailure=every_attempt)
    with pytest.raises(Exception, match="injected failure"):
        _frame(failing, partitions=2).write.format(FAILING_FORMAT).mode("append").options(**options).save()
    assert read_summary(summary)["committed"] is False
    assert _row_ids(spark_cluster, topic) == Counter(), "an aborted exactly-once job publishes nothing"

    plain = asyncio.run(make_topic(spark_cluster, "eo_plain"))
    options = _options(spark_cluster, plain, summary, deliveryGuarantee="at_least_once")
    _frame(failing).write.format(FORMAT_NAME).mode("append").options(**options).save()
    assert read_summary(summary)["guarantee"] == "at_least_once"
    _assert_each_once(spark_cluster, plain)


def test_a_broker_restarted_mid_job_loses_and_duplicates_nothing(
    failing: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "eo_broker_restart"))
    summary = tmp_path / "summary.json"
    rows = 4_000
    # slow attempts keep the job running while broker-a goes down and comes back
    slow = ",".join(f"{p}:0:sleep4000" for p in range(4))
    options = _options(spark_cluster, topic, summary, injectFailure=slow, batchSize="50")

    def restart() -> None:
        time.sleep(2.0)
        spark_cluster.stop_broker("broker-a")
        time.sleep(2.0)
        spark_cluster.start_broker("broker-a")

    thread = threading.Thread(target=restart)
    thread.start()
    try:
        _frame(failing, rows).write.format(FAILING_FORMAT).mode("append").options(**options).save()
    finally:
        thread.join()
    assert read_summary(summary)["committed"] is True
    _assert_each_once(spark_cluster, topic, rows)


def test_a_gateway_killed_and_restarted_mid_job_loses_and_duplicates_nothing(
    failing: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "eo_gateway_restart"))
    summary = tmp_path / "summary.json"
    rows = 8_000
    gateway = spark_cluster.gateway
    # partition 0's first attempt kills the gateway after its first two Arrow batches (500 rows each): its own calls
    # in flight fail; the other attempts' calls wait for the restarted gateway (or fail and are retried)
    plan = f"0:0:killpid{gateway.pid}@2"
    options = _options(spark_cluster, topic, summary, injectFailure=plan, batchSize="40")

    def restart() -> None:
        deadline = time.monotonic() + 120
        while gateway.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        gateway.wait_exit(10)
        time.sleep(1.0)
        gateway.start()

    thread = threading.Thread(target=restart)
    thread.start()
    failing.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        _frame(failing, rows).write.format(FAILING_FORMAT).mode("append").options(**options).save()
    finally:
        failing.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        thread.join()
    result = read_summary(summary)
    assert result["committed"] is True
    assert (result["tasks"], result["committed_transactions"]) == (4, 4)
    assert gateway.running(), "the gateway was restarted"
    _assert_each_once(spark_cluster, topic, rows)
