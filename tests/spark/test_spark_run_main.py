"""``make run``'s entry point end to end on a slice of the flights: fresh cluster, publish, verify, clean stop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mq_local.state import STATE_FILE

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROWS = 3_000


def test_run_main_publishes_verifies_and_stops_everything(tmp_path: Path) -> None:
    data = tmp_path / "flights"
    data.mkdir()
    (data / ".mq-local").write_text("previous run\n")
    (data / "stale.log").write_text("from the previous run\n")
    done = subprocess.run(
        [sys.executable, "-m", "mq_spark.jobs.run_main", "--limit", str(ROWS), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["rows"], report["published"], report["verified"]) == (ROWS, ROWS, ROWS)
    assert (report["missing"], report["duplicates"], report["keys_on_many_queues"]) == (0, 0, 0)
    assert sum(report["per_broker"].values()) == ROWS
    assert set(report["per_broker"]) == {"broker-a", "broker-b"}
    assert report["rows_per_s"] > 0
    assert report["guarantee"] == "exactly_once"
    assert not (data / "stale.log").exists()  # the run started from an empty data folder
    assert not (data / STATE_FILE).exists()  # every process was stopped (state removed on stop)
    for service in ("namesrv", "broker-a", "broker-b", "gateway"):
        lines = (data / f"{service}.log").read_text().splitlines()
        events = [json.loads(line).get("event") for line in lines if line.startswith("{")]
        assert "started" in events, service
        assert "stopped" in events, service  # a clean SIGTERM exit, not a kill
