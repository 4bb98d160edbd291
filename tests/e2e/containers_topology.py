"""The chart's replicated topology as host-network containers, and what the container tests ask of it.

:func:`start_topology` runs every pod the chart renders with tests/e2e/values-containers.yaml: 2 name servers, the
etcd StatefulSet (3 members, peer TLS), the controller Deployment (2 pods), 2 broker groups of 2 pods each (controller
mode: broker_id = ordinal + 1 from the chart's own start-up script, the controller elects each group's master) and
1 gateway. Every pod's named container ports get a free loopback port; the cluster DNS names (StatefulSet pods'
stable names, Services) map to them (containers_kit.cluster_addrs) and every env value and arg that names one is
rewritten (containers_kit.localize). HOST_NETWORK_OVERRIDES lists what that changes, and nothing else changes.
Start order as Kubernetes would: name servers, etcd (Parallel), controllers, broker pods ordinal by ordinal
(OrderedReady: pod -1 after pod -0 serves), the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from chart_testkit import NAMESPACE
from containers_kit import (
    PodRun,
    RunningPod,
    chown_tree,
    cluster_addrs,
    free_ports,
    localize,
    pod_runs,
    start_container,
    wait_http,
    wait_serving,
)
from e2e_security import SUPER_USER, Pki
from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cli import BrokerRow, cluster_rows
from mq_common.auth.interceptor import signing_pool
from mq_common.constants import MixAll
from mq_common.controller_client import ControllerClient
from mq_common.protocol.controller import ControllerMetaData, GroupReplicas
from mq_common.tls import TlsClientConfig

VALUES: Final = Path(__file__).with_name("values-containers.yaml")
STORE_UID: Final = 10001
SERVING_TIMEOUT_S: Final = 120.0
PREFIX: Final = {
    "namesrv": "MQ_NAMESRV_",
    "broker": "MQ_BROKER_",
    "gateway": "MQ_GATEWAY_",
    "controller": "MQ_CONTROLLER_",
}
# settings field -> the container port (by name) whose loopback port replaces the chart's number
PORT_FIELDS: Final = {"LISTEN_PORT": "grpc", "METRICS_PORT": "metrics", "HA_LISTEN_PORT": "ha"}

# What host networking forces, and nothing else. In Kubernetes each pod has its own network namespace and
# cluster DNS; here every container shares the host's loopback. (what, value here, why)
HOST_NETWORK_OVERRIDES: tuple[tuple[str, str, str], ...] = (
    ("MQ_<SVC>_LISTEN_HOST", "127.0.0.1", "0.0.0.0 in a pod; on the host network it would be every interface"),
    (
        "MQ_<SVC>_LISTEN_PORT, _METRICS_PORT, MQ_BROKER_HA_LISTEN_PORT; etcd's --listen-*-urls 0.0.0.0:<port>",
        "a free loopback port per pod and container port",
        "pods each own 9876/10911/10912/9878/8081/2379/2380/5557; here they share ports",
    ),
    (
        "every env value and arg naming <pod>.<headless>.<ns>.svc.cluster.local:<port> or <svc>.<ns>...:<port> "
        "(name servers, controller, etcd endpoints, etcd peer and client URLs, the bootstrap Job's name servers)",
        "127.0.0.1:<that pod's port>; a Service: its first pod's",
        "no cluster DNS here; the mapping asserts every name is a pod or Service the suite runs",
    ),
    ("MQ_BROKER_BROKER_IP", "127.0.0.1", "the pod's stable DNS name resolves only inside the cluster"),
    ("SparkApplication --gateway / --namesrv", "127.0.0.1:<gateway port> / 127.0.0.1:<namesrv-0 port>", "DNS"),
    ("Spark driver SPARK_LOCAL_IP", "127.0.0.1", "Spark would bind and reverse-resolve the host's external address"),
)


@dataclass(slots=True)
class Topology:
    """The running pods, where they listen here, and clients for them."""

    namesrvs: list[RunningPod]
    etcds: list[RunningPod]
    controllers: list[RunningPod]
    groups: dict[str, list[RunningPod]]  # broker group -> its pods by ordinal
    gateway: RunningPod
    pki: Pki
    addrs: dict[str, str]  # cluster address (DNS name:port) -> 127.0.0.1:port
    ports: dict[str, dict[str, int]]  # pod name -> container port name -> loopback port
    admin_tls: TlsClientConfig  # the admin certificate (a component at the brokers and the controller)
    pods: list[RunningPod] = field(default_factory=list)  # every container started, removed at teardown

    def local(self, pod: RunningPod, port: str = "grpc") -> str:
        return f"127.0.0.1:{self.ports[pod.run.pod_name][port]}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [self.local(p) for p in self.namesrvs]

    @property
    def controller_addrs(self) -> list[str]:
        return [self.local(p) for p in self.controllers]

    @property
    def gateway_addr(self) -> str:
        return self.local(self.gateway)

    def brokers(self) -> list[RunningPod]:
        return [p for pods in self.groups.values() for p in pods]

    def admin(self, gateway: bool = False) -> MQAdminClient:
        """An admin client over TLS, signing as the init super user (sends through the gateway when ``gateway``)."""
        if gateway:
            return MQAdminClient(
                self.namesrv_addrs, gateway_addr=self.gateway_addr, tls=self.admin_tls, credentials=SUPER_USER
            )
        return MQAdminClient(self.namesrv_addrs[:1], tls=self.admin_tls, credentials=SUPER_USER)

    def pod_at(self, addr: str) -> RunningPod:
        """The broker pod serving gRPC at ``addr`` (127.0.0.1:port)."""
        (pod,) = [p for p in self.brokers() if self.local(p) == addr]
        return pod

    def replaced(self, old: RunningPod, new: RunningPod) -> None:
        """Record that ``new`` (same pod name, same volumes) took ``old``'s place."""
        self.pods.append(new)
        for pods in (self.namesrvs, self.etcds, self.controllers, *self.groups.values()):
            pods[:] = [new if p is old else p for p in pods]
        if self.gateway is old:
            self.gateway = new

    def restart(self, old: RunningPod) -> RunningPod:
        """Start ``old``'s pod again (same name, env, args and volumes, as a kubelet restarts it) and wait until
        it serves gRPC."""
        old.remove()
        new = start_container(old.run, old.env, old.claims, args=old.args)
        self.replaced(old, new)
        wait_serving(new, self.local(new), SERVING_TIMEOUT_S, self.pki.client("admin"))
        return new

    async def cluster_view(self) -> list[BrokerRow]:
        """``mqadmin clusterList``'s rows: each registered broker's id, role, CommitLog max offset and lag."""
        async with self.admin() as admin:
            info = await admin.cluster_list()
            addrs = sorted({a for data in info.broker_addr_table.values() for a in data.broker_addrs.values()})
            return cluster_rows(info, await admin.broker_runtime_infos(addrs))

    async def masters(self) -> dict[str, RunningPod]:
        """group -> the pod the name server lists as its master (broker id 0); groups without one left out."""
        rows = await self.cluster_view()
        return {r.broker_name: self.pod_at(r.addr) for r in rows if r.broker_id == MixAll.MASTER_ID}

    async def sync_state(self) -> dict[str, GroupReplicas]:
        """``mqadmin getSyncStateSet``: group -> master, epochs, in-sync and other replicas (from the controller)."""
        pool = signing_pool(self.admin_tls, SUPER_USER)
        try:
            groups = await ControllerClient(self.controller_addrs, pool).get_sync_state_data(list(self.groups))
        finally:
            await pool.close()
        return {g.broker_name: g for g in groups}

    async def controller_meta(self, controller: RunningPod) -> ControllerMetaData:
        """``mqadmin getControllerMetaData -a <controller>``: its etcd endpoints and the etcd leader."""
        pool = signing_pool(self.admin_tls, SUPER_USER)
        try:
            return await ControllerClient([self.local(controller)], pool).get_controller_meta_data()
        finally:
            await pool.close()


async def wait_master(topology: Topology, group: str, pod: RunningPod, timeout_s: float) -> float:
    """Until the name servers' clusterList names ``pod`` the master (broker id 0) of ``group``; the seconds waited."""
    started = time.monotonic()
    masters: dict[str, RunningPod] = {}
    while time.monotonic() - started < timeout_s:
        masters = await topology.masters()
        if masters.get(group) is pod:
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"{pod.run.pod_name} not master of {group} after {timeout_s} s: {masters}")


async def wait_in_sync(topology: Topology, group: str, timeout_s: float) -> list[BrokerRow]:
    """Until clusterList shows ``group`` as one master (its broker_role the chart's SYNC_MASTER) and slaves that
    report themselves SLAVE at the master's CommitLog max offset (lag 0); the group's rows."""
    started = time.monotonic()
    rows: list[BrokerRow] = []
    while time.monotonic() - started < timeout_s:
        rows = [r for r in await topology.cluster_view() if r.broker_name == group]
        roles = sorted((r.role, r.broker_role) for r in rows)
        slaves = [r for r in rows if r.role == "SLAVE"]
        if roles == [("MASTER", "SYNC_MASTER"), ("SLAVE", "SLAVE")] and all(r.lag_bytes == 0 for r in slaves):
            return rows
        await asyncio.sleep(0.2)
    raise AssertionError(f"{group} not a master with an in-sync slave after {timeout_s} s: {rows}")


async def wait_sync_state_set(topology: Topology, group: str, size: int, timeout_s: float) -> GroupReplicas:
    """Until the controller's SyncStateSet of ``group`` has ``size`` members and a master; the group's replicas."""
    started = time.monotonic()
    while True:
        replicas = (await topology.sync_state()).get(group)
        info = None if replicas is None else replicas.replica_info
        if replicas is not None and info is not None and info.has_master and len(info.sync_state_set) == size:
            return replicas
        assert time.monotonic() - started < timeout_s, f"{group}: no SyncStateSet of {size}: {replicas}"
        await asyncio.sleep(0.2)


async def wait_topic_on(slave: RunningPod, topic: str, timeout_s: float) -> None:
    """Until broker pod ``slave`` persisted ``topic`` (SlaveSynchronize copies its master's topic configs every
    slave_synchronize_interval_ms): a slave elected before that knows a topic created just before only if it holds
    messages of it (adopted from its consume queues), and then without the master's attributes."""
    path = slave.host_path(slave.env["MQ_BROKER_STORE_PATH_ROOT_DIR"]) / "config" / "topics.json"
    started = time.monotonic()
    while not (path.is_file() and topic in path.read_text(encoding="utf-8")):
        assert time.monotonic() - started < timeout_s, f"{slave.run.pod_name} never learned {topic}"
        await asyncio.sleep(0.2)


def commit_log_digest(pod: RunningPod, length: int) -> str:
    """sha256 of the first ``length`` bytes of the pod's CommitLog (its files in offset order, on the host)."""
    directory = pod.host_path(pod.env["MQ_BROKER_STORE_PATH_ROOT_DIR"]) / "commitlog"
    digest, left = hashlib.sha256(), length
    for path in sorted(directory.iterdir()):
        with path.open("rb") as f:
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                digest.update(chunk)
                left -= len(chunk)
    assert left == 0, f"{pod.run.pod_name}: CommitLog shorter than {length} bytes"
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------- start-up


def workloads(docs: list[dict[str, Any]], kind: str, component: str) -> list[str]:
    return sorted(
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == kind and d["metadata"]["labels"].get("app.kubernetes.io/component") == component
    )


def overrides(run: PodRun, component: str, ports: dict[str, int], addrs: dict[str, str]) -> dict[str, str]:
    """The HOST_NETWORK_OVERRIDES env rows for one pod; each replaces a value the chart set."""
    changes: dict[str, str] = {}
    prefix = PREFIX.get(component)
    if prefix is not None:
        changes[f"{prefix}LISTEN_HOST"] = "127.0.0.1"
        changes.update({f"{prefix}{key}": str(ports[port]) for key, port in PORT_FIELDS.items() if port in ports})
    if component == "broker":
        changes["MQ_BROKER_BROKER_IP"] = "127.0.0.1"
    missing = sorted(set(changes) - set(run.env))
    assert not missing, f"{run.pod_name}: the chart does not set {missing}"
    for key, value in run.env.items():
        if key not in changes and localize(value, addrs, f"{run.pod_name} env {key}") != value:
            changes[key] = localize(value, addrs, f"{run.pod_name} env {key}")
    return changes


@dataclass(slots=True)
class _Plan:
    """The rendered pods by component, their loopback ports and the cluster addresses that lead to them."""

    runs: dict[str, list[PodRun]]  # component -> pods, in start order within the component
    ports: dict[str, dict[str, int]]
    addrs: dict[str, str]

    @classmethod
    def of(cls, docs: list[dict[str, Any]], secrets: dict[str, dict[str, str]], files: Path) -> _Plan:
        wanted = {"namesrv": "StatefulSet", "etcd": "StatefulSet", "controller": "Deployment",
                  "broker": "StatefulSet", "gateway": "Deployment"}  # fmt: skip
        by_workload = {
            name: pod_runs(docs, kind, name, NAMESPACE, secrets, files)
            for component, kind in wanted.items()
            for name in workloads(docs, kind, component)
        }
        runs = {c: [r for w in workloads(docs, k, c) for r in by_workload[w]] for c, k in wanted.items()}
        pairs = [(r.pod_name, port) for rs in runs.values() for r in rs for port in r.ports]
        ports: dict[str, dict[str, int]] = {}
        for (pod, port), number in zip(pairs, free_ports(len(pairs)), strict=True):
            ports.setdefault(pod, {})[port] = number
        return cls(runs, ports, cluster_addrs(docs, NAMESPACE, by_workload, ports))

    def start(self, component: str, run: PodRun, tmp: pytest.TempPathFactory) -> RunningPod:
        """Start one pod: env overrides, args with every cluster address localized, a host directory per claim."""
        ports = self.ports[run.pod_name]
        own = {**self.addrs, **{f"0.0.0.0:{num}": f"127.0.0.1:{ports[name]}" for name, num in run.ports.items()}}
        args = tuple(localize(a, own, f"{run.pod_name} arg") for a in run.args)
        claims: dict[str, Path] = {}
        for kind, name in run.mounts.values():
            if kind == "claim":
                claims[name] = tmp.mktemp(f"{run.pod_name}-{name}")
                chown_tree(claims[name], STORE_UID, STORE_UID)
        return start_container(run, overrides(run, component, ports, own), claims, args=args)


def _etcd_healthy(body: bytes) -> bool:
    return bool(json.loads(body).get("health") == "true")


@contextlib.contextmanager
def start_topology(
    docs: list[dict[str, Any]], secrets: dict[str, dict[str, str]], pki: Pki, tmp: pytest.TempPathFactory
) -> Iterator[Topology]:
    """Start every pod (module docstring's order), yield the topology, remove every container at the end."""
    plan = _Plan.of(docs, secrets, tmp.mktemp("projected"))
    assert {c: len(r) for c, r in plan.runs.items()} == {
        "namesrv": 2, "etcd": 3, "controller": 2, "broker": 4, "gateway": 1
    }, plan.runs  # fmt: skip
    probe = pki.client("admin")
    started: list[RunningPod] = []

    def wave(component: str, runs: list[PodRun]) -> list[RunningPod]:
        pods = [plan.start(component, run, tmp) for run in runs]
        started.extend(pods)
        for pod in pods:
            if component == "etcd":
                url = f"http://127.0.0.1:{plan.ports[pod.run.pod_name]['metrics']}/health"
                wait_http(pod, url, SERVING_TIMEOUT_S, _etcd_healthy)
            else:
                wait_serving(pod, f"127.0.0.1:{plan.ports[pod.run.pod_name]['grpc']}", SERVING_TIMEOUT_S, probe)
        return pods

    try:
        namesrvs = wave("namesrv", plan.runs["namesrv"])
        etcds = wave("etcd", plan.runs["etcd"])
        controllers = wave("controller", plan.runs["controller"])
        groups: dict[str, list[RunningPod]] = {}
        for ordinal in range(2):  # OrderedReady: every group's pod -0, then every pod -1
            for pod in wave("broker", [r for r in plan.runs["broker"] if r.pod_name.endswith(f"-{ordinal}")]):
                groups.setdefault(pod.env["MQ_BROKER_BROKER_NAME"], []).append(pod)
        (gateway,) = wave("gateway", plan.runs["gateway"])
        yield Topology(
            namesrvs, etcds, controllers, groups, gateway, pki, plan.addrs, plan.ports,
            pki.client_config("admin"), started,
        )  # fmt: skip
    finally:
        for pod in started:
            pod.remove()
