"""``mqlocal up`` / ``status`` / ``down``: a background cluster started by one process, stopped by another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mq_local.ports import BROKER_PORT_STEP, free_port, port_is_free
from mq_local.readiness import health_status
from mq_local.state import read_state
from mq_local.tls_files import LocalTlsFiles

pytestmark = pytest.mark.integration


def _mqlocal(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mq_local", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def _broker_base_port() -> int:
    for _ in range(50):
        base = free_port()
        if base + BROKER_PORT_STEP < 65536 and port_is_free(base + BROKER_PORT_STEP):
            return base
    raise AssertionError("no free broker port pair")


def test_up_status_down(tmp_path: Path) -> None:
    data = tmp_path / "local"
    ports = ["--namesrv-port", str(free_port()), "--broker-base-port", str(_broker_base_port())]
    ports += ["--gateway-port", str(free_port())]
    up = _mqlocal("up", "--data-dir", str(data), *ports)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(data)
        assert state is not None
        assert sorted(p.name for p in state.processes) == ["broker-a", "broker-b", "gateway", "namesrv"]
        assert all(p.alive() for p in state.processes)  # they outlived the `up` process
        assert health_status(state.gateway_addr) == "SERVING"

        status = _mqlocal("status", "--data-dir", str(data))
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("SERVING") == 4

        again = _mqlocal("up", "--data-dir", str(data), *ports)
        assert again.returncode == 1
        assert "ports already in use" in again.stderr
    finally:
        down = _mqlocal("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped 4 processes" in down.stderr
    assert not any(p.alive() for p in state.processes)
    assert read_state(data) is None
    assert _mqlocal("status", "--data-dir", str(data)).returncode == 1


def test_up_tls_status_down(tmp_path: Path) -> None:
    data = tmp_path / "local-tls"
    ports = ["--namesrv-port", str(free_port()), "--broker-base-port", str(_broker_base_port())]
    ports += ["--gateway-port", str(free_port()), "--brokers", "1"]
    up = _mqlocal("up", "--data-dir", str(data), "--tls", *ports)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(data)
        assert state is not None
        assert state.tls
        assert health_status(state.gateway_addr) == "UNREACHABLE"  # plaintext is refused
        ca_only = LocalTlsFiles.of_data_dir(data).client_config(None)
        assert health_status(state.gateway_addr, tls=ca_only) == "SERVING"
        status = _mqlocal("status", "--data-dir", str(data))
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("SERVING") == 3
    finally:
        down = _mqlocal("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stdout + down.stderr
