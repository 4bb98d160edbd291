"""Chart test kit: render with the real Helm engine (helm-python-sdk), run the schema and policy tools.

Rendering is offline (no API server). ``kubernetes-validate`` ships the upstream OpenAPI schemas; checkov runs
through ``uv tool run`` (not a project dependency), once per session over every rendered value set.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
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
# The value sets every check runs over: the defaults and the three files kept with the chart.
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


# What every install must name while TLS and auth are on (the chart's defaults refuse to render without them): the
# tests render with these Secret names unless the values bring their own certificates or turn a feature off.
TLS_SECRETS: dict[str, str] = {
    c: f"{RELEASE}-{c}-tls" for c in ("namesrv", "broker", "gateway", "admin", "controller", "etcd")
}
AUTH_SECRET = f"{RELEASE}-auth"


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


# Secret data the tests resolve secretKeyRef env from (the container round writes its own certificates).
AUTH_SECRET_DATA: dict[str, str] = {
    "initAuthenticationUser": '{"username": "rocketmq", "password": "init-user-secret-1"}',
    "innerClientAuthenticationCredentials": '{"accessKey": "inner", "secretKey": "inner-secret-1"}',
}


def with_install_secrets(values: dict[str, Any] | None) -> dict[str, Any]:
    """``values`` plus TLS_SECRETS / AUTH_SECRET where the values leave TLS or auth on without naming a source."""
    out = copy.deepcopy(values or {})
    tls = out.setdefault("tls", {})
    if tls.get("enabled", True) and not tls.get("certManager", {}).get("enabled") and not tls.get("existingSecrets"):
        tls["existingSecrets"] = dict(TLS_SECRETS)
    auth = out.setdefault("auth", {})
    if auth.get("enabled", True) and "existingSecret" not in auth:
        auth["existingSecret"] = AUTH_SECRET
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
    bare: bool = False,
) -> dict[str, str]:
    """Template path -> rendered text, as ``helm install`` (or ``helm upgrade``) renders it; unless ``bare``, with
    the Secret names of :func:`with_install_secrets`.

    Raises helm_python.HelmError on schema or template failures.
    """
    loaded = helm_python.Chart.load(str(chart))
    rendered: dict[str, str] = loaded.render(
        values=values if bare else with_install_secrets(values),
        name=name,
        namespace=namespace,
        is_install=not is_upgrade,
        is_upgrade=is_upgrade,
    )
    return rendered


def render_docs(values: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Every manifest of a rendering, in template-path order."""
    files = render_files(values, **kwargs)
    return [d for path, text in sorted(files.items()) if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]


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


def run_checkov(rendered: dict[str, Rendered], rendered_dir: Path) -> dict[str, dict[str, Any]]:
    """checkov's JSON report per rendered file (one checkov run; built-in checks, offline)."""
    # The Makefile exports UV (its project-local uv), as does `uv run` itself; uv need not be on PATH.
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv is not None, "uv is needed to run checkov (uv tool run): checkov is not a project dependency"
    files = [r.path for r in rendered.values()]
    cmd = [
        uv,
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
