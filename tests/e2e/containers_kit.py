"""Container e2e kit: the Docker daemon, the offline image build, and pods of the rendered chart run as containers.

A :class:`PodRun` is what Kubernetes would start for one pod of a rendered workload: the image, ``command``
(replaces the image's entrypoint, as in Kubernetes) and ``args``, the environment resolved the Kubernetes way
(``envFrom`` ConfigMaps first, then ``env`` entries with ``$(VAR)`` expansion, downward-API pod names and
``secretKeyRef`` values from the test's Secret objects; ``command`` and ``args`` with ``$(VAR)`` expanded from that
environment, as the kubelet does), the named container ports, the volume mounts (Secret and ConfigMap volumes are
written into a directory the container mounts read-only, as the kubelet projects them) and the security
context. :func:`start_container` runs one with testcontainers on the host network (the only network allowed
here; no ports published), applying the caller's overrides on top. :func:`localize` rewrites the cluster DNS
names and wildcard listen addresses in a value to the loopback ports the suite gave each pod.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# testcontainers reads its configuration at import time: no Ryuk reaper (it would need a bridge network).
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from testcontainers.core.container import DockerContainer

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "docker"
DOCKERD_STATE = ROOT / ".build" / "dockerd"
TIMINGS_FILE = ROOT / ".build" / "e2e-timings.json"
BUILD_TIMEOUT_S = 1_500
CONTAINER_LABEL = "pyrocketmq.e2e"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# host:port of a cluster DNS name (pod or Service) or of the wildcard address a pod listens on
_CLUSTER_ADDR = re.compile(r"(?<![A-Za-z0-9.-])((?:[a-z0-9-]+\.)+svc\.cluster\.local|0\.0\.0\.0):(\d+)")
CLUSTER_DOMAIN = "svc.cluster.local"


# ---------------------------------------------------------------------------------------------------- daemon


def docker_answers() -> bool:
    """True when a docker CLI exists and its daemon answers."""
    try:
        proc = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60)
    except FileNotFoundError:  # no CLI yet: dockerd.sh installs docker.io
        return False
    return proc.returncode == 0


def start_docker() -> bool:
    """Make a daemon answer (installing docker.io if needed); True when this call started it."""
    if docker_answers():
        return False
    subprocess.run(["bash", str(DOCKER_DIR / "dockerd.sh"), "start", str(DOCKERD_STATE)], check=True, timeout=600)
    return True


def stop_docker() -> None:
    """Stop the daemon :func:`start_docker` started (its pid file), nothing else."""
    subprocess.run(["bash", str(DOCKER_DIR / "dockerd.sh"), "stop", str(DOCKERD_STATE)], check=True, timeout=120)


def build_images(tag: str) -> dict[str, float]:
    """``docker/build-images.sh TAG``; returns its per-step seconds plus ``total``."""
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(DOCKER_DIR / "build-images.sh"), tag],
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT_S,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"image build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    steps: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**steps, "total": round(time.monotonic() - started, 1)}


def image_exists(image: str) -> bool:
    proc = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


def dangling_project_images() -> list[str]:
    """IDs of untagged images carrying the project's label (io.pyrocketmq.image): what a build left behind."""
    proc = subprocess.run(
        ["docker", "image", "ls", "--quiet", "--filter", "dangling=true", "--filter", "label=io.pyrocketmq.image"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout.split()


def record_timings(timings: Mapping[str, Any]) -> None:
    """Merge ``timings`` into .build/e2e-timings.json (the Makefile prints it after the run)."""
    TIMINGS_FILE.parent.mkdir(parents=True, exist_ok=True)
    current: dict[str, Any] = {}
    if TIMINGS_FILE.exists():
        current = json.loads(TIMINGS_FILE.read_text(encoding="utf-8"))
    current.update(timings)
    TIMINGS_FILE.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------------------- pods from the chart


@dataclass(frozen=True, slots=True)
class PodRun:
    """One pod's container as the rendered manifest describes it (first container of the pod template)."""

    pod_name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    # mountPath -> ("emptyDir", sizeLimit), ("claim", claim template name) or ("files", host directory: a projected
    # Secret or ConfigMap volume, mounted read-only)
    mounts: Mapping[str, tuple[str, str]]
    user: str
    read_only_root: bool
    drop_all_capabilities: bool
    no_new_privileges: bool
    grpc_port: int
    termination_grace_s: int
    ports: Mapping[str, int] = field(default_factory=dict)  # container port name -> number (``grpc``, ``ha``, ...)


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def resolve_env(
    container: Mapping[str, Any],
    configmaps: Mapping[str, Mapping[str, Any]],
    pod_name: str,
    namespace: str,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom, then env (later wins, ``$(VAR)`` expanded
    from what is defined so far). Supports configMapRef/configMapKeyRef, secretKeyRef (``secrets``: Secret name ->
    key -> value; a missing Secret or key fails, as the pod would not start) and fieldRef metadata.name/namespace."""
    secrets = secrets or {}
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source["configMapRef"]["name"]
        prefix = source.get("prefix", "")
        env.update({prefix + k: str(v) for k, v in configmaps[ref]["data"].items()})
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = expand(str(entry["value"]), env)
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            env[entry["name"]] = fields[source["fieldRef"]["fieldPath"]]
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[entry["name"]] = str(configmaps[ref["name"]]["data"][ref["key"]])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            assert ref["key"] in secrets.get(ref["name"], {}), (
                f"env {entry['name']}: no Secret {ref['name']}/{ref['key']}"
            )
            env[entry["name"]] = secrets[ref["name"]][ref["key"]]
        else:
            raise AssertionError(f"env {entry['name']}: unsupported valueFrom {source}")
    return env


def expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion of an env value, command or arg: a defined VAR is replaced, an undefined
    reference stays as written, ``$$`` stands for one ``$`` (shell syntax such as ``${X}`` or ``$((...))`` is left
    alone)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF.sub(one, value)


def localize(value: str, addrs: Mapping[str, str], what: str) -> str:
    """``value`` with every ``<name>.svc.cluster.local:<port>`` and ``0.0.0.0:<port>`` replaced by ``addrs``
    (``host:port`` -> ``127.0.0.1:<local port>``); an address ``addrs`` lacks fails (``what`` names the value)."""

    def one(m: re.Match[str]) -> str:
        key = f"{m.group(1)}:{m.group(2)}"
        assert key in addrs, f"{what}: {key} is no address of a pod or Service the suite runs"
        return addrs[key]

    out = _CLUSTER_ADDR.sub(one, value)
    assert CLUSTER_DOMAIN not in out, f"{what}: a cluster DNS name without a port is left: {out}"
    return out


def project_volume(
    volume: Mapping[str, Any],
    configmaps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, str]],
    directory: Path,
    fs_group: int,
) -> Path:
    """Write a Secret or ConfigMap volume's files into ``directory`` as the kubelet projects them: every key (or
    the ``items`` listed, at their ``path``), mode ``defaultMode`` (0644 unless given), group ``fs_group``."""
    if "secret" in volume:
        source, data = volume["secret"], secrets.get(volume["secret"]["secretName"])
        assert data is not None, f"volume {volume['name']}: no Secret {source['secretName']}"
    else:
        source, data = volume["configMap"], configmaps[volume["configMap"]["name"]]["data"]
    items = source.get("items") or [{"key": k, "path": k} for k in data]
    directory.mkdir(parents=True, exist_ok=True)
    os.chown(directory, 0, fs_group)
    directory.chmod(0o755)
    for item in items:
        target = directory / item["path"]
        target.write_text(str(data[item["key"]]), encoding="utf-8")
        os.chown(target, 0, fs_group)
        target.chmod(int(source.get("defaultMode", 0o644)))
    return directory


def pod_runs(
    docs: list[dict[str, Any]],
    kind: str,
    name: str,
    namespace: str,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
    files_dir: Path | None = None,
) -> list[PodRun]:
    """Every pod of the workload ``kind``/``name``: StatefulSet pods ``<name>-<ordinal>``, Deployment pods
    ``<name>-<i>`` (the suite's stand-in for the ReplicaSet's random suffix), a Job's one pod ``<name>-0``.
    ``secrets`` (name -> key -> value) stand in for the cluster's Secrets; Secret and ConfigMap volumes are
    written under ``files_dir`` (one directory per pod and volume)."""
    workload = _by_kind(docs, kind)[name]
    configmaps = _by_kind(docs, "ConfigMap")
    secrets = secrets or {}
    pod = workload["spec"]["template"]["spec"]
    container = pod["containers"][0]
    security = {**(pod.get("securityContext") or {}), **(container.get("securityContext") or {})}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    claims = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates") or []}
    ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
    runs = []
    for i in range(int(workload["spec"].get("replicas", 1))):
        pod_name = f"{name}-{i}"
        env = resolve_env(container, configmaps, pod_name, namespace, secrets)
        mounts: dict[str, tuple[str, str]] = {}
        for mount in container.get("volumeMounts") or []:
            vol = volumes.get(mount["name"])
            if vol is not None and "emptyDir" in vol:
                mounts[mount["mountPath"]] = ("emptyDir", str(vol["emptyDir"].get("sizeLimit", "")))
            elif vol is not None and ("secret" in vol or "configMap" in vol):
                assert mount.get("readOnly", "secret" in vol) or "configMap" in vol, f"{name}: {mount} not read-only"
                assert files_dir is not None, f"{name}: volume {mount['name']} needs files_dir"
                target = files_dir / pod_name / mount["name"]
                fs_group = int(security.get("fsGroup", 0))
                mounts[mount["mountPath"]] = ("files", str(project_volume(vol, configmaps, secrets, target, fs_group)))
            else:
                assert mount["name"] in claims, (
                    f"{name}: volume {mount['name']} is no emptyDir, Secret, ConfigMap or claim"
                )
                mounts[mount["mountPath"]] = ("claim", mount["name"])
        runs.append(
            PodRun(
                pod_name=pod_name,
                image=container["image"],
                command=tuple(expand(c, env) for c in container.get("command") or ()),
                args=tuple(expand(a, env) for a in container.get("args") or ()),
                env=env,
                mounts=mounts,
                user=f"{security['runAsUser']}:{security.get('runAsGroup', security['runAsUser'])}",
                read_only_root=bool(security.get("readOnlyRootFilesystem")),
                drop_all_capabilities="ALL" in (security.get("capabilities") or {}).get("drop", []),
                no_new_privileges=security.get("allowPrivilegeEscalation") is False,
                grpc_port=int(ports.get("grpc", 0)),
                termination_grace_s=int(pod.get("terminationGracePeriodSeconds", 30)),
                ports=ports,
            )
        )
    return runs


def stable_dns_name(docs: list[dict[str, Any]], statefulset: str, pod_name: str, namespace: str) -> str:
    """A StatefulSet pod's stable DNS name: ``<pod>.<serviceName>.<namespace>.svc.cluster.local``."""
    service = _by_kind(docs, "StatefulSet")[statefulset]["spec"]["serviceName"]
    return f"{pod_name}.{service}.{namespace}.{CLUSTER_DOMAIN}"


def cluster_addrs(
    docs: list[dict[str, Any]],
    namespace: str,
    pods: Mapping[str, list[PodRun]],
    local_ports: Mapping[str, Mapping[str, int]],
) -> dict[str, str]:
    """What cluster DNS and Services resolve to on this host: ``<name>:<port>`` -> ``127.0.0.1:<local port>``.

    ``pods``: workload name -> the pods run of it; ``local_ports``: pod name -> container port name -> the loopback
    port it listens on here. Covers every StatefulSet pod's stable DNS name with each of its container ports, and
    every Service ``<svc>.<namespace>.svc.cluster.local:<port>`` selecting a run workload: its first pod's target
    port (kube-proxy picks one pod per connection; here always the first)."""
    out: dict[str, str] = {}
    templates: dict[str, dict[str, str]] = {}
    for kind in ("StatefulSet", "Deployment"):
        for name, workload in _by_kind(docs, kind).items():
            if name not in pods:
                continue
            templates[name] = workload["spec"]["template"]["metadata"]["labels"]
            for run in pods[name] if kind == "StatefulSet" else ():
                dns = stable_dns_name(docs, name, run.pod_name, namespace)
                out.update({f"{dns}:{num}": f"127.0.0.1:{local_ports[run.pod_name][port]}"
                            for port, num in run.ports.items()})  # fmt: skip
    for name, service in _by_kind(docs, "Service").items():
        selector = service["spec"].get("selector") or {}
        chosen = [w for w, labels in templates.items() if selector and selector.items() <= labels.items()]
        if not chosen:
            continue
        first = pods[chosen[0]][0]
        by_number = {num: port for port, num in first.ports.items()}
        for entry in service["spec"].get("ports") or []:
            target = entry.get("targetPort", entry["port"])
            port = target if isinstance(target, str) else by_number.get(int(target), "")
            if port in local_ports[first.pod_name]:
                local = local_ports[first.pod_name][port]
                out[f"{name}.{namespace}.{CLUSTER_DOMAIN}:{entry['port']}"] = f"127.0.0.1:{local}"
    return out


# ------------------------------------------------------------------------------------------------ containers


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass(slots=True)
class RunningPod:
    """A started container and what it was started from."""

    run: PodRun
    container: DockerContainer
    env: dict[str, str]
    claims: dict[str, Path] = field(default_factory=dict)
    args: tuple[str, ...] = ()  # the args it was started with (run.args unless replaced)
    removed: bool = False

    def host_path(self, container_path: str) -> Path:
        """The host path behind ``container_path`` inside one of the pod's claims (bind-mounted directories)."""
        for mount, (kind, name) in self.run.mounts.items():
            if kind == "claim" and (container_path == mount or container_path.startswith(mount.rstrip("/") + "/")):
                return self.claims[name] / container_path[len(mount) :].lstrip("/")
        raise AssertionError(f"{self.run.pod_name}: {container_path} is on no claim")

    def logs(self) -> str:
        out, err = self.container.get_logs()
        return (out + err).decode("utf-8", "replace")

    def signal(self, sig: str) -> None:
        self.container.get_wrapped_container().kill(signal=sig)

    def wait_exit(self, timeout_s: float) -> int:
        result = self.container.get_wrapped_container().wait(timeout=timeout_s)
        return int(result["StatusCode"])

    def inspect(self) -> dict[str, Any]:
        client = self.container.get_docker_client().client
        attrs: dict[str, Any] = client.api.inspect_container(self.container.get_container_id())
        return attrs

    def remove(self) -> None:
        """Force-remove the container (idempotent)."""
        if not self.removed:
            self.removed = True
            self.container.stop(force=True, delete_volume=True)


def start_container(
    run: PodRun,
    overrides: Mapping[str, str],
    claims: Mapping[str, Path] | None = None,
    *,
    command: tuple[str, ...] | None = None,
    args: tuple[str, ...] | None = None,
) -> RunningPod:
    """Start ``run`` on the host network with ``overrides`` applied to its environment.

    ``claims``: claim template name -> host directory bind-mounted read-write (owned by the pod's uid).
    ``command`` replaces command+args (the Spark job: the operator's spark-submit becomes ``python <file>``);
    ``args`` replaces the args only (etcd's listen and peer URLs rewritten to loopback ports).
    """
    claims = dict(claims or {})
    args = run.args if args is None else args
    env = {**run.env, **overrides}
    container = DockerContainer(run.image)
    for key, value in env.items():
        container.with_env(key, value)
    for path, (kind, detail) in run.mounts.items():
        if kind == "emptyDir":
            container.with_tmpfs_mount(path, size=_tmpfs_size(detail))
        elif kind == "files":
            container.with_volume_mapping(detail, path, "ro")
        else:
            container.with_volume_mapping(str(claims[detail]), path, "rw")
    kwargs: dict[str, Any] = {
        "network_mode": "host",
        "user": run.user,
        "read_only": run.read_only_root,
        "labels": {CONTAINER_LABEL: run.pod_name},
    }
    if command is not None:
        kwargs["entrypoint"] = list(command[:1])
        container.with_command(list(command[1:]))
    else:
        if run.command:
            kwargs["entrypoint"] = list(run.command)  # Kubernetes: command replaces ENTRYPOINT
        container.with_command(list(args))  # ... and args replace CMD (empty: none)
    if run.drop_all_capabilities:
        kwargs["cap_drop"] = ["ALL"]
    if run.no_new_privileges:
        kwargs["security_opt"] = ["no-new-privileges"]
    container.with_kwargs(**kwargs)
    container.start()
    return RunningPod(run, container, env, dict(claims), args)


def _tmpfs_size(size_limit: str) -> str:
    """tmpfs options for an emptyDir: its sizeLimit (``256Mi`` -> ``size=256m``) and ``exec`` (an emptyDir is
    a plain directory; Docker's tmpfs default ``noexec`` breaks native libraries unpacked to /tmp, e.g. snappy)."""
    m = re.fullmatch(r"(\d+)([KMG])i?", size_limit)
    return f"size={m.group(1)}{m.group(2).lower()},exec" if m else "exec"


@dataclass(frozen=True, slots=True)
class ClientTls:
    """PEM bytes a test client presents: the CA that verifies servers, and a client certificate pair."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def channel(self, addr: str) -> grpc.Channel:
        creds = grpc.ssl_channel_credentials(self.ca_pem, self.key_pem, self.cert_pem)
        return grpc.secure_channel(addr, creds)


def wait_serving(pod: RunningPod, addr: str, timeout_s: float, tls: ClientTls | None = None) -> float:
    """Poll grpc.health.v1 Check at ``addr`` (what the chart's native gRPC probes call in plaintext; over ``tls``
    with a client certificate when the ports serve TLS) until SERVING; returns the seconds waited. Fails with the
    container's log when it exits or the time runs out."""
    started = time.monotonic()
    deadline = started + timeout_s
    with tls.channel(addr) if tls is not None else grpc.insecure_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return time.monotonic() - started
            except grpc.RpcError:
                pass
            pod.container.reload()
            if pod.container.status == "exited":
                raise AssertionError(f"{pod.run.pod_name} exited before serving:\n{pod.logs()[-4000:]}")
            time.sleep(0.2)
    raise AssertionError(f"{pod.run.pod_name} not serving on {addr} after {timeout_s} s:\n{pod.logs()[-4000:]}")


def wait_http(pod: RunningPod, url: str, timeout_s: float, accept: Callable[[bytes], bool]) -> float:
    """Poll an HTTP GET of ``url`` (a plaintext probe port on loopback) until ``accept`` takes the answer's body;
    returns the seconds waited. Fails with the container's log when it exits or the time runs out."""
    started = time.monotonic()
    deadline = started + timeout_s
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    while time.monotonic() < deadline:
        try:
            with direct.open(url, timeout=2) as answer:
                if accept(answer.read()):
                    return time.monotonic() - started
        except OSError:
            pass
        pod.container.reload()
        if pod.container.status == "exited":
            raise AssertionError(f"{pod.run.pod_name} exited before {url} answered:\n{pod.logs()[-4000:]}")
        time.sleep(0.2)
    raise AssertionError(f"{pod.run.pod_name}: {url} not ready after {timeout_s} s:\n{pod.logs()[-4000:]}")


def remove_leftover_containers() -> None:
    """Remove containers a previous, interrupted run of this suite left (by label)."""
    proc = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={CONTAINER_LABEL}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    ids = proc.stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False, timeout=120)


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def chown_tree(path: Path, uid: int, gid: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, uid, gid)
    path.chmod(0o750)
