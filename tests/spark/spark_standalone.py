"""A Spark standalone cluster on loopback for tests that need real executors: one Master and two Workers started from
the pip pyspark's ``bin/spark-class`` (SPARK_HOME = the pyspark package), every JVM bound to 127.0.0.1.

Why not ``local-cluster[N,cores,mem]``: its workers all register under one host name, and Spark never launches a
speculative copy on a host that already ran an attempt of the task (TaskSetManager: ``hasAttemptOnHost``), so a
local-cluster job marks a slow task speculatable and never runs the copy. Here the second Worker registers as
``localhost``, the first as ``127.0.0.1``: two host names, both loopback (``localhost`` resolves to 127.0.0.1 only
here, /etc/hosts), so the scheduler sees two hosts and speculation runs.

The Master's REST server is off (it would take the fixed port 6066); the web UIs take free ports. Processes are
ours by PID (mq_local.processes); :meth:`StandaloneCluster.stop` stops the Workers (their shutdown hooks kill their
executors), the Master, then any descendant still alive, by PID and start time. Blocking, caller's thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import pyspark
from mq_local.ports import LOCAL_HOST, free_port
from mq_local.processes import ManagedProcess, descendants, stop_record

SPARK_HOME: Final = Path(pyspark.__file__).resolve().parent
WORKER_HOSTS: Final = (LOCAL_HOST, "localhost")
"""One Worker per host name: two hosts to Spark's scheduler, one loopback interface to the kernel."""
WORKER_CORES: Final = 1
WORKER_MEMORY: Final = "1g"
DAEMON_MEMORY: Final = "256m"
START_DEADLINE_S: Final = 90.0
_POLL_S: Final = 0.2


def spark_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every JVM of the cluster and of its driver: SPARK_HOME, loopback only."""
    env = dict(os.environ if base is None else base)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": LOCAL_HOST, "SPARK_DAEMON_MEMORY": DAEMON_MEMORY})
    return env


class StandaloneCluster:
    """Master + one Worker per WORKER_HOSTS entry, logs and work dirs under ``work_dir``."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.port = free_port()
        env = spark_env()
        env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        argv = [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOCAL_HOST, "--port", str(self.port)]
        argv += ["--webui-port", str(free_port())]
        self.master = ManagedProcess("spark-master", "", env, self.port, work_dir / "master.log", argv)
        self.workers: list[ManagedProcess] = []
        for index, host in enumerate(WORKER_HOSTS):
            worker_env = {**spark_env(), "SPARK_LOCAL_HOSTNAME": host}
            argv = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", host, "--webui-port", "0"]
            argv += ["--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--work-dir", str(work_dir / f"w{index}")]
            argv.append(self.master_url)
            self.workers.append(
                ManagedProcess(f"spark-worker-{index}", "", worker_env, 0, work_dir / f"worker{index}.log", argv)
            )

    @property
    def master_url(self) -> str:
        return f"spark://{LOCAL_HOST}:{self.port}"

    def start(self) -> StandaloneCluster:
        """Start every JVM; return once each Worker registered with the Master. Raises AssertionError (with the
        log's tail) when one exits or does not register within START_DEADLINE_S."""
        self.master.start()
        for worker in self.workers:
            worker.start()
        deadline = time.monotonic() + START_DEADLINE_S
        for proc in [self.master, *self.workers]:
            while proc is not self.master and "Successfully registered with master" not in _log(proc):
                if not proc.running() or time.monotonic() > deadline:
                    raise AssertionError(f"{proc.name} did not register:\n{proc.log_tail()}")
                time.sleep(_POLL_S)
        return self

    def stop(self) -> None:
        """Workers (and their executors), then the Master, then whatever of theirs is still alive."""
        leftovers = [
            record
            for proc in [*self.workers, self.master]
            if proc.running()
            for record in descendants(proc.pid, "spark-descendant")
        ]
        for proc in [*self.workers, self.master]:
            proc.stop()
        for record in leftovers:
            stop_record(record)


def _log(proc: ManagedProcess) -> str:
    try:
        return proc.log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
