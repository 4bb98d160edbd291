"""The Spark job of deploy/spark/sparkapplication.yaml run as containers against the suite's topology.

:func:`driver_run` is what the spark-operator starts in the driver pod (the image's entrypoint with ``driver``,
spark-submit arguments, the application file and the SparkApplication's arguments, under the driver's security
context); only what host networking forces is changed (containers_topology.HOST_NETWORK_OVERRIDES). The master is
the caller's: ``local[2]`` (test_containers.py) or a Spark standalone master.

:class:`StandaloneCluster` stands in for what Kubernetes gives Spark: executors in their own containers. A Spark
standalone master and ``spec.executor.instances`` workers (``spark-class ...deploy.master.Master`` /
``...deploy.worker.Worker``) run from the same image under the executor's security context, each worker with the
executor's cores and memory, all bound to 127.0.0.1 on free ports; every executor a worker launches lives in its
worker's container, so ``docker kill`` of a worker is the SIGKILL of an executor pod.

What executors in their own containers (or pods) need that ``local[2]`` never showed: the sink reads the Spark
user's keys and the TLS files on the executors (mq_spark.job_security), so the executors get the same Secret env and
client certificate volume as the driver (:func:`start_standalone`). Nothing of the driver's disk: the job builds its
DataFrame from the flights' Arrow table on the driver and the rows travel inside the tasks
(mq_spark.jobs.publish_flights.load_flights).

Also: the offsets of a topic before a run and the read-back of what a run added (RowIdCheck over the queues from
those offsets), and the open half messages of a topic (the exactly-once job's progress before its commit).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from containers_kit import PodRun, RunningPod, free_ports, project_volume, start_container
from containers_topology import STORE_UID, Topology
from e2e_security import SPARK_USER
from mq_client.consumer.pull_consumer import PullConsumer
from mq_common.auth.interceptor import signing_interceptors
from mq_common.channels import ChannelPool
from mq_common.errors import MQClientError
from mq_common.protocol import MessageQueue, PullStatus, TopicConfig
from mq_common.response_code import ResponseCode
from mq_spark.jobs.publish_flights import FLIGHTS_TOPIC
from mq_spark.verify import PULL_BATCH, VERIFY_CONSUMER_GROUP, RowIdCheck, pull_queue

# What deploy/spark/sparkapplication.yaml leaves to the operator on a secured cluster (docs/security.md, "In
# Kubernetes"): `--tls`, the Spark user's keys and a client certificate from Secrets, the topic made by an admin.
SPARK_SECURITY: Final = ("--tls", "--no-create-topic")
SPARK_TLS_DIR: Final = "/etc/pyrocketmq/tls"
REGISTER_TIMEOUT_S: Final = 120.0
DAEMON_MEMORY: Final = "256m"  # the master's and each worker's own JVM (executors get spec.executor.memory)


def spark_tls_dir(topology: Topology, root: Path) -> Path:
    """The Spark driver's projected Secret: the CA and its own client certificate (``mq-spark``, no component)."""
    cert, key = topology.pki.certs["spark"]
    data = {"ca.crt": topology.pki.ca_pem.decode(), "tls.crt": cert.decode(), "tls.key": key.decode()}
    return project_volume({"name": "tls", "secret": {"secretName": "spark", "defaultMode": 0o440}}, {},
                          {"spark": data}, root / "spark-tls", STORE_UID)  # fmt: skip


def spark_security_env() -> dict[str, str]:
    """The Spark user's keys and the TLS files (mq_spark.job_security), as the operator's Secrets would give them."""
    return {
        "MQ_SPARK_ACCESS_KEY": SPARK_USER.access_key,
        "MQ_SPARK_SECRET_KEY": SPARK_USER.secret_key,
        "MQ_SPARK_TLS_CA_FILE": f"{SPARK_TLS_DIR}/ca.crt",
        "MQ_SPARK_TLS_CERT_FILE": f"{SPARK_TLS_DIR}/tls.crt",
        "MQ_SPARK_TLS_KEY_FILE": f"{SPARK_TLS_DIR}/tls.key",
    }


def job_args(spec: dict[str, Any], topology: Topology) -> list[str]:
    """The SparkApplication's arguments plus SPARK_SECURITY, ``--gateway`` / ``--namesrv`` pointed at this host's
    ports (HOST_NETWORK_OVERRIDES, the SparkApplication row)."""
    args = [*spec["arguments"], *SPARK_SECURITY]
    local = {"--gateway": topology.gateway_addr, "--namesrv": topology.namesrv_addrs[0]}
    for flag, value in local.items():
        args[args.index(flag) + 1] = value
    return args


def spark_confs(spec: dict[str, Any]) -> list[str]:
    """``--conf key=value`` for every entry of the SparkApplication's sparkConf."""
    return [a for k, v in spec.get("sparkConf", {}).items() for a in ("--conf", f"{k}={v}")]


def _role_run(
    spec: dict[str, Any],
    role: str,
    pod_name: str,
    args: tuple[str, ...],
    extra_mounts: dict[str, tuple[str, str]],
) -> PodRun:
    """A container of the SparkApplication's ``role`` (driver or executor): its plain env, /tmp emptyDir and
    security context, running ``args`` through the image's entrypoint. The role's Secret-backed env and Secret
    volume (the Spark user's keys, its TLS files) are the caller's: :func:`spark_security_env` and SPARK_TLS_DIR."""
    part = spec[role]
    sizes = {v["name"]: v["emptyDir"].get("sizeLimit", "") for v in spec.get("volumes", []) if "emptyDir" in v}
    security = part["securityContext"]
    empty_dirs = {
        m["mountPath"]: ("emptyDir", sizes[m["name"]]) for m in part.get("volumeMounts", []) if m["name"] in sizes
    }
    return PodRun(
        pod_name=pod_name,
        image=spec["image"],
        command=(),
        args=args,
        env={e["name"]: str(e["value"]) for e in part.get("env", []) if "value" in e},
        mounts={**empty_dirs, **extra_mounts},
        user=f"{security['runAsUser']}:{security['runAsGroup']}",
        read_only_root=bool(security.get("readOnlyRootFilesystem")),
        drop_all_capabilities="ALL" in security["capabilities"]["drop"],
        no_new_privileges=security.get("allowPrivilegeEscalation") is False,
        grpc_port=0,
        termination_grace_s=30,
    )


def driver_run(
    spec: dict[str, Any],
    topology: Topology,
    tls_dir: Path,
    master: str,
    *,
    extra_confs: tuple[str, ...] = (),
    extra_mounts: dict[str, tuple[str, str]] | None = None,
) -> PodRun:
    """What the operator starts in the driver pod: the image's entrypoint with ``driver``, spark-submit arguments
    (``--master master``, the sparkConf, ``extra_confs``), the application file and :func:`job_args`; the Spark
    TLS Secret at SPARK_TLS_DIR (``tls_dir``: :func:`spark_tls_dir`)."""
    args = ("driver", "--master", master, *spark_confs(spec), *extra_confs, spec["mainApplicationFile"],
            *job_args(spec, topology))  # fmt: skip
    mounts = {SPARK_TLS_DIR: ("files", str(tls_dir)), **(extra_mounts or {})}
    return _role_run(spec, "driver", "publish-flights-driver", args, mounts)


def executor_settings(spec: dict[str, Any]) -> tuple[int, int, str]:
    """(instances, cores, memory) of the SparkApplication's executors, e.g. (2, 1, "2g")."""
    executor = spec["executor"]
    return int(executor["instances"]), int(executor["cores"]), str(executor["memory"])


@dataclass(slots=True)
class StandaloneCluster:
    """A Spark standalone master and its workers, each in its own container (module docstring)."""

    master: RunningPod
    master_url: str
    workers: list[RunningPod] = field(default_factory=list)

    def remove(self) -> None:
        for pod in [*self.workers, self.master]:
            pod.remove()


def start_standalone(spec: dict[str, Any], tls_dir: Path, executor_env: dict[str, str]) -> StandaloneCluster:
    """Start the master, then ``spec.executor.instances`` workers (each ``spec.executor.cores`` cores and
    ``spec.executor.memory``) with what the operator gives each executor pod on a secured cluster: the client
    certificate's Secret at SPARK_TLS_DIR (``tls_dir``) and ``executor_env`` (the Spark user's keys and the TLS file
    paths, :func:`spark_security_env`: the sink reads them on the executors); the executors a worker launches
    inherit both. Returns once every worker registered with the master. Raises
    AssertionError (with the container's log) when one exits or does not register in REGISTER_TIMEOUT_S."""
    instances, cores, memory = executor_settings(spec)
    mounts: dict[str, tuple[str, str]] = {SPARK_TLS_DIR: ("files", str(tls_dir))}
    master_port, master_ui, *ports = free_ports(2 + 2 * instances)
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": DAEMON_MEMORY}
    master_args = ("spark-class", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(master_port), "--webui-port", str(master_ui))  # fmt: skip
    master_env = {**env, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    master = start_container(_role_run(spec, "executor", "spark-master", master_args, {}), master_env)
    cluster = StandaloneCluster(master, f"spark://127.0.0.1:{master_port}")
    try:
        _wait_log(master, "I have been elected leader", REGISTER_TIMEOUT_S)
        for i in range(instances):
            port, ui = ports[2 * i], ports[2 * i + 1]
            args = ("spark-class", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui), "--cores", str(cores), "--memory", memory,
                    "--work-dir", "/tmp/spark-work", cluster.master_url)  # fmt: skip
            run = _role_run(spec, "executor", f"spark-worker-{i}", args, mounts)
            cluster.workers.append(start_container(run, {**env, **executor_env}))
        for worker in cluster.workers:
            _wait_log(worker, "Successfully registered with master", REGISTER_TIMEOUT_S)
    except BaseException:
        cluster.remove()
        raise
    return cluster


def _wait_log(pod: RunningPod, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in pod.logs():
            return
        pod.container.reload()
        if pod.container.status == "exited":
            raise AssertionError(f"{pod.run.pod_name} exited:\n{pod.logs()[-4000:]}")
        time.sleep(0.25)
    raise AssertionError(f"{pod.run.pod_name}: no {text!r} after {timeout_s} s:\n{pod.logs()[-4000:]}")


def executor_logs(worker: RunningPod) -> str:
    """The stderr of every executor ``worker`` launched (``<work dir>/<app id>/<executor id>/stderr``), read inside
    its container (which must be running)."""
    code, out = worker.container.exec(["sh", "-c", "cat /tmp/spark-work/*/*/stderr"])
    assert code == 0, out
    return bytes(out).decode("utf-8", "replace")


RETRIED_TASK: Final = re.compile(r"Running task (\d+)\.([1-9]\d*) in stage")
"""An executor's log line for a task attempt after the first (``task 0.1``: partition 0's second attempt)."""


def is_running(pod: RunningPod) -> bool:
    pod.container.reload()
    return bool(pod.container.status == "running")


# ----------------------------------------------------------------------------------------------- the topic


async def make_flights_topic(topology: Topology) -> None:
    """What an admin does before the Spark user (Pub on Topic:flights only) publishes: create the topic."""
    config = TopicConfig(FLIGHTS_TOPIC, read_queue_nums=4, write_queue_nums=4)
    async with topology.admin() as admin:
        await admin.update_topic(config, cluster_name="DefaultCluster")


async def max_offsets(topology: Topology, topic: str) -> dict[tuple[str, int], int]:
    """(broker name, queue id) -> max offset of every queue of ``topic``."""
    async with topology.admin() as admin:
        return {(s.broker_name, s.queue_id): s.max_offset for s in await admin.topic_status(topic)}


async def open_half_messages(topology: Topology, topic: str) -> int:
    """Half messages of ``topic`` not yet committed or rolled back, summed over the broker groups that answered
    (QueryOpenTransactions' total_open)."""
    async with topology.admin() as admin:
        rows = await admin.open_transactions(topic, max_num=1)
    return sum(r.status.total_open for r in rows if r.status is not None)


async def read_back(
    topology: Topology,
    topic: str,
    expected_rows: int,
    since: dict[tuple[str, int], int] | None = None,
    max_seconds: float = 600.0,
) -> RowIdCheck:
    """Every message of ``topic`` (from ``since``'s offset of each queue, else from 0) in a RowIdCheck; pulls over
    the cluster's TLS, signed by the super user. Raises MQClientError (SYSTEM_ERROR) past ``max_seconds``."""
    check = RowIdCheck(expected_rows)
    deadline = time.monotonic() + max_seconds
    pool = ChannelPool(topology.admin_tls, signing_interceptors(topology.super_user))
    try:
        async with PullConsumer(topology.namesrv_addrs[:1], VERIFY_CONSUMER_GROUP, pool=pool) as consumer:
            queues = await consumer.fetch_subscribe_message_queues(topic)
            if since is None:
                pulls = [pull_queue(consumer, q, check, deadline) for q in queues]
            else:
                pulls = [_pull_from(consumer, q, since.get((q.broker_name, q.queue_id), 0), check, deadline)
                         for q in queues]  # fmt: skip
            await asyncio.gather(*pulls)
    finally:
        await pool.close()
    return check


async def _pull_from(
    consumer: PullConsumer, queue: MessageQueue, start: int, check: RowIdCheck, deadline: float
) -> int:
    """Pull ``queue`` from ``start`` to its max offset into ``check`` (mq_spark.verify.pull_queue from an offset)."""
    offset, read = start, 0
    while True:
        result = await consumer.pull(queue, offset, PULL_BATCH)
        if result.status is PullStatus.FOUND:
            for message in result.messages:
                check.add(queue, message)
            read += len(result.messages)
            offset = result.next_begin_offset
        elif result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
            offset = result.next_begin_offset
        else:
            return read
        if offset >= result.max_offset:
            return read
        if time.monotonic() > deadline:
            raise MQClientError(f"pulling {queue} did not finish in time (at {offset})", ResponseCode.SYSTEM_ERROR)
