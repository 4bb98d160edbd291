"""``mqgateway`` as a process: logs ``started`` with its port, serves health and Send, exits 0 on SIGTERM.

No name server runs here, so a Send comes back as a result with a transport error code (not a crash).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.response_code import ResponseCode

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_event(proc: subprocess.Popen[str], event: str) -> dict[str, object]:
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            return record
    raise AssertionError(f"no {event!r} line from mqgateway (exit code {proc.poll()})")


@pytest.fixture
def gateway() -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    env = {
        **os.environ,
        "MQ_GATEWAY_LISTEN_PORT": str(port),
        "MQ_GATEWAY_NAMESRV_ADDR": f"127.0.0.1:{free_port()}",  # nothing listens there
        "MQ_GATEWAY_SEND_MSG_TIMEOUT_MS": "500",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "mq_gateway.main"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_process_lifecycle(gateway: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = gateway
    started = wait_for_event(proc, "started")
    assert started["port"] == port
    assert started["level"] == "info"
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        request = gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="T", body=b"x"))
        result = stub.Send(request, timeout=10).result
        assert result.code in (ResponseCode.RPC_SEND_TO_CHANNEL_FAILED, ResponseCode.RPC_TIME_OUT)
        assert "No route info of this topic: T" in result.remark
    proc.send_signal(signal.SIGTERM)
    wait_for_event(proc, "stopped")
    assert proc.wait(timeout=15) == 0


def test_invalid_settings_exit_2() -> None:
    env = {**os.environ, "MQ_GATEWAY_SEND_MSG_TIMEOUT_MS": "-5"}
    proc = subprocess.run(
        [sys.executable, "-m", "mq_gateway.main"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 2
    assert "invalid settings" in proc.stderr
