"""``mqbroker`` as a process: ``started`` line, health, send, clean SIGTERM (abort removed), restart keeps data;
exit code 2 for bad settings and for a store directory already in use.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from broker_grpc_testkit import closed_port
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.codec import iter_messages
from mq_common.response_code import ResponseCode
from mq_local.cluster import inherited_env

pytestmark = pytest.mark.integration
START_TIMEOUT_S = 30.0


class BrokerProcess:
    def __init__(self, store: Path, log_path: Path, **env: str) -> None:
        self.log_path = log_path
        self.env = {
            **inherited_env(),
            "MQ_BROKER_LISTEN_HOST": "127.0.0.1",
            "MQ_BROKER_LISTEN_PORT": "0",
            "MQ_BROKER_STORE_PATH_ROOT_DIR": str(store),
            "MQ_BROKER_NAMESRV_ADDR": f"127.0.0.1:{closed_port()}",
            "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(1024 * 1024),
            "MQ_BROKER_FLUSH_DISK_TYPE": "SYNC_FLUSH",
            **env,
        }
        self.log = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mq_broker.main"], env=self.env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def events(self) -> list[dict[str, object]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def wait_event(self, event: str) -> dict[str, object]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for record in self.events():
                if record.get("event") == event:
                    return record
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {event!r} (exit {self.proc.poll()}): {self.log_path.read_text()[-2000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def processes() -> Iterator[list[BrokerProcess]]:
    started: list[BrokerProcess] = []
    try:
        yield started
    finally:
        for p in started:
            p.close()


def test_lifecycle_and_restart(processes: list[BrokerProcess], tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = BrokerProcess(store, tmp_path / "first.log")
    processes.append(first)
    started = first.wait_event("started")
    port = started["port"]
    assert isinstance(port, int)
    assert port > 0
    assert started["last_exit_ok"] is True
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        stub = broker_pb2_grpc.BrokerStub(channel)
        request = broker_pb2.SendMessageRequest(topic="Survives", queue_id=0, body=b"durable", default_topic="TBW102")
        frame = broker_pb2.SendStreamRequest(frame_id=7, batch=broker_pb2.SendBatchRequest(requests=[request]))
        (answer,) = stub.SendStream(iter([frame]), timeout=10)
        assert (answer.frame_id, answer.code) == (7, ResponseCode.SUCCESS), answer.remark
        (sent,) = answer.batch.responses
        assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert (store / "abort").exists()
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(timeout=30) == 0
    assert not (store / "abort").exists()
    assert any(e.get("event") == "store_shutdown" and e.get("clean") is True for e in first.events())

    second = BrokerProcess(store, tmp_path / "second.log")
    processes.append(second)
    port = second.wait_event("started")["port"]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        pulled = broker_pb2_grpc.BrokerStub(channel).PullMessage(
            broker_pb2.PullMessageRequest(
                consumer_group="CG", topic="Survives", queue_id=0, queue_offset=0, max_msg_nums=10
            ),
            timeout=10,
        )
    assert [m.body for m in iter_messages(pulled.message_bytes)] == [b"durable"]

    # A second broker on the same store directory refuses to start.
    third = BrokerProcess(store, tmp_path / "third.log")
    processes.append(third)
    assert third.proc.wait(timeout=30) == 2
    assert "Lock failed" in third.log_path.read_text()

    second.proc.send_signal(signal.SIGINT)
    assert second.proc.wait(timeout=30) == 0


def test_invalid_settings_exit_2(processes: list[BrokerProcess], tmp_path: Path) -> None:
    bad = BrokerProcess(tmp_path / "store", tmp_path / "bad.log", MQ_BROKER_FLUSH_DISK_TYPE="SOMETIMES")
    processes.append(bad)
    assert bad.proc.wait(timeout=30) == 2
    assert "invalid settings" in bad.log_path.read_text()
