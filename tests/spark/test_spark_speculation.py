"""Exactly-once publishing with a real speculative attempt (issue 34 part 1): Spark itself launches a speculative copy
of a slow task, both attempts send half messages, and the topic holds every row once.

Local mode never speculates, and ``local-cluster[N,cores,mem]`` does not either here: its workers share one host name
and Spark never puts a speculative copy on a host that already ran an attempt (spark_standalone.py). So the job runs
on a standalone Master with two Workers registered as ``127.0.0.1`` and ``localhost`` (both loopback), from a driver
process of its own (speculation_driver.py). The first attempt of partition 0 stalls mid-partition in a UDF of the
input DataFrame, after it has sent part of its rows; the copy, held by the same UDF until the test has seen the
original's half messages on the brokers (QueryOpenTransactions), sends the whole partition and wins.

Proof that the copy really ran comes from Spark: the job's event log (SparkListenerTaskStart/TaskEnd lines with
``"Speculative":true`` for partition 0, on the other host, and the successful end of partition 0 is the copy's); proof
that both attempts sent comes from the brokers: the original's transaction (``<job>-p0-a0-t<task attempt id>``) held
half messages before the copy sent, the job's commit committed the winner's transaction (one per partition) and
rolled back the half messages the stalled attempt had sent; after the job nothing of the topic is open.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from mq_local.cluster import LocalCluster
from mq_local.processes import ManagedProcess
from mq_local.testing import make_topic
from mq_spark.datasource import read_summary

if str(Path(__file__).parent) not in sys.path:  # the helpers sit next to this file (tests are no package)
    sys.path.insert(0, str(Path(__file__).parent))
from spark_failure_kit import assert_each_row_once, open_transactions
from spark_standalone import StandaloneCluster, spark_env

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(400)]

DRIVER: Final = Path(__file__).resolve().parent / "speculation_driver.py"
ROWS: Final = 1_200
PARTITIONS: Final = 4
SLOW_PARTITION: Final = 0
STALL_ROW: Final = 200  # of partition 0's rows 0..299
STALL_S: Final = 60.0  # longer than the job with its copy: the copy wins, Spark kills the stalled attempt
DRIVER_DEADLINE_S: Final = 240.0
POLL_S: Final = 0.5


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path / "standalone")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_a_speculative_copy_of_a_slow_task_publishes_every_row_once(
    spark_cluster: LocalCluster, standalone: StandaloneCluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    topic = asyncio.run(make_topic(spark_cluster, "eo_real_speculation"))
    brokers = list(spark_cluster.broker_addrs.values())
    summary, events, gate = tmp_path / "summary.json", tmp_path / "events", tmp_path / "gate"
    config = {
        "master": standalone.master_url,
        "gateway": spark_cluster.gateway_addr,
        "topic": topic,
        "summary": str(summary),
        "event_log_dir": str(events),
        "rows": ROWS,
        "partitions": PARTITIONS,
        "slow_partition": SLOW_PARTITION,
        "stall_row": STALL_ROW,
        "stall_s": STALL_S,
        "gate_file": str(gate),
    }
    config_path = tmp_path / "driver.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    driver = ManagedProcess(
        "spark-driver", "", spark_env(), 0, tmp_path / "driver.log", [sys.executable, str(DRIVER), str(config_path)]
    )
    driver.start()
    first_attempt = f"-p{SLOW_PARTITION}-a0-"
    try:
        deadline = time.monotonic() + DRIVER_DEADLINE_S
        while driver.running() and not gate.exists() and time.monotonic() < deadline:
            if any(first_attempt in t.transaction_id for t in open_transactions(brokers, topic)):
                gate.touch()  # the original attempt's half messages are stored: let the copy send
            time.sleep(POLL_S)
        assert driver.wait_exit(max(1.0, deadline - time.monotonic())), f"the job ran over:\n{driver.log_tail(40)}"
    finally:
        driver.stop()
    assert driver.exit_code() == 0, driver.log_tail(60)
    assert gate.exists(), f"the brokers never held a half message of transaction *{first_attempt}*"
    job_s = time.monotonic() - started

    tasks = _task_events(events)
    slow = [t for t in tasks if t["Index"] == SLOW_PARTITION]
    speculative = [t for t in slow if t["Speculative"]]
    assert speculative, f"Spark launched no speculative copy of partition {SLOW_PARTITION}: {tasks}"
    winner = [t for t in slow if t.get("Reason") == "Success"]
    assert len(winner) == 1, f"one attempt of partition {SLOW_PARTITION} succeeds: {slow}"
    assert winner[0]["Speculative"], f"the speculative copy wins: {slow}"
    assert len({t["Host"] for t in slow}) == 2, "the copy ran on the other host"

    result = read_summary(summary)
    assert (result["committed"], result["guarantee"], result["rows"]) == (True, "exactly_once", ROWS)
    assert result["committed_transactions"] == PARTITIONS
    assert result["rolled_back_half_messages"] > 0, f"the stalled attempt's half messages were rolled back: {result}"
    assert_each_row_once(spark_cluster.namesrv_addr, topic, ROWS)
    assert open_transactions(brokers, topic) == [], "nothing of the job is left open"
    rolled_back = result["rolled_back_half_messages"]
    print(
        f"\nspeculation: partition {SLOW_PARTITION} ran attempts {sorted(t['Attempt'] for t in slow)} on "
        f"{sorted(t['Host'] for t in slow)}, the speculative one won; rolled back {rolled_back} half messages; "
        f"{ROWS} rows once; {job_s:.1f} s"
    )


def _task_events(events: Path) -> list[dict[str, Any]]:
    """One entry per task attempt of the job, from the event log's SparkListenerTaskStart/TaskEnd lines: the Task
    Info fields (Index, Attempt, Speculative, Host, Task ID) and, once ended, the Reason (Success, TaskKilled, ...)."""
    found: dict[int, dict[str, Any]] = {}
    for path in sorted(p for p in events.rglob("events_*") if p.is_file()):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("Event") not in ("SparkListenerTaskStart", "SparkListenerTaskEnd"):
                continue
            info = event["Task Info"]
            entry = found.setdefault(info["Task ID"], {})
            entry.update({k: info[k] for k in ("Index", "Attempt", "Speculative", "Host", "Task ID")})
            if "Task End Reason" in event:
                entry["Reason"] = event["Task End Reason"]["Reason"]
    return list(found.values())
