"""Values: schema generated from the settings classes, every value documented, clear validation failures,
checksum roll-outs, NOTES with real mqadmin commands, monitoring objects from the chart's files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import chart_schema
import helm_python
import pytest
import yaml
from chart_testkit import CHART, render_docs, render_files

pytestmark = pytest.mark.e2e

ACL = {"subject": "User:u", "resources": ["Topic:t"], "actions": ["Pub"], "decision": "Allow"}


def test_schema_is_generated_from_the_settings_classes() -> None:
    committed = (CHART / "values.schema.json").read_text(encoding="utf-8")
    assert committed == chart_schema.schema_text(), "run: uv run --frozen python tests/e2e/chart_schema.py"
    schema = json.loads(committed)
    for component, cls in chart_schema.SETTINGS.items():
        config = schema["properties"][component]["properties"]["config"]
        assert set(config["properties"]) == set(cls.model_fields)
        assert config["additionalProperties"] is False


def _leaves(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    return [prefix]


def test_every_value_is_documented() -> None:
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    params = set(re.findall(r"^## @param (\S+) \S", text, flags=re.M))
    values = yaml.safe_load(text)
    undocumented = [p for p in _leaves(values) if not any(p == d or p.startswith(d + ".") for d in params)]
    assert undocumented == []
    stale = [p for p in params if not any(leaf == p or leaf.startswith(p + ".") for leaf in _leaves(values))]
    assert stale == []
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    assert [p for p in params if f"`{p}`" not in readme] == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"broker": {"groups": []}}, "broker.groups is empty"),
        ({"broker": {"groups": [{"name": "broker-a"}, {"name": "broker-a"}]}}, 'the name "broker-a" appears twice'),
        (
            {"broker": {"config": {"flush_disk_type": "SYNC_FLUSH", "sync_flush_timeout_ms": 0}}},
            "SYNC_FLUSH needs sync_flush_timeout_ms >= 1",
        ),
        ({"gateway": {"config": {"namesrv_addr": "127.0.0.1:1"}}}, "gateway.config.namesrv_addr is set by the chart"),
        ({"broker": {"groups": [{"name": "Broker_A"}]}}, "must be a DNS label"),
        ({"gateway": {"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}}, "minReplicas (5) is larger"),
        ({"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}, "scraped twice"),
        ({"etcd": {"replicas": 4}}, "etcd.replicas must be odd (got 4)"),
        ({"broker": {"config": {"broker_role": "SLAVE"}}}, "broker.config.broker_role is set by the chart"),
        ({"controller": {"config": {"etcd_endpoints": "127.0.0.1:1"}}}, "controller.config.etcd_endpoints is set"),
        ({"broker": {"haPort": 10911}}, "broker.haPort 10911 is the broker's gRPC port"),
        # TLS: one source of certificates, whole
        ({"tls": {"certManager": {"enabled": True}}}, "tls.certManager.enabled needs tls.certManager.issuerRef.name"),
        (
            {"tls": {"certManager": {"enabled": True, "issuerRef": {"name": "c"}}, "existingSecrets": {"broker": "b"}}},
            "tls.certManager.enabled and tls.existingSecrets are both set",
        ),
        (
            {"tls": {"existingSecrets": {"namesrv": "n", "gateway": "g"}}},
            "names some certificates but not tls.existingSecrets.broker, tls.existingSecrets.controller",
        ),
        (
            {
                "tls": {"existingSecrets": {c: c for c in ("namesrv", "broker", "gateway", "controller", "etcd")}},
                "auth": {"users": [{"username": "u", "passwordSecret": {"name": "s", "key": "k"}}]},
            },
            "name its client certificate's Secret in tls.existingSecrets.admin",
        ),
        ({"tls": {"generated": {"renewBeforeDays": 365}}}, "renewBeforeDays (365) must be smaller than"),
        (
            {"auth": {"enabled": False, "acls": [ACL]}},
            "auth.enabled is false",
        ),
    ],
)
def test_validation_template_fails_with_a_clear_message(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(message)):
        render_files(values)


@pytest.mark.parametrize(
    "values",
    [
        {"broker": {"config": {"flush_disk_typo": "SYNC_FLUSH"}}},
        {"broker": {"config": {"flush_disk_type": "SOMETIMES"}}},
        {"gateway": {"config": {"retry_times_when_send_failed": 99}}},
        {"namesrv": {"replicas": 0}},
    ],
)
def test_schema_rejects_unknown_or_out_of_range_settings(values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        render_files(values)


def _checksums(values: dict[str, Any]) -> dict[str, str]:
    return {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        for d in render_docs(values)
        if d["kind"] in ("StatefulSet", "Deployment")
    }


def test_a_config_change_rolls_exactly_the_pods_it_concerns() -> None:
    groups = {"groups": [{"name": "broker-a"}, {"name": "broker-b"}]}
    base = _checksums({"broker": groups})
    changed = _checksums(
        {"broker": {**groups, "groups": [{"name": "broker-a"}, {"name": "broker-b", "config": {"delete_when": "03"}}]}}
    )
    assert [n for n in base if base[n] != changed[n]] == ["mq-broker-broker-b"]
    gateway = _checksums({"broker": groups, "gateway": {"config": {"send_msg_timeout_ms": 4000}}})
    assert [n for n in base if base[n] != gateway[n]] == ["mq-gateway"]


def test_group_settings_override_the_shared_ones() -> None:
    values = {
        "broker": {
            "config": {"flush_disk_type": "ASYNC_FLUSH"},
            "groups": [{"name": "a"}, {"name": "b", "config": {"flush_disk_type": "SYNC_FLUSH"}}],
        }
    }
    maps = {d["metadata"]["name"]: d["data"] for d in render_docs(values) if d["kind"] == "ConfigMap"}
    assert maps["mq-broker-a"]["MQ_BROKER_FLUSH_DISK_TYPE"] == "ASYNC_FLUSH"
    assert maps["mq-broker-b"]["MQ_BROKER_FLUSH_DISK_TYPE"] == "SYNC_FLUSH"


@pytest.mark.parametrize(
    ("values", "verbs"),
    [
        ({}, {"updateTopic", "createUser", "createAcl", "clusterList"}),  # auth on: a user, no unsigned send
        ({"tls": {"enabled": False}, "auth": {"enabled": False}}, {"updateTopic", "sendMessage", "clusterList"}),
    ],
)
def test_notes_show_a_first_message_with_real_mqadmin_commands(values: dict[str, Any], verbs: set[str]) -> None:
    notes = render_files(values)["pyrocketmq/templates/NOTES.txt"]
    used = set(re.findall(r"(?:^\s+|; )mqadmin (?:-n \S+ )?(\w+)(?: |$)", notes, flags=re.M))
    assert verbs <= used
    mqadmin = Path(sys.executable).with_name("mqadmin")
    env = {"COLUMNS": "120", "PATH": str(mqadmin.parent)}
    proc = subprocess.run([str(mqadmin), "--help"], capture_output=True, text=True, check=False, timeout=60, env=env)
    listed = set(re.findall(r"^│ (\w+)\s", proc.stdout, flags=re.M))
    assert used <= listed, proc.stdout
    assert "mq-gateway.messaging.svc.cluster.local:8081" in notes


def test_monitoring_objects_wrap_the_chart_files(chart_copy: Path) -> None:
    """The PrometheusRule carries the plain rules file's groups; one dashboard ConfigMap entry per JSON file."""
    files = chart_copy / "files"
    rules_files = sorted((files / "rules").glob("*.yaml"))
    dashboard_files = sorted((files / "dashboards").glob("*.json"))
    assert rules_files
    assert dashboard_files
    groups = [g for path in rules_files for g in yaml.safe_load(path.read_text("utf-8"))["groups"]]
    values = {
        "metrics": {
            "podMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "grafanaDashboards": {"enabled": True},
        }
    }
    docs = render_docs(values, chart=chart_copy)
    by_kind = {d["kind"]: d for d in docs if d["kind"] in ("PodMonitor", "PrometheusRule")}
    assert by_kind["PrometheusRule"]["spec"]["groups"] == groups
    assert by_kind["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    dashboards = {
        name: json.loads(text)
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard") == "1"
        for name, text in d["data"].items()
    }
    assert dashboards == {p.name: json.loads(p.read_text("utf-8")) for p in dashboard_files}
    assert {d["kind"] for d in render_docs({}, chart=chart_copy)}.isdisjoint(
        {"PodMonitor", "PrometheusRule", "ServiceMonitor"}
    )


def test_service_monitor_selects_one_service_per_component(chart_copy: Path) -> None:
    docs = render_docs({"metrics": {"serviceMonitor": {"enabled": True}}})
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    selected = [
        d
        for d in docs
        if d["kind"] == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()
    ]
    assert sorted(d["metadata"]["name"] for d in selected) == [
        "mq-broker-broker-a-headless",
        "mq-controller-metrics",
        "mq-etcd-headless",
        "mq-gateway-metrics",
        "mq-namesrv-headless",
    ]
    assert all(any(p["name"] == "metrics" for p in d["spec"]["ports"]) for d in selected)


@pytest.mark.parametrize(("kind", "key"), [("PodMonitor", "podMonitor"), ("ServiceMonitor", "serviceMonitor")])
def test_monitors_give_targets_the_component_labels_the_down_alerts_select(kind: str, key: str) -> None:
    """A PodMonitor's job label is "<namespace>/<name>" for every pod, so the down alerts cannot go by job: both
    monitors copy part-of and component onto each target, every scraped pod carries them, and each down alert
    selects its component by exactly those labels."""
    docs = render_docs({"metrics": {key: {"enabled": True}}})
    monitor = next(d for d in docs if d["kind"] == kind)
    assert monitor["spec"]["podTargetLabels"] == ["app.kubernetes.io/part-of", "app.kubernetes.io/component"]
    workloads = [d for d in docs if d["kind"] in ("StatefulSet", "Deployment")]
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in workloads]
    assert {labels["app.kubernetes.io/part-of"] for labels in pod_labels} == {"pyrocketmq"}
    assert {labels["app.kubernetes.io/component"] for labels in pod_labels} == {
        "namesrv",
        "broker",
        "gateway",
        "controller",
        "etcd",
    }
    rules = yaml.safe_load((CHART / "files/rules/pyrocketmq.rules.yaml").read_text("utf-8"))
    exprs = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    for alert, component in [
        ("PyRocketMQNameServerDown", "namesrv"),
        ("PyRocketMQBrokerDown", "broker"),
        ("PyRocketMQGatewayDown", "gateway"),
    ]:
        selector = f'up{{app_kubernetes_io_part_of="pyrocketmq", app_kubernetes_io_component="{component}"}} == 0'
        assert selector in exprs[alert], alert
