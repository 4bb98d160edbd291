"""Helpers for the broker service tests: settings, in-process brokers on 127.0.0.1, an unused port."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_broker.settings import BrokerSettings
from mq_broker.store.config import FlushDiskType
from mq_common.codec import encode_properties
from mq_common.grpc_server import CHANNEL_OPTIONS


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def broker_settings(root: Path, **overrides: Any) -> BrokerSettings:
    """In-process broker settings: free port, small files, SYNC_FLUSH, an unreachable name server."""
    values: dict[str, Any] = {
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "store_path_root_dir": root,
        "namesrv_addr": f"127.0.0.1:{closed_port()}",
        "mapped_file_size_commit_log_bytes": 64 * 1024,
        "mapped_file_size_consume_queue_units": 64,
        "flush_disk_type": FlushDiskType.SYNC_FLUSH,
        "register_broker_timeout_ms": 1_000,
        "log_json": False,
    }
    values.update(overrides)
    return BrokerSettings(**values)


def send_request(topic: str, body: bytes = b"hello", queue_id: int = 0, **props: str) -> broker_pb2.SendMessageRequest:
    """A SendMessageRequest of producer group PG with TBW102 (4 queues) as the auto-create template."""
    return broker_pb2.SendMessageRequest(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        born_timestamp_ms=1_700_000_000_000,
        properties=encode_properties(props),
        body=body,
    )


class RunningBrokers:
    """Starts in-process brokers and stops every one of them (test teardown)."""

    def __init__(self) -> None:
        self.started: list[tuple[BrokerController, grpc.aio.Channel]] = []

    async def start(self, root: Path, **overrides: Any) -> tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub]:
        controller = BrokerController(broker_settings(root, **overrides))
        port = await controller.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
        self.started.append((controller, channel))
        return controller, broker_pb2_grpc.BrokerStub(channel)  # type: ignore[return-value]

    async def stop_all(self) -> None:
        for controller, channel in reversed(self.started):
            await channel.close()
            await controller.stop()
        self.started.clear()
