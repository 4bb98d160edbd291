"""Static checks of the shipped dashboards and alert rules, plus promtool (Debian package ``prometheus``):
``promtool check rules`` and ``promtool test rules`` (unit tests that fire each alert on synthetic series)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from obs_testkit import (
    DASHBOARD_DIR,
    RULES_DIR,
    RULES_FILE,
    RULES_TEST_FILE,
    alert_expressions,
    dashboard_queries,
    metric_list,
)

EXPECTED_DASHBOARDS = {
    "cluster-overview.json",
    "broker-store.json",
    "producer-gateway.json",
    "spark-publishing.json",
    "consumer.json",
}
EXPECTED_ALERTS = {
    "PyRocketMQBrokerDown",
    "PyRocketMQBrokerExpired",
    "PyRocketMQNameServerDown",
    "PyRocketMQGatewayDown",
    "PyRocketMQFlushDiskTimeouts",
    "PyRocketMQDiskUsageHigh",
    "PyRocketMQSendErrorRatioHigh",
    "PyRocketMQIsolationStorm",
    "PyRocketMQConsumerLagHigh",
    "PyRocketMQDeadLetterGrowing",
    "PyRocketMQAuthRefusalBurst",
    "PyRocketMQBrokerAuthRefusalBurst",
    "PyRocketMQNoInSyncSlave",
    "PyRocketMQReplicationLag",
    "PyRocketMQFrequentElections",
    "PyRocketMQTimerLate",
    "PyRocketMQHalfMessagesPilingUp",
    "PyRocketMQFifoQueueBlocked",
}
_METRIC_REF = re.compile(r"\b((?:rocketmq|mq)_[a-z_]+)")
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (make prometheus)")


def known_series_names() -> set[str]:
    names: set[str] = set()
    for service in metric_list()["services"].values():
        for name, spec in service["metrics"].items():
            names.add(name)
            if spec["type"] == "counter":
                names.add(f"{name}_total")
            if spec["type"] == "histogram":
                names.update(f"{name}{s}" for s in ("_bucket", "_count", "_sum"))
    return names


def test_dashboards_are_grafana_json_with_unique_ids_and_prometheus_targets() -> None:
    paths = {p.name: p for p in DASHBOARD_DIR.glob("*.json")}
    assert set(paths) == EXPECTED_DASHBOARDS
    uids = set()
    for path in paths.values():
        board = json.loads(path.read_text(encoding="utf-8"))
        uids.add(board["uid"])
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), path.name
        assert len(ids) >= 8, path.name
        for panel in board["panels"]:
            if panel["type"] == "row":  # a row only groups the panels below it
                continue
            assert panel["targets"], (path.name, panel["title"])
            assert panel["datasource"]["type"] == "prometheus"
        assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "cluster"}
    assert len(uids) == len(paths)


def test_dashboards_and_rules_only_use_listed_metrics() -> None:
    known = known_series_names()
    exprs = [expr for _b, _t, expr in dashboard_queries()] + [expr for _n, expr in alert_expressions()]
    unknown = {m for expr in exprs for m in _METRIC_REF.findall(expr) if m not in known}
    assert unknown == set()


def test_rules_file_is_plain_prometheus_groups_with_every_alert() -> None:
    data = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    assert set(data) == {"groups"}
    assert {name for name, _ in alert_expressions()} == EXPECTED_ALERTS
    for group in data["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"critical", "warning"}
            assert rule["annotations"]["summary"]
            assert rule["annotations"]["description"]


@needs_promtool
def test_promtool_check_rules() -> None:
    proc = subprocess.run(["promtool", "check", "rules", str(RULES_FILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(EXPECTED_ALERTS)} rules found" in proc.stdout


@needs_promtool
def test_promtool_unit_tests_fire_every_alert() -> None:
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULES_TEST_FILE.read_text(encoding="utf-8"))["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert tested == EXPECTED_ALERTS
    proc = subprocess.run(
        ["promtool", "test", "rules", str(RULES_TEST_FILE.relative_to(RULES_DIR))],
        cwd=RULES_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@needs_promtool
def test_promtool_unit_tests_catch_a_wrong_expectation(tmp_path: Path) -> None:
    text = RULES_TEST_FILE.read_text(encoding="utf-8").replace("isolates 2 brokers", "isolates 3 brokers")
    broken = tmp_path / "broken.test.yaml"
    broken.write_text(text.replace("../pyrocketmq.rules.yaml", str(RULES_FILE)), encoding="utf-8")
    proc = subprocess.run(["promtool", "test", "rules", str(broken)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0


def test_broker_dashboard_has_a_replication_row() -> None:
    """Issue 20's row: lag bytes and seconds per slave, in-sync slaves per master, SyncStateSet size and elections
    per group, each panel below the "Replication" row and above any later row."""
    board = json.loads((DASHBOARD_DIR / "broker-store.json").read_text(encoding="utf-8"))
    panels = sorted(board["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "Replication")
    below = [p for p in panels[start + 1 :] if p["type"] != "row"]
    exprs = " ".join(t["expr"] for p in below for t in p["targets"])
    for series, by in [
        ("mq_broker_ha_slave_lag_bytes", "slave"),
        ("mq_broker_ha_slave_lag_seconds", "slave"),
        ("mq_broker_ha_in_sync_slaves", "node_id"),
        ("mq_controller_sync_state_set_size", "broker_name"),
        ("mq_controller_elections_total", "broker_name"),
    ]:
        assert re.search(rf"by \([^)]*\b{by}\b[^)]*\) \((?:increase\()?{series}\{{", exprs), series


def test_broker_dashboard_has_a_timers_row() -> None:
    """Issue 32's row: timer enqueue/dequeue and delay-level re-put rates, the timing-messages backlog, lateness
    p50/p99 from the histogram and the schedule offsets behind per delay level, below the "Timers and delay levels"
    row."""
    board = json.loads((DASHBOARD_DIR / "broker-store.json").read_text(encoding="utf-8"))
    panels = sorted(board["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "Timers and delay levels")
    end = next((i for i, p in enumerate(panels[start + 1 :], start + 1) if p["type"] == "row"), len(panels))
    exprs = " ".join(t["expr"] for p in panels[start + 1 : end] for t in p["targets"])
    for series in (
        "rocketmq_timer_enqueue_total",
        "rocketmq_timer_dequeue_total",
        "mq_broker_schedule_dequeue_total",
        "rocketmq_timing_messages",
        "mq_broker_schedule_offset_behind",
    ):
        assert f"{series}{{" in exprs, series
    lateness = "sum by (le, node_id, timer_type) (rate(mq_broker_timer_lateness_ms_bucket{"
    for quantile in ("0.5", "0.99"):
        assert f"histogram_quantile({quantile}, {lateness}" in exprs, quantile
