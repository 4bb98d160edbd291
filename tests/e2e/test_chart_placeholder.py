"""The Helm chart renders with the real Helm engine, lints strictly, and validates against Kubernetes schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

helm_python = pytest.importorskip("helm_python")

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "pyrocketmq"
pytestmark = pytest.mark.e2e


def _render(values: dict[str, object] | None = None) -> dict[str, str]:
    chart = helm_python.Chart.load(str(CHART))
    rendered: dict[str, str] = chart.render(values=values or {}, name="mq", namespace="messaging", is_install=True)
    return rendered


def test_chart_lints_strictly() -> None:
    report = helm_python.lint(str(CHART), strict=True, kube_version="v1.30.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [], problems
    assert report["errors"] == []


@pytest.mark.parametrize("kube_version", ["1.27.0", "1.31.0"])
def test_rendered_manifests_are_valid_kubernetes(tmp_path: Path, kube_version: str) -> None:
    docs = [d for path, text in _render().items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    assert {d["kind"] for d in docs} >= {"StatefulSet", "Service", "ConfigMap"}
    out = tmp_path / "rendered.yaml"
    out.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", kube_version, str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_namesrv_addresses_are_headless_service_dns_names() -> None:
    notes = _render()["pyrocketmq/templates/NOTES.txt"]
    assert "mq-pyrocketmq-namesrv-0.mq-pyrocketmq-namesrv.messaging.svc.cluster.local:9876" in notes
    assert "mq-pyrocketmq-namesrv-1.mq-pyrocketmq-namesrv.messaging.svc.cluster.local:9876" in notes
