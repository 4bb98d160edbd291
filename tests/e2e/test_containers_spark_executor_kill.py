"""The exactly-once Spark job of deploy/spark with retries on survives the SIGKILL of an executor's container.

On Kubernetes the spark-operator runs the driver and ``spec.executor.instances`` executor pods; here (no API
server) a Spark standalone master and one worker per executor stand in for the scheduler, each in its own
container from the pyrocketmq-spark image under the executor's security context (spark_standalone_kit.py), and the
driver container submits the SparkApplication's job to that master, with its sparkConf, which leaves
``spark.task.maxFailures`` at Spark's default 4, and the sink's default ``deliveryGuarantee`` exactly_once. Once the
job has started publishing (half messages of its task attempts open on the brokers), the test ``docker kill``\\s one
worker container (its executor and that executor's Python workers die with it, mid-task). The job must retry the
lost task on the other executor (a second attempt of the partition in the surviving executor's log), exit 0 with
every row published, and the topic read back must hold every flight exactly once: what the killed attempt had sent
is never delivered (the commit's ``rolled_back_half_messages`` is recorded with the timings).

Runs against the topology of containers_topology.py (TLS and auth on, the Spark user with Pub on Topic:flights
only); the executors get the driver's Secrets (the user's keys, the client certificate) and nothing of its disk
(the job ships the flights to them inside the tasks; spark_standalone_kit's docstring says why). The flights topic
may already hold the flights of test_containers.py: the read-back starts at the offsets the queues had before this
job. Timings go to
.build/e2e-timings.json (``spark_executor_kill``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Final

import pytest
from containers_kit import RunningPod, json_lines, record_timings, start_container
from containers_topology import Topology
from mq_spark.jobs.publish_flights import FLIGHTS_ROWS, FLIGHTS_TOPIC
from spark_standalone_kit import (
    RETRIED_TASK,
    driver_run,
    executor_logs,
    executor_settings,
    is_running,
    make_flights_topic,
    max_offsets,
    open_half_messages,
    read_back,
    spark_security_env,
    spark_tls_dir,
    start_standalone,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1_800)]

SPARK_TIMEOUT_S: Final = 1_200.0
KILL_AFTER_HALF_MESSAGES: Final = 20_000
"""Open half messages of the job's attempts before the kill: both executors are mid-task (4 tasks of ~84k rows)."""
KILL_WAIT_S: Final = 300.0
POLL_S: Final = 0.5


def test_executor_container_sigkill_mid_job_every_flight_once(
    topology: Topology, bootstrapped: str, spark_app: dict[str, Any], tmp_path: Path
) -> None:
    spec = spark_app["spec"]
    assert "spark.task.maxFailures" not in spec["sparkConf"] or int(spec["sparkConf"]["spark.task.maxFailures"]) > 1
    asyncio.run(make_flights_topic(topology))
    before = asyncio.run(max_offsets(topology, FLIGHTS_TOPIC))
    instances, cores, memory = executor_settings(spec)
    assert instances >= 2, "an executor killed needs another to retry its tasks on"
    tls_dir = spark_tls_dir(topology, tmp_path)
    started = time.monotonic()
    cluster = start_standalone(spec, tls_dir, spark_security_env())
    standalone_s = time.monotonic() - started
    confs = (
        # What the operator turns spec.executor into (instances x cores and the memory of each executor) ...
        *("--conf", f"spark.cores.max={instances * cores}", "--conf", f"spark.executor.cores={cores}"),
        *("--conf", f"spark.executor.memory={memory}"),
        # ... and the job's first task waits for every executor (Kubernetes' default ratio, 0.8, also needs 2 of 2).
        *("--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0"),
        *("--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s"),
    )
    run = driver_run(spec, topology, tls_dir, cluster.master_url, extra_confs=confs)
    env = {"SPARK_LOCAL_IP": "127.0.0.1", **spark_security_env()}
    killed = cluster.workers[0]
    try:
        started = time.monotonic()
        baseline = asyncio.run(open_half_messages(topology, FLIGHTS_TOPIC))
        driver = start_container(run, env)
        try:
            open_at_kill, killed_at = _kill_once_publishing(topology, driver, killed, baseline)
            kill_s = killed_at - started
            code = driver.wait_exit(SPARK_TIMEOUT_S)
            seconds = time.monotonic() - started
            logs = driver.logs()
        finally:
            driver.remove()
        survivors = [w for w in cluster.workers if w is not killed]
        survivors_running = all(is_running(w) for w in survivors)
        retried = [m.group(0) for w in survivors for m in RETRIED_TASK.finditer(executor_logs(w))]
    finally:
        cluster.remove()
    assert code == 0, logs[-8000:]
    summaries = [e for e in json_lines(logs) if "published" in e]
    summary = summaries[-1] if summaries else {}
    lost = [line for line in logs.splitlines() if "Lost executor" in line]
    left_open = asyncio.run(open_half_messages(topology, FLIGHTS_TOPIC)) - baseline
    check = asyncio.run(read_back(topology, FLIGHTS_TOPIC, FLIGHTS_ROWS, since=before))
    report = check.report()
    record_timings(
        {
            "spark_executor_kill": {
                "standalone_start_s": round(standalone_s, 1),
                "kill_after_s": round(kill_s, 1),
                "open_half_messages_at_kill": open_at_kill,
                "job_s": round(seconds, 1),
                "kill_to_exit_s": round(seconds - kill_s, 1),
                "retried_on_survivor": retried,
                "half_messages_left_open": left_open,
                "summary": summary,
                "verify": {k: v for k, v in report.items() if k != "duplicate_samples"},
            }
        }
    )
    assert survivors_running
    assert summaries, "no summary line:\n" + logs[-6000:]
    assert summary["published"] == summary["rows"] == FLIGHTS_ROWS, summary
    assert summary["failed"] == 0
    assert summary["guarantee"] == "exactly_once"
    assert len(lost) == 1, "the driver saw no executor lost\n" + logs[-6000:]
    # The killed executor was mid-task: another executor ran a later attempt of its partition.
    assert retried, "no task attempt was retried after the kill"
    # Nothing of the job is left open: the commit ended every half message of its producer group (the killed
    # attempt's rolled back; a check-back could only roll them back later).
    assert left_open == 0, summary
    assert not [s for s in topology.credentials.shown_nowhere if s in logs]
    assert (check.verified, check.missing, check.duplicates, check.unexpected) == (FLIGHTS_ROWS, 0, 0, 0), report
    assert check.messages == FLIGHTS_ROWS
    assert set(check.per_broker) == {"broker-a", "broker-b"}
    assert check.keys_on_many_queues == 0


def _kill_once_publishing(
    topology: Topology, driver: RunningPod, worker: RunningPod, baseline: int
) -> tuple[int, float]:
    """Wait until the job's attempts hold KILL_AFTER_HALF_MESSAGES open half messages (more than ``baseline``, the
    topic's before the job), then SIGKILL ``worker``'s container; returns (the job's open half messages seen,
    time.monotonic() of the kill). Fails when the driver exits first or KILL_WAIT_S passes."""
    started = time.monotonic()
    deadline = started + KILL_WAIT_S
    opened = 0
    while time.monotonic() < deadline:
        if not is_running(driver):
            raise AssertionError(f"the driver exited before the kill ({opened} open):\n{driver.logs()[-6000:]}")
        opened = asyncio.run(open_half_messages(topology, FLIGHTS_TOPIC)) - baseline
        if opened >= KILL_AFTER_HALF_MESSAGES:
            worker.signal("SIGKILL")
            killed_at = time.monotonic()
            assert worker.wait_exit(30) != 0
            return opened, killed_at
        time.sleep(POLL_S)
    raise AssertionError(f"only {opened} half messages open after {KILL_WAIT_S} s:\n{driver.logs()[-6000:]}")
