"""``mqlocal up`` / ``status`` / ``down``: a background cluster started by one process, stopped by another."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
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
        env={**os.environ, "COLUMNS": "400"},  # wide enough that rich never shrinks a column (long temp paths)
        check=False,
    )


def _broker_base_port() -> int:
    for _ in range(50):
        base = free_port()
        if base + BROKER_PORT_STEP < 65536 and port_is_free(base + BROKER_PORT_STEP):
            return base
    raise AssertionError("no free broker port pair")


def _cluster_ports(extra: int = 0) -> list[int]:
    """Distinct free ports: namesrv, broker base, gateway, then ``extra`` more (e.g. the controller's). Each
    free_port() draw closes its socket, so two draws may return the same port: a repeat is drawn again."""
    base = _broker_base_port()
    taken = {base, base + BROKER_PORT_STEP}
    others: list[int] = []
    for _ in range(50 * (2 + extra)):
        if len(others) == 2 + extra:
            return [others[0], base, *others[1:]]
        port = free_port()
        if port not in taken:
            others.append(port)
            taken.add(port)
    raise AssertionError("no distinct free ports")


def _port_args(extra: int = 0) -> list[str]:
    """mqlocal up's port options over :func:`_cluster_ports` (``extra`` 1: with --controller-port)."""
    ports = _cluster_ports(extra)
    args = ["--namesrv-port", str(ports[0]), "--broker-base-port", str(ports[1]), "--gateway-port", str(ports[2])]
    return args + (["--controller-port", str(ports[3])] if extra else [])


def test_up_status_down(tmp_path: Path) -> None:
    data = tmp_path / "local"
    ports = _port_args()
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
        rows = _status_rows(status.stdout)
        assert rows["broker-a"][5:8] == ["ASYNC_MASTER", "0", "-"]  # role, id, epoch (no controller: no epoch)
        assert rows["namesrv"][5:8] == ["", "", ""]

        again = _mqlocal("up", "--data-dir", str(data), *ports)
        assert again.returncode == 1
        namesrv = next(p for p in state.processes if p.name == "namesrv")
        assert f"ports already in use: {namesrv.port} by pid {namesrv.pid} (" in again.stderr  # who holds it
        assert "mq_namesrv.main" in again.stderr
    finally:
        down = _mqlocal("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped 4 processes" in down.stderr
    assert not any(p.alive() for p in state.processes)
    assert read_state(data) is None
    assert _mqlocal("status", "--data-dir", str(data)).returncode == 1


def test_up_right_after_down_takes_the_same_ports_over_time_wait(tmp_path: Path) -> None:
    """``make down`` then ``make up``: clients still connected while the cluster stops leave TIME-WAIT connections
    on the servers' ports (the servers' side closes first); the servers bind over them (SO_REUSEADDR), so the next
    ``up`` on the same ports must start, not refuse them as in use."""
    data = tmp_path / "local-again"
    fixed = _cluster_ports()  # namesrv, broker-a, gateway
    ports = ["--namesrv-port", str(fixed[0]), "--broker-base-port", str(fixed[1]), "--gateway-port", str(fixed[2])]
    ports += ["--brokers", "1"]
    up = _mqlocal("up", "--data-dir", str(data), *ports)
    clients: list[socket.socket] = []
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        clients += [socket.create_connection(("127.0.0.1", port), timeout=30) for port in fixed]
    finally:
        # a bare TCP client holds a graceful gRPC stop to its grace: 1 s each, then SIGKILL (the same FIN either way)
        down = _mqlocal("down", "--data-dir", str(data), "--grace-s", "1")
    assert down.returncode == 0, down.stdout + down.stderr
    for client in clients:
        with client:
            while client.recv(65536):  # drained to EOF (the server's FIN came first), so closing sends a FIN too
                pass
    assert _time_wait_ports(fixed) == set(fixed), "the scenario: TIME-WAIT left on every port of the cluster"

    again = _mqlocal("up", "--data-dir", str(data), *ports)
    try:
        assert again.returncode == 0, again.stdout + again.stderr  # was: ports already in use: [...]
        status = _mqlocal("status", "--data-dir", str(data))
        assert status.returncode == 0, status.stdout + status.stderr
        rows = _status_rows(status.stdout)
        assert {name: row[2] for name, row in rows.items()} == {
            name: f"127.0.0.1:{port}" for name, port in zip(("namesrv", "broker-a", "gateway"), fixed, strict=True)
        }
        assert all(row[4] == "SERVING" for row in rows.values()), status.stdout
    finally:
        down = _mqlocal("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stdout + down.stderr


def _time_wait_ports(ports: list[int]) -> set[int]:
    """Those of ``ports`` with a TIME-WAIT connection on their side (state 06 in /proc/net/tcp*; gRPC's sockets on
    127.0.0.1 are IPv6 ones on the v4-mapped address)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text(encoding="ascii").splitlines()[1:]:
            fields = line.split()
            port = int(fields[1].rpartition(":")[2], 16)
            if port in ports and fields[3] == "06":
                found.add(port)
    return found


def _status_rows(table: str) -> dict[str, list[str]]:
    """``mqlocal status``'s table: service name -> its cells (service, pid, address, process, health, role, broker
    id, epoch, log)."""
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 9 and cells[0] and cells[1].isdigit():
            rows[cells[0]] = cells
    return rows


def test_up_tls_status_down(tmp_path: Path) -> None:
    data = tmp_path / "local-tls"
    ports = [*_port_args(), "--brokers", "1"]
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


def test_replicated_controller_cluster_over_tls_shows_roles_and_etcd_takes_only_mtls(tmp_path: Path) -> None:
    data = tmp_path / "local-ha"
    ports = [*_port_args(extra=1), "--brokers", "1"]
    up = _mqlocal("up", "--data-dir", str(data), "--tls", "--controller", "--replicas", "2", *ports)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(data)
        assert state is not None
        etcd = next(p for p in state.processes if p.name == "etcd0")
        files = LocalTlsFiles.of_data_dir(data)
        etcd_addr = f"127.0.0.1:{etcd.port}"
        assert health_status(etcd_addr) == "UNREACHABLE"  # no plaintext on etcd's client port
        assert health_status(etcd_addr, tls=files.client_config(None)) == "UNREACHABLE"  # nor TLS without a cert
        assert health_status(etcd_addr, tls=files.client_config("controller")) == "SERVING"
        assert health_status(etcd_addr, tls=files.client_config("admin")) == "UNREACHABLE"  # the controller's only
        assert '"etcd_tls": true' in (data / "controller.log").read_text(encoding="utf-8")

        deadline = time.monotonic() + 30
        while True:  # the slave takes the master's epoch once it replicates: a moment after `up` returned
            status = _mqlocal("status", "--data-dir", str(data))
            assert status.returncode == 0, status.stdout + status.stderr
            rows = _status_rows(status.stdout)
            if rows.get("broker-a-s1", [""] * 9)[7] == "1" or time.monotonic() > deadline:
                break
            time.sleep(1)
        names = {"namesrv", "etcd0", "controller", "broker-a", "broker-a-s1", "gateway"}
        assert set(rows) == names, status.stdout  # (seen once in a full fresh-clone run: the slave's row unparsed)
        assert all(row[4] == "SERVING" for row in rows.values())
        # the master registers as id 0 (as in RocketMQ); the slave keeps its controller-mode id; both in epoch 1
        assert rows["broker-a"][5:8] == ["ASYNC_MASTER", "0", "1"]
        assert rows["broker-a-s1"][5:8] == ["SLAVE", "2", "1"]
    finally:
        down = _mqlocal("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stdout + down.stderr
