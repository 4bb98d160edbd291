"""The images run the topology the chart describes: 2 name servers, 2 brokers, 1 gateway, then the Spark job.

Both images are built offline (docker/build-images.sh: debootstrap base, host wheels, ``--network none``). Each
workload's image, command, args, environment (envFrom ConfigMaps + env), mounts and security context come from
the chart rendered by the real Helm engine with tests/e2e/values-containers.yaml; the Spark job's from
deploy/spark/sparkapplication.yaml. Only what host networking forces is overridden (HOST_NETWORK_OVERRIDES).
Then: every flight stored once; SIGTERM one broker -> exit 0, no abort file, unregistered; start it again on the
same volume -> data intact and serving. Timings go to .build/e2e-timings.json.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_testkit import NAMESPACE, SPARK_DIR, render_docs
from containers_kit import (
    PodRun,
    RunningPod,
    build_images,
    chown_tree,
    dangling_project_images,
    free_ports,
    image_exists,
    json_lines,
    pod_runs,
    record_timings,
    remove_leftover_containers,
    start_container,
    start_docker,
    stop_docker,
    wait_serving,
)
from mq_client.admin.admin_client import MQAdminClient
from mq_common.errors import MQError
from mq_common.protocol import TopicConfig
from mq_spark.jobs.publish_flights import FLIGHTS_ROWS, FLIGHTS_TOPIC
from mq_spark.verify import read_back

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1_800)]

VALUES = Path(__file__).with_name("values-containers.yaml")
STORE_UID = 10001
SERVING_TIMEOUT_S = 120.0
SPARK_TIMEOUT_S = 1_200.0
PROBE_TOPIC = "e2e-probe"

# What host networking forces, and nothing else. In Kubernetes each pod has its own network namespace and
# cluster DNS; here every container shares the host's loopback. (what, value here, why)
HOST_NETWORK_OVERRIDES: tuple[tuple[str, str, str], ...] = (
    ("MQ_<SVC>_LISTEN_HOST", "127.0.0.1", "0.0.0.0 in a pod; on the host network it would be every interface"),
    ("MQ_<SVC>_LISTEN_PORT", "a free port per container", "pods each own 9876/10911/8081; here they share ports"),
    ("MQ_<SVC>_METRICS_PORT", "a free port per container", "every pod's 5557 would collide likewise"),
    (
        "MQ_BROKER_NAMESRV_ADDR, MQ_GATEWAY_NAMESRV_ADDR",
        "127.0.0.1:<port of namesrv-i> for the headless DNS name of namesrv-i",
        "no cluster DNS here; the mapping asserts every entry is a name server pod's stable DNS name",
    ),
    ("MQ_BROKER_BROKER_IP", "127.0.0.1", "the pod's stable DNS name resolves only inside the cluster"),
    ("SparkApplication --gateway / --namesrv", "127.0.0.1:<gateway port> / 127.0.0.1:<namesrv-0 port>", "DNS"),
    ("Spark driver SPARK_LOCAL_IP", "127.0.0.1", "Spark would bind and reverse-resolve the host's external address"),
)
_PREFIX = {"namesrv": "MQ_NAMESRV_", "broker": "MQ_BROKER_", "gateway": "MQ_GATEWAY_"}


@dataclass(slots=True)
class Topology:
    namesrvs: list[RunningPod]
    brokers: dict[str, RunningPod]
    gateway: RunningPod
    namesrv_addrs: list[str]
    gateway_addr: str
    pods: list[RunningPod]  # every container started, removed at teardown


def _override(pod: PodRun, service: str, port: int, metrics_port: int, dns_to_local: dict[str, str]) -> dict[str, str]:
    """The HOST_NETWORK_OVERRIDES rows for one pod; each replaces a value the chart set."""
    prefix = _PREFIX[service]
    changes = {f"{prefix}LISTEN_HOST": "127.0.0.1", f"{prefix}LISTEN_PORT": str(port)}
    changes[f"{prefix}METRICS_PORT"] = str(metrics_port)
    if service in ("broker", "gateway"):
        entries = pod.env[f"{prefix}NAMESRV_ADDR"].split(";")
        unknown = [e for e in entries if e not in dns_to_local]
        assert not unknown, f"{pod.pod_name}: name server entries that are no name server pod's DNS name: {unknown}"
        changes[f"{prefix}NAMESRV_ADDR"] = ";".join(dns_to_local[e] for e in entries)
    if service == "broker":
        changes["MQ_BROKER_BROKER_IP"] = "127.0.0.1"
    missing = sorted(set(changes) - set(pod.env))
    assert not missing, f"{pod.pod_name}: the chart does not set {missing}"
    return changes


def _headless_dns(docs: list[dict[str, Any]], statefulset: str, pod: PodRun) -> str:
    sts = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == statefulset)
    return f"{pod.pod_name}.{sts['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local:{pod.grpc_port}"


def _workload(docs: list[dict[str, Any]], kind: str, component: str) -> list[str]:
    return sorted(
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == kind and d["metadata"]["labels"].get("app.kubernetes.io/component") == component
    )


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render_docs(yaml.safe_load(VALUES.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def spark_app() -> dict[str, Any]:
    docs = yaml.safe_load_all((SPARK_DIR / "sparkapplication.yaml").read_text(encoding="utf-8"))
    return next(d for d in docs if d and d["kind"] == "SparkApplication")


@pytest.fixture(scope="module")
def docker_daemon() -> Iterator[None]:
    clock = time.monotonic()
    started = start_docker()
    remove_leftover_containers()
    yield
    remove_leftover_containers()
    record_timings({"containers_suite_s": round(time.monotonic() - clock, 1)})
    if started:
        stop_docker()


@pytest.fixture(scope="module")
def images(docker_daemon: None, rendered: list[dict[str, Any]], spark_app: dict[str, Any]) -> dict[str, str]:
    """Build both images (the tags the manifests name), once cold-or-warm and once more warm; timings kept."""
    services = {c["image"] for d in rendered if d["kind"] in ("StatefulSet", "Deployment")
                for c in d["spec"]["template"]["spec"]["containers"]}  # fmt: skip
    assert len(services) == 1, services
    service_image = services.pop()
    repo, tag = service_image.rsplit(":", 1)
    assert repo == "pyrocketmq"
    assert spark_app["spec"]["image"] == f"pyrocketmq-spark:{tag}"
    first = build_images(tag)
    warm = build_images(tag)
    record_timings({"image_build_first": first, "image_build_warm": warm})
    assert image_exists(service_image)
    assert image_exists(spark_app["spec"]["image"])
    assert dangling_project_images() == [], "a rebuild must not leave untagged stage or superseded images"
    return {"services": service_image, "spark": spark_app["spec"]["image"]}


@pytest.fixture(scope="module")
def topology(
    images: dict[str, str], rendered: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topology]:
    started = time.monotonic()
    (namesrv_sts,) = _workload(rendered, "StatefulSet", "namesrv")
    broker_sts = _workload(rendered, "StatefulSet", "broker")
    (gateway_deploy,) = _workload(rendered, "Deployment", "gateway")
    namesrv_runs = pod_runs(rendered, "StatefulSet", namesrv_sts, NAMESPACE)
    broker_runs = [r for sts in broker_sts for r in pod_runs(rendered, "StatefulSet", sts, NAMESPACE)]
    (gateway_run,) = pod_runs(rendered, "Deployment", gateway_deploy, NAMESPACE)
    assert (len(namesrv_runs), len(broker_runs)) == (2, 2)
    ports = iter(free_ports(2 * (len(namesrv_runs) + len(broker_runs) + 1)))
    pods: list[RunningPod] = []
    try:
        namesrvs, dns_to_local = [], {}
        for run in namesrv_runs:
            port = next(ports)
            pod = start_container(run, _override(run, "namesrv", port, next(ports), {}))
            pods.append(pod)
            namesrvs.append(pod)
            dns_to_local[_headless_dns(rendered, namesrv_sts, run)] = f"127.0.0.1:{port}"
        for pod in namesrvs:
            wait_serving(pod, f"127.0.0.1:{pod.env['MQ_NAMESRV_LISTEN_PORT']}", SERVING_TIMEOUT_S)
        brokers = {}
        for run in broker_runs:
            store = tmp_path_factory.mktemp(run.pod_name)
            chown_tree(store, STORE_UID, STORE_UID)
            claims = {name: store for kind, name in run.mounts.values() if kind == "claim"}
            pod = start_container(run, _override(run, "broker", next(ports), next(ports), dns_to_local), claims)
            pods.append(pod)
            brokers[run.env["MQ_BROKER_BROKER_NAME"]] = pod
        gateway_port = next(ports)
        overrides = _override(gateway_run, "gateway", gateway_port, next(ports), dns_to_local)
        gateway = start_container(gateway_run, overrides)
        pods.append(gateway)
        for pod in brokers.values():
            wait_serving(pod, f"127.0.0.1:{pod.env['MQ_BROKER_LISTEN_PORT']}", SERVING_TIMEOUT_S)
        wait_serving(gateway, f"127.0.0.1:{gateway_port}", SERVING_TIMEOUT_S)
        record_timings({"topology_start_s": round(time.monotonic() - started, 1)})
        yield Topology(
            namesrvs=namesrvs,
            brokers=brokers,
            gateway=gateway,
            namesrv_addrs=list(dns_to_local.values()),
            gateway_addr=f"127.0.0.1:{gateway_port}",
            pods=pods,
        )
    finally:
        for pod in pods:
            pod.remove()


def test_image_entrypoint_tini_forwards_sigterm(images: dict[str, str]) -> None:
    """Without a Kubernetes ``command:`` the image's ENTRYPOINT (tini) is PID 1 and passes SIGTERM on."""
    (port,) = free_ports(1)
    run = PodRun(
        pod_name="tini-namesrv",
        image=images["services"],
        command=(),
        args=("mqnamesrv",),
        env={"MQ_NAMESRV_LISTEN_HOST": "127.0.0.1", "MQ_NAMESRV_LISTEN_PORT": str(port)},
        mounts={"/tmp": ("emptyDir", "64Mi")},
        user="10001:10001",
        read_only_root=True,
        drop_all_capabilities=True,
        no_new_privileges=True,
        grpc_port=port,
        termination_grace_s=30,
    )
    pod = start_container(run, {})
    try:
        wait_serving(pod, f"127.0.0.1:{port}", SERVING_TIMEOUT_S)
        assert pod.inspect()["Config"]["Entrypoint"] == ["tini", "--"]
        pod.signal("SIGTERM")
        code = pod.wait_exit(run.termination_grace_s)
        logs = pod.logs()
    finally:
        pod.remove()
    assert code == 0, logs[-4000:]
    assert [e.get("event") for e in json_lines(logs)][-1] == "stopped"


async def _cluster_brokers(namesrv_addr: str) -> dict[str, list[str]]:
    """broker name -> addresses registered on one name server."""
    async with MQAdminClient([namesrv_addr]) as admin:
        info = await admin.cluster_list()
    return {name: sorted(data.broker_addrs.values()) for name, data in info.broker_addr_table.items()}


async def _wait_registered(topology: Topology, expected: dict[str, list[str]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    seen: list[dict[str, list[str]]] = []
    while time.monotonic() < deadline:
        seen = [await _cluster_brokers(a) for a in topology.namesrv_addrs]
        if all({k: v for k, v in s.items() if v} == expected for s in seen):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"name servers list {seen}, expected {expected}")


def _broker_addr(pod: RunningPod) -> str:
    return f"127.0.0.1:{pod.env['MQ_BROKER_LISTEN_PORT']}"


async def test_topology_runs_as_the_chart_describes(topology: Topology) -> None:
    expected = {name: [_broker_addr(pod)] for name, pod in topology.brokers.items()}
    assert sorted(expected) == ["broker-a", "broker-b"]
    await _wait_registered(topology, expected, 30.0)
    for pod in [*topology.namesrvs, *topology.brokers.values(), topology.gateway]:
        attrs = pod.inspect()
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "host"
        assert not host.get("PortBindings")
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert attrs["Config"]["User"] == "10001:10001"
        # The chart sets args only: the image's ENTRYPOINT (tini, PID 1) runs the service it names.
        assert attrs["Config"]["Entrypoint"] == ["tini", "--"]
        assert attrs["Config"]["Cmd"] == list(pod.run.args)
        started = [e for e in json_lines(pod.logs()) if e.get("event") == "started"]
        assert len(started) == 1, pod.logs()[-2000:]


def test_spark_image_publishes_every_flight_once(topology: Topology, spark_app: dict[str, Any]) -> None:
    spec = spark_app["spec"]
    args = list(spec["arguments"])
    local = {"--gateway": topology.gateway_addr, "--namesrv": topology.namesrv_addrs[0]}
    for flag, value in local.items():  # HOST_NETWORK_OVERRIDES (the SparkApplication row)
        args[args.index(flag) + 1] = value
    driver = spec["driver"]
    sizes = {v["name"]: v["emptyDir"].get("sizeLimit", "") for v in spec.get("volumes", []) if "emptyDir" in v}
    confs = [a for k, v in spec.get("sparkConf", {}).items() for a in ("--conf", f"{k}={v}")]
    security = driver["securityContext"]
    # What the operator starts in the driver pod: the image's entrypoint with `driver`, spark-submit arguments
    # and the application file; the master is local[2] here (executor pods need an API server).
    run = PodRun(
        pod_name="publish-flights-driver",
        image=spec["image"],
        command=(),
        args=("driver", "--master", "local[2]", *confs, spec["mainApplicationFile"], *args),
        env={e["name"]: str(e["value"]) for e in driver.get("env", [])},
        mounts={m["mountPath"]: ("emptyDir", sizes[m["name"]]) for m in driver.get("volumeMounts", [])},
        user=f"{security['runAsUser']}:{security['runAsGroup']}",
        read_only_root=bool(security.get("readOnlyRootFilesystem")),
        drop_all_capabilities="ALL" in security["capabilities"]["drop"],
        no_new_privileges=security.get("allowPrivilegeEscalation") is False,
        grpc_port=0,
        termination_grace_s=30,
    )
    started = time.monotonic()
    pod = start_container(run, {"SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        code = pod.wait_exit(SPARK_TIMEOUT_S)
        seconds = time.monotonic() - started
        logs = pod.logs()
    finally:
        pod.remove()
    assert code == 0, logs[-6000:]
    summary = [e for e in json_lines(logs) if "published" in e][-1]
    assert summary["published"] == summary["rows"] == FLIGHTS_ROWS, summary
    assert summary["failed"] == 0
    check = asyncio.run(read_back(topology.namesrv_addrs[0], FLIGHTS_TOPIC, FLIGHTS_ROWS))
    report = check.report()
    record_timings({"spark_publish_s": round(seconds, 1), "spark_summary": summary, "verify": report})
    assert (check.verified, check.missing, check.duplicates, check.unexpected) == (FLIGHTS_ROWS, 0, 0, 0), report
    assert set(check.per_broker) == {"broker-a", "broker-b"}
    assert check.keys_on_many_queues == 0


async def _topic_offsets(namesrv_addr: str, topic: str, broker: str) -> dict[int, tuple[int, int]]:
    async with MQAdminClient([namesrv_addr]) as admin:
        stats = await admin.topic_status(topic)
    return {s.queue_id: (s.min_offset, s.max_offset) for s in stats if s.broker_name == broker}


async def _send_until(topology: Topology, topic: str, broker: str, limit: int) -> int:
    """Send probe messages through the gateway until one lands on ``broker``; returns how many were sent."""
    deadline = time.monotonic() + 60.0
    async with MQAdminClient(topology.namesrv_addrs, gateway_addr=topology.gateway_addr) as admin:
        for i in range(limit):
            result = await admin.send_message(topic, json.dumps({"probe": i}).encode(), keys=[f"probe-{i}"])
            assert result.send_status == "SEND_OK"
            if result.broker_name == broker:
                return i + 1
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    raise AssertionError(f"no probe landed on {broker} within {limit} sends")


async def test_broker_sigterm_is_clean_and_restart_keeps_its_data(topology: Topology) -> None:
    name = "broker-b"
    pod = topology.brokers[name]
    namesrv = topology.namesrv_addrs[0]
    async with MQAdminClient([namesrv]) as admin:
        await admin.update_topic(TopicConfig(PROBE_TOPIC, 2, 2), cluster_name="DefaultCluster")
    await _wait_registered(topology, {n: [_broker_addr(p)] for n, p in topology.brokers.items()}, 30.0)
    await _send_until(topology, PROBE_TOPIC, name, 40)
    before = await _topic_offsets(namesrv, PROBE_TOPIC, name)
    assert sum(hi for _, hi in before.values()) > 0
    (store,) = pod.claims.values()
    store_root = Path(pod.env["MQ_BROKER_STORE_PATH_ROOT_DIR"].replace("/var/lib/rocketmq", str(store), 1))
    assert (store_root / "abort").exists(), "a running broker keeps its abort file"

    stop_sending = asyncio.Event()
    sender = asyncio.create_task(_send_while(topology, stop_sending))  # sends in flight across the SIGTERM
    await asyncio.sleep(0.5)
    started = time.monotonic()
    pod.signal("SIGTERM")
    code = await asyncio.to_thread(pod.wait_exit, pod.run.termination_grace_s)
    stop_s = time.monotonic() - started
    stop_sending.set()
    acked = await sender
    logs = pod.logs()
    assert code == 0, logs[-4000:]
    assert any(e.get("event") == "broker_stopped" for e in json_lines(logs)), logs[-4000:]
    assert not (store_root / "abort").exists(), "clean shutdown removes the abort file"
    assert (store_root / "checkpoint").exists()
    others = {n: [_broker_addr(p)] for n, p in topology.brokers.items() if n != name}
    await _wait_registered(topology, others, 5.0)  # unregistered at once, not expired after 120 s
    async with MQAdminClient([namesrv]) as admin:
        route = await admin.topic_route(PROBE_TOPIC)
    assert {b.broker_name for b in route.broker_datas} == set(others)

    started = time.monotonic()
    pod.remove()
    again = start_container(pod.run, pod.env, pod.claims)
    topology.brokers[name] = again
    topology.pods.append(again)
    wait_serving(again, _broker_addr(again), SERVING_TIMEOUT_S)
    restart_s = time.monotonic() - started
    (line,) = [e for e in json_lines(again.logs()) if e.get("event") == "started"]
    assert line["last_exit_ok"] is True
    await _wait_registered(topology, {n: [_broker_addr(p)] for n, p in topology.brokers.items()}, 30.0)
    restored = await _topic_offsets(namesrv, PROBE_TOPIC, name)
    assert restored.keys() == before.keys()
    assert all(restored[q][1] >= before[q][1] for q in before), (before, restored)
    lost = [(b, q, o) for b, q, o in acked if b == name and o >= restored[q][1]]
    assert not lost, f"acknowledged sends missing after the restart: {lost[:10]}"
    if await _has_topic(namesrv):  # the Spark test ran: every flight is still there, once
        check = await read_back(namesrv, FLIGHTS_TOPIC, FLIGHTS_ROWS)
        assert (check.verified, check.missing, check.duplicates) == (FLIGHTS_ROWS, 0, 0), check.report()
    sent = await _send_until(topology, PROBE_TOPIC, name, 40)
    after = await _topic_offsets(namesrv, PROBE_TOPIC, name)
    assert sum(hi for _, hi in after.values()) > sum(hi for _, hi in before.values())
    record_timings(
        {
            "broker_sigterm_stop_s": round(stop_s, 2),
            "broker_restart_s": round(restart_s, 1),
            "sends_acked_across_sigterm": len(acked),
            "of_them_on_the_stopped_broker": sum(1 for b, _, _ in acked if b == name),
        }
    )
    assert sent >= 1
    assert len(acked) > 0


async def _send_while(topology: Topology, stop: asyncio.Event, limit: int = 3_000) -> list[tuple[str, int, int]]:
    """Probe sends through the gateway until ``stop`` (at most ``limit``); returns the acknowledged ones as
    (broker name, queue id, queue offset). Failed sends (the broker going away) are allowed, not counted."""
    acked: list[tuple[str, int, int]] = []
    async with MQAdminClient(topology.namesrv_addrs, gateway_addr=topology.gateway_addr) as admin:
        for i in range(limit):
            if stop.is_set():
                break
            try:
                result = await admin.send_message(PROBE_TOPIC, json.dumps({"inflight": i}).encode())
            except MQError:
                await asyncio.sleep(0.05)
                continue
            if result.send_status == "SEND_OK":
                acked.append((result.broker_name, result.queue_id, result.queue_offset))
    return acked


async def test_gateway_sigterm_drains_and_exits_cleanly(topology: Topology) -> None:
    gateway = topology.gateway
    async with MQAdminClient(topology.namesrv_addrs, gateway_addr=topology.gateway_addr) as admin:
        await admin.update_topic(TopicConfig(PROBE_TOPIC, 2, 2), cluster_name="DefaultCluster")
        result = await admin.send_message(PROBE_TOPIC, b'{"before": "sigterm"}')
    assert result.send_status == "SEND_OK"
    gateway.signal("SIGTERM")
    code = gateway.wait_exit(gateway.run.termination_grace_s)
    logs = gateway.logs()
    assert code == 0, logs[-4000:]
    events = [e.get("event") for e in json_lines(logs)]
    assert "gateway_stopped" in events
    assert events[-1] == "stopped"


async def _has_topic(namesrv: str) -> bool:
    async with MQAdminClient([namesrv]) as admin:
        return FLIGHTS_TOPIC in await admin.topic_list()
