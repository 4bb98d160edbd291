"""Helpers of the observability tests: the metric list kept in the repo and a checker of /metrics text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from prometheus_client.parser import text_string_to_metric_families

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parents[1]
METRIC_LIST: Final = HERE / "metric_names.yaml"
DASHBOARD_DIR: Final = REPO / "deploy/helm/pyrocketmq/files/dashboards"
RULES_DIR: Final = REPO / "deploy/helm/pyrocketmq/files/rules"
RULES_FILE: Final = RULES_DIR / "pyrocketmq.rules.yaml"
RULES_TEST_FILE: Final = RULES_DIR / "tests/pyrocketmq.rules.test.yaml"
_EXTRA_LABELS: Final = {"histogram": {"le"}, "counter": set(), "gauge": set()}


@dataclass(frozen=True, slots=True)
class Expected:
    name: str
    type: str
    labels: frozenset[str]


def metric_list() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(METRIC_LIST.read_text(encoding="utf-8"))
    return loaded


def expected_for(service: str) -> dict[str, Expected]:
    """name -> Expected (own labels plus the node labels) of ``service`` (namesrv, broker, gateway)."""
    data = metric_list()
    node = set(data["node_labels"])
    return {
        name: Expected(name, spec["type"], frozenset(node | set(spec["labels"])))
        for name, spec in data["services"][service]["metrics"].items()
    }


def node_type_of(service: str) -> str:
    return str(metric_list()["services"][service]["node_type"])


def check_exposition(text: str, service: str, *, require_all: bool) -> list[str]:
    """Problems of ``text`` (a /metrics answer) against the list: unknown families, wrong types, label sets
    that differ, series without the node labels / with another node_type; with ``require_all``, families
    of the list that have no sample."""
    expected = expected_for(service)
    node_type = node_type_of(service)
    problems: list[str] = []
    seen: set[str] = set()
    for family in text_string_to_metric_families(text):
        want = expected.get(family.name)
        if want is None:
            problems.append(f"{family.name}: not in metric_names.yaml for {service}")
            continue
        if family.type != want.type:
            problems.append(f"{family.name}: type {family.type}, listed as {want.type}")
        for sample in family.samples:
            seen.add(family.name)
            names = set(sample.labels) - _EXTRA_LABELS[want.type]
            if names != want.labels:
                problems.append(f"{sample.name}: labels {sorted(names)}, listed {sorted(want.labels)}")
            if sample.labels.get("node_type") != node_type:
                problems.append(f"{sample.name}: node_type {sample.labels.get('node_type')!r}, want {node_type!r}")
    if require_all:
        problems.extend(f"{name}: listed but not exported" for name in sorted(set(expected) - seen))
    return problems


def exported_families(text: str) -> set[str]:
    """Families of a /metrics answer that have at least one sample."""
    return {family.name for family in text_string_to_metric_families(text) if family.samples}


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) of every target of every panel of every dashboard."""
    import json

    out: list[tuple[str, str, str]] = []
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((path.name, panel["title"], target["expr"]))
    return out


def concrete(expr: str) -> str:
    """A dashboard expression with Grafana's variables filled in as a Prometheus query needs them."""
    return expr.replace("$__rate_interval", "1m").replace('"$cluster"', '".*"')


def alert_expressions() -> list[tuple[str, str]]:
    """(alert name, expr) of every rule of the rules file."""
    data = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return [(rule["alert"], rule["expr"]) for group in data["groups"] for rule in group["rules"]]
