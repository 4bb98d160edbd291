"""stop_spark_session returns only after the Spark JVM pyspark launched, and the Python workers it started, exited.

The session runs in a child driver process (the tests' shared session must keep its JVM): it builds the session
with the project's builder, runs a Python job (so pyspark.daemon workers exist), notes the JVM's PID and its
descendants (PID + start time, so a reused PID is never mistaken for them), stops through stop_spark_session and
reports, at the moment it returned, which of them still run. Run twice with a fresh cache folder: the first JVM
writes the class data sharing archive at exit (mq_spark.class_archive; stop waits for it and puts it in place), the
second maps it (its /proc/<pid>/maps names the file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mq_local.processes import pid_matches
from mq_spark import class_archive

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

# A bound on the child driver (JVM start, one job, stop: ~25 s here; +15 s when it writes the class archive), not a
# timing assertion.
DRIVER_RUN_LIMIT_S = 300.0

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


spark = build_spark_session("session-stop-test", master="local[2]", create_class_archive=True)
jvm = SparkContext._gateway.proc.pid
jvm_ticks = process_start_ticks(jvm)
assert spark.sparkContext.parallelize(range(100), 2).map(lambda x: x * 2).sum() == 9900
workers = descendants(jvm)
mapped = sorted({line.split()[-1] for line in Path(f"/proc/{jvm}/maps").read_text().splitlines() if ".jsa" in line})
status = stop_spark_session(spark)
print("RESULT " + json.dumps({
    "mapped": mapped,
    "jvm": [jvm, jvm_ticks],
    "workers": workers,
    "status": status,
    "jvm_alive": pid_matches(jvm, jvm_ticks),
    "workers_alive": [p for p, t in workers if pid_matches(p, t)],
    "gateway_forgotten": SparkContext._gateway is None,
}))
"""


def run_driver(env: dict[str, str]) -> dict[str, Any]:
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
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def assert_stopped(result: dict[str, Any]) -> None:
    assert result["status"] == 0  # the JVM exited by itself on stdin EOF, not by SIGKILL
    assert result["jvm_alive"] is False
    assert result["workers"], "the Python job started no pyspark worker: nothing was checked"
    assert result["workers_alive"] == []
    assert result["gateway_forgotten"] is True
    jvm_pid, jvm_ticks = result["jvm"]
    assert not pid_matches(jvm_pid, jvm_ticks)
    assert not any(pid_matches(pid, ticks) for pid, ticks in result["workers"])


def test_stop_returns_after_the_jvm_and_its_workers_exited(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "XDG_CACHE_HOME": str(cache)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop(class_archive.ENV_SWITCH, None)
    folder = cache / "pyrocketmq" / "spark-cds"

    writing = run_driver(env)
    assert_stopped(writing)
    archives = sorted(folder.glob("*.jsa"))
    assert [a.name for a in archives] == [f"{class_archive.archive_key()}.jsa"], sorted(folder.iterdir())
    assert not list(folder.glob("*.pending")), "the dump was put in place, nothing left half-written"
    assert str(archives[0]) not in writing["mapped"]

    mapping = run_driver(env)
    assert_stopped(mapping)
    assert str(archives[0]) in mapping["mapped"], mapping["mapped"]
