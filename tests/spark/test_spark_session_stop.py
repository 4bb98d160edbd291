"""stop_spark_session returns only after the Spark JVM pyspark launched, and the Python workers it started, exited.

The session runs in a child driver process (the tests' shared session must keep its JVM): it builds the session
with the project's builder, runs a Python job (so pyspark.daemon workers exist), notes the JVM's PID and its
descendants (PID + start time, so a reused PID is never mistaken for them), stops through stop_spark_session and
reports, at the moment it returned, which of them still run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from mq_local.processes import pid_matches

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

# A bound on the child driver (JVM start, one job, stop: ~25 s here), not a timing assertion.
DRIVER_RUN_LIMIT_S = 180.0

DRIVER = """
import json
from pathlib import Path

from mq_local.processes import pid_matches, process_start_ticks
from mq_spark.session import build_spark_session, stop_spark_session
from pyspark import SparkContext


def descendants(pid):
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return [(p, process_start_ticks(p)) for p in found if process_start_ticks(p) is not None]


spark = build_spark_session("session-stop-test", master="local[2]")
jvm = SparkContext._gateway.proc.pid
jvm_ticks = process_start_ticks(jvm)
assert spark.sparkContext.parallelize(range(100), 2).map(lambda x: x * 2).sum() == 9900
workers = descendants(jvm)
status = stop_spark_session(spark)
print("RESULT " + json.dumps({
    "jvm": [jvm, jvm_ticks],
    "workers": workers,
    "status": status,
    "jvm_alive": pid_matches(jvm, jvm_ticks),
    "workers_alive": [p for p, t in workers if pid_matches(p, t)],
    "gateway_forgotten": SparkContext._gateway is None,
}))
"""


def test_stop_returns_after_the_jvm_and_its_workers_exited() -> None:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        capture_output=True,
        text=True,
        env=env,
        timeout=DRIVER_RUN_LIMIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))

    assert result["status"] == 0  # the JVM exited by itself on stdin EOF, not by SIGKILL
    assert result["jvm_alive"] is False
    assert result["workers"], "the Python job started no pyspark worker: nothing was checked"
    assert result["workers_alive"] == []
    assert result["gateway_forgotten"] is True
    jvm_pid, jvm_ticks = result["jvm"]
    assert not pid_matches(jvm_pid, jvm_ticks)
    assert not any(pid_matches(pid, ticks) for pid, ticks in result["workers"])
