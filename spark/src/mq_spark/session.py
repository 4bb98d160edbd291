"""A local SparkSession that stays on loopback, with the ``rocketmq`` data source registered.

Loopback only: ``SPARK_LOCAL_IP=127.0.0.1`` (else Spark binds the external interface and does a reverse
DNS lookup), driver host/bind address 127.0.0.1, no UI. Python workers run this interpreter
(``PYSPARK_PYTHON``). Create the session before the driver opens any gRPC channel. Stop it with
:func:`stop_spark_session`, which returns once the Spark JVM and its Python workers have exited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Final

from mq_local.processes import ProcessRecord, descendants, stop_record
from pyspark import SparkContext
from pyspark.sql import SparkSession

from mq_spark import class_archive
from mq_spark.datasource import register

DEFAULT_MASTER: Final = "local[2,4]"
"""Two task threads, and up to 4 attempts per task: in local mode the retry count is the master's second number
(``spark.task.maxFailures`` is not read), and 4 is that setting's default on a cluster. Task retries are safe: the
sink publishes exactly once (mq_spark.transactions)."""
# How long the JVM gets to exit after its stdin closes (it runs its shutdown hooks: ~1 s here), then after SIGKILL.
JVM_EXIT_WAIT_S: Final = 30.0
JVM_KILL_WAIT_S: Final = 5.0
_POLL_S: Final = 0.05
_ARCHIVE_PLANS: dict[int, class_archive.ArchivePlan] = {}
"""JVM pid -> the class archive it writes at exit (build_spark_session; put in place by stop_spark_session)."""


def launched_by_spark_submit() -> bool:
    """True inside a driver started by ``spark-submit`` or the spark-operator (the JVM started first and handed
    its gateway port to Python): its master, driver host and bind address come from the submission."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_spark_session(
    app_name: str, master: str = DEFAULT_MASTER, create_class_archive: bool = False
) -> SparkSession:
    """Get or create the session (UTC session time zone, Arrow on) and register ``rocketmq``.

    Standalone (``make run``, tests): ``master`` on loopback as the module says; a new JVM maps the class data
    sharing archive a previous one left (mq_spark.class_archive), and with ``create_class_archive`` (for callers that
    stop the session with :func:`stop_spark_session`, which puts the archive in place) writes it at exit when there
    is none. Under ``spark-submit`` (for example ``--master k8s://...``) the submitted master, network settings and
    JVM options are kept and ``master`` is ignored.
    """
    builder = SparkSession.builder.appName(app_name)
    archive_plan: class_archive.ArchivePlan | None = None
    if not launched_by_spark_submit():
        if SparkContext._gateway is None:  # a new JVM: its options still count
            archive_plan = class_archive.plan(create_class_archive)
        if archive_plan is not None:
            builder = builder.config("spark.driver.extraJavaOptions", archive_plan.java_options)
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        builder = (
            builder.master(master)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    spark = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    proc = getattr(SparkContext._gateway, "proc", None)
    if archive_plan is not None and archive_plan.pending is not None and proc is not None:
        _ARCHIVE_PLANS[proc.pid] = archive_plan
    register(spark)
    return spark


def stop_spark_session(
    spark: SparkSession, exit_wait_s: float = JVM_EXIT_WAIT_S, kill_wait_s: float = JVM_KILL_WAIT_S
) -> int | None:
    """Stop ``spark`` and return only once the JVM that pyspark launched for it, and every process that JVM
    started (pyspark.daemon and its workers), has exited; returns the JVM's exit status.

    ``SparkSession.stop`` stops the SparkContext but leaves the gateway JVM (``spark-submit`` exec'd into java, the
    Popen in ``SparkContext._gateway.proc``) running until it reads EOF on its stdin, which pyspark only gives at
    interpreter exit; the JVM then runs its shutdown hooks for about a second. Here: note the JVM's descendants,
    stop the session, close the py4j connections, close the JVM's stdin (PythonGatewayServer exits on EOF), wait up
    to ``exit_wait_s`` (class_archive.DUMP_EXIT_WAIT_S for a JVM that writes the class archive at exit, then put in
    place by mq_spark.class_archive.finish), then SIGKILL it by that PID and wait up to ``kill_wait_s``; descendants
    still alive after ``exit_wait_s`` are stopped by PID and start time (mq_local.processes.stop_record). The
    gateway is forgotten, so a later session launches a fresh JVM. Under ``spark-submit`` (the JVM is this
    process's parent, no Popen) it only stops the session and returns None; None too when the JVM was still there
    after the kill wait.
    Raises nothing of its own (what ``SparkSession.stop`` raises propagates, after the JVM was stopped).
    Linux (/proc); caller's thread; blocks. Mirrors nothing in RocketMQ (pyspark's own exit path is atexit).
    """
    gateway = SparkContext._gateway
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    jvm_children = descendants(proc.pid, "jvm-child") if proc is not None else []
    try:
        spark.stop()
    finally:
        if proc is not None:
            _close_gateway(gateway, proc)
    if proc is None:
        return None
    archive_plan = _ARCHIVE_PLANS.pop(proc.pid, None)
    dumping = archive_plan is not None and archive_plan.pending is not None
    status = _wait_or_kill(
        proc, max(exit_wait_s, class_archive.DUMP_EXIT_WAIT_S) if dumping else exit_wait_s, kill_wait_s
    )
    if archive_plan is not None:
        class_archive.finish(archive_plan, status)
    _wait_gone(jvm_children, exit_wait_s, kill_wait_s)
    return status


def _close_gateway(gateway: object, proc: subprocess.Popen[bytes]) -> None:
    """Close the py4j connections and the JVM's stdin; forget the gateway (SparkContext launches a new one)."""
    shutdown = getattr(gateway, "shutdown", None)
    if shutdown is not None:
        shutdown()
    if proc.stdin is not None:
        proc.stdin.close()
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None


def _wait_or_kill(proc: subprocess.Popen[bytes], exit_wait_s: float, kill_wait_s: float) -> int | None:
    try:
        return proc.wait(timeout=exit_wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
    try:
        return proc.wait(timeout=kill_wait_s)
    except subprocess.TimeoutExpired:
        return None


def _wait_gone(records: list[ProcessRecord], wait_s: float, kill_wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while any(r.alive() for r in records) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    for record in records:
        stop_record(record, grace_s=kill_wait_s)
