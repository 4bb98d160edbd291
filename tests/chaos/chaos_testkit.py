"""Helpers for the chaos tests: a real ``mqbroker`` process (``python -m mq_broker.main``) on 127.0.0.1 that can be
SIGKILLed and restarted on the same store, and a full read-back of a topic through PullMessage.

The broker registers to a name server nobody listens on (registration tolerates it), picks a free port (port 0) and
reports it in its ``started`` log line.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from mq_client.broker_client import BrokerClient
from mq_common.codec import MessageExt
from mq_common.protocol import PullStatus
from mq_local.cluster import inherited_env

START_TIMEOUT_S: Final = 60.0
EXIT_TIMEOUT_S: Final = 30.0
PULL_BATCH: Final = 256
PULL_TIMEOUT_MS: Final = 10_000


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def broker_env(store: Path, file_size: int, flush_disk_type: str, **extra: str) -> dict[str, str]:
    """Environment of a broker on ``store``: free port, ``file_size``-byte CommitLog files, tiny ConsumeQueue files.
    MQ_NO_EXTENSIONS passes through (``make test-pure`` crashes the Python store path); other MQ_* stay out."""
    return {
        **inherited_env(),
        "PYTHONUNBUFFERED": "1",
        "MQ_BROKER_LISTEN_HOST": "127.0.0.1",
        "MQ_BROKER_LISTEN_PORT": "0",
        "MQ_BROKER_STORE_PATH_ROOT_DIR": str(store),
        "MQ_BROKER_NAMESRV_ADDR": f"127.0.0.1:{closed_port()}",
        "MQ_BROKER_REGISTER_BROKER_TIMEOUT_MS": "500",
        "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(file_size),
        "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "256",
        "MQ_BROKER_FLUSH_DISK_TYPE": flush_disk_type,
        "MQ_BROKER_FLUSH_INTERVAL_COMMIT_LOG_MS": "100",
        "MQ_BROKER_AUTO_CREATE_TOPIC_ENABLE": "true",
        "MQ_BROKER_CLEAN_FILE_FORCIBLY_ENABLE": "false",  # a full host disk must not delete what a test stored
        **extra,
    }


class BrokerProcess:
    """One ``mqbroker`` process; stdout+stderr go to ``log_path``. :meth:`close` always reaps it."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mq_broker.main"], env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.port = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def wait_event(self, event: str) -> dict[str, object]:
        """The first log record with ``event``; raises AssertionError (with the log tail) after START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for record in self.events():
                if record.get("event") == event:
                    return record
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        raise AssertionError(f"no {event!r} (exit {self.proc.poll()}): {tail}")

    def wait_started(self) -> dict[str, object]:
        started = self.wait_event("started")
        port = started["port"]
        assert isinstance(port, int)
        assert port > 0
        self.port = port
        return started

    def kill(self) -> None:
        """SIGKILL by PID and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=EXIT_TIMEOUT_S)

    def terminate(self) -> int:
        """SIGTERM (clean stop) by PID; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=EXIT_TIMEOUT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=EXIT_TIMEOUT_S)
        self._log.close()


class BrokerProcesses:
    """Every broker process a test started; :meth:`close_all` reaps them (fixture teardown)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[BrokerProcess] = []

    def start(self, env: dict[str, str]) -> BrokerProcess:
        broker = BrokerProcess(env, self.tmp_path / f"broker-{len(self.started)}.log")
        self.started.append(broker)
        broker.wait_started()
        return broker

    def close_all(self) -> None:
        for broker in self.started:
            broker.close()


async def pull_queue(client: BrokerClient, addr: str, topic: str, queue_id: int) -> tuple[list[MessageExt], int, int]:
    """Every message of one queue, pulled from offset 0 in batches: (messages, min offset, max offset).

    Raises MQClientError when a pulled batch does not decode (e.g. a body CRC mismatch).
    """
    messages: list[MessageExt] = []
    offset = 0
    min_offset = max_offset = 0
    for _ in range(1_000_000):
        result = await client.pull_message(addr, topic, queue_id, offset, PULL_BATCH, timeout_ms=PULL_TIMEOUT_MS)
        min_offset, max_offset = result.min_offset, result.max_offset
        if result.status is not PullStatus.FOUND:
            break
        messages.extend(result.messages)
        offset = result.next_begin_offset
    return messages, min_offset, max_offset
