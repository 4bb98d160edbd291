"""Helpers for the broker service tests: settings, in-process brokers on 127.0.0.1, an unused port, and sends
over Broker.SendStream (the broker's only send RPC)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_broker.settings import BrokerSettings
from mq_broker.store.config import FlushDiskType
from mq_common.codec import encode_properties
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode

ANSWER_WAIT_S = 30.0


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def broker_settings(root: Path, **overrides: Any) -> BrokerSettings:
    """In-process broker settings: free ports (gRPC and HA), small files, SYNC_FLUSH, an unreachable name server."""
    values: dict[str, Any] = {
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "ha_listen_port": 0,  # a free HA port: a restart on the old gRPC port must not need gRPC port + 1 too
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


async def exchange(
    stub: broker_pb2_grpc.BrokerAsyncStub, frames: Sequence[broker_pb2.SendStreamRequest]
) -> dict[int, broker_pb2.SendStreamResponse]:
    """Write every frame on one new SendStream, half-close, read every answer; answers by frame id (each exactly
    once; the stream must end OK)."""
    call = stub.SendStream()
    for frame in frames:
        await call.write(frame)
    await call.done_writing()
    answers: dict[int, broker_pb2.SendStreamResponse] = {}
    async with asyncio.timeout(ANSWER_WAIT_S):
        async for answer in call:
            assert answer.frame_id not in answers
            answers[answer.frame_id] = answer
    assert await call.code() is grpc.StatusCode.OK
    return answers


async def stream_send_batch(
    stub: broker_pb2_grpc.BrokerAsyncStub, *requests: broker_pb2.SendMessageRequest
) -> list[broker_pb2.SendMessageResponse]:
    """``requests`` as one SendBatchRequest frame; the per-request answers (the frame itself must be accepted)."""
    frame = broker_pb2.SendStreamRequest(frame_id=1, batch=broker_pb2.SendBatchRequest(requests=requests))
    answer = (await exchange(stub, [frame]))[1]
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert len(answer.batch.responses) == len(requests)
    return list(answer.batch.responses)


async def stream_send(
    stub: broker_pb2_grpc.BrokerAsyncStub, request: broker_pb2.SendMessageRequest
) -> broker_pb2.SendMessageResponse:
    """SEND_MESSAGE: one message as a one-request batch frame."""
    return (await stream_send_batch(stub, request))[0]


async def stream_send_message_batch(
    stub: broker_pb2_grpc.BrokerAsyncStub, request: broker_pb2.SendMessageBatchRequest
) -> broker_pb2.SendMessageBatchResponse:
    """SEND_BATCH_MESSAGE: one MessageBatch frame; its answer (the frame itself must be accepted)."""
    answer = (await exchange(stub, [broker_pb2.SendStreamRequest(frame_id=1, message_batch=request)]))[1]
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.WhichOneof("result") == "message_batch"
    return answer.message_batch


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
