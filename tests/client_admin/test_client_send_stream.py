"""mq_client's BrokerClient: the three sends over one SendStream per broker, against a real in-process broker
(results, two clients' streams side by side, broker stop and restart), and against a silent
SendStream server for what only a misbehaving peer shows (timeout, stamped frames, frame-level refusals).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_broker.settings import BrokerSettings
from mq_client.broker_client import BrokerClient
from mq_common.batch_codec import encode_batch
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties
from mq_common.errors import RemotingError, RemotingTimeoutError
from mq_common.protocol import SendMessageBatchRequestHeader, SendMessageRequestHeader
from mq_common.request_context import bind_request_id
from mq_common.response_code import ResponseCode

TIMEOUT_MS = 3000


def broker_settings(root: Path, port: int = 0) -> BrokerSettings:
    return BrokerSettings(
        listen_host="127.0.0.1",
        listen_port=port,
        ha_listen_port=0,  # free: the restart reuses the gRPC port, gRPC port + 1 may be taken meanwhile
        store_path_root_dir=root,
        namesrv_addr="127.0.0.1:1",
        mapped_file_size_commit_log_bytes=1024 * 1024,
        register_broker_timeout_ms=200,
        log_json=False,
    )


def send_request(topic: str, body: bytes, queue_id: int = 0) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=0,
        properties=encode_properties({"UNIQ_KEY": body.hex().upper()}),
        reconsume_times=0,
        body=body,
        born_host="",
    )


@pytest.fixture
async def client(pool: ChannelPool) -> AsyncIterator[BrokerClient]:
    c = BrokerClient(pool)
    try:
        yield c
    finally:
        await c.close()


async def test_the_three_sends_over_the_stream(tmp_path: Path, pool: ChannelPool, client: BrokerClient) -> None:
    broker = BrokerController(broker_settings(tmp_path / "store"))
    await broker.start()
    try:
        addr = f"127.0.0.1:{broker.port}"
        many = await asyncio.gather(
            *(client.send_message(addr, send_request("S", b"m%d" % i), TIMEOUT_MS) for i in range(200))
        )
        assert {r.code for r in many} == {ResponseCode.SUCCESS}
        assert sorted(r.queue_offset for r in many) == list(range(200))

        batch = await client.send_batch(addr, [send_request("S", b"b0", 1), send_request("S", b"", 1)], TIMEOUT_MS)
        assert [r.code for r in batch] == [ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL]
        whole = await client.send_message_batch(
            addr,
            SendMessageBatchRequestHeader(
                producer_group="PG",
                topic="S",
                default_topic="TBW102",
                default_topic_queue_nums=4,
                queue_id=2,
                sys_flag=0,
                born_timestamp_ms=1_700_000_000_000,
                properties="",
                born_host="",
                body=encode_batch((b"x%d" % i, encode_properties({"UNIQ_KEY": f"X{i}"}), 0) for i in range(3)),
            ),
            TIMEOUT_MS,
        )
        assert (whole.code, whole.queue_id, whole.queue_offset, whole.message_count) == (0, 2, 0, 3)
        assert len(whole.msg_id.split(",")) == 3

        other = BrokerClient(pool)  # its own stream on the same channel
        try:
            again = await other.send_message(addr, send_request("S", b"other"), TIMEOUT_MS)
        finally:
            await other.close()
        assert (again.code, again.queue_offset) == (ResponseCode.SUCCESS, 200)
    finally:
        await broker.stop()


async def test_a_stopped_broker_fails_the_sends_and_a_restarted_one_gets_a_new_stream(
    tmp_path: Path, client: BrokerClient
) -> None:
    broker = BrokerController(broker_settings(tmp_path / "store"))
    port = await broker.start()
    addr = f"127.0.0.1:{port}"
    try:
        assert (await client.send_message(addr, send_request("R", b"first"), TIMEOUT_MS)).code == ResponseCode.SUCCESS
    finally:
        await broker.stop()
    with pytest.raises(RemotingError) as err:
        await client.send_message(addr, send_request("R", b"while-down"), TIMEOUT_MS)
    assert not isinstance(err.value, RemotingTimeoutError)
    assert err.value.code == ResponseCode.RPC_SEND_TO_CHANNEL_FAILED

    restarted = BrokerController(broker_settings(tmp_path / "store", port))
    await restarted.start()
    try:
        deadline = time.monotonic() + 10
        while True:  # the channel reconnects with backoff (at most 3 s)
            try:
                answer = await client.send_message(addr, send_request("R", b"after"), TIMEOUT_MS)
                break
            except RemotingError:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
        assert (answer.code, answer.queue_offset) == (ResponseCode.SUCCESS, 1)
    finally:
        await restarted.stop()


class SilentBroker(broker_pb2_grpc.BrokerServicer):
    """A SendStream peer that keeps every frame and answers only when told to (``answer_with``)."""

    def __init__(self) -> None:
        self.frames: list[broker_pb2.SendStreamRequest] = []
        self.answer_with: tuple[int, str] | None = None

    async def SendStream(self, request_iterator: Any, context: Any) -> AsyncIterator[broker_pb2.SendStreamResponse]:
        async for frame in request_iterator:
            self.frames.append(frame)
            if self.answer_with is not None:
                code, remark = self.answer_with
                yield broker_pb2.SendStreamResponse(frame_id=frame.frame_id, code=code, remark=remark)


@pytest.fixture
async def silent() -> AsyncIterator[tuple[SilentBroker, str]]:
    server = grpc.aio.server()
    servicer = SilentBroker()
    broker_pb2_grpc.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def test_an_unanswered_frame_times_out_and_carries_its_deadline_and_request_id(
    silent: tuple[SilentBroker, str], client: BrokerClient
) -> None:
    servicer, addr = silent

    async def send() -> None:
        bind_request_id("req-stream-1")
        await client.send_message(addr, send_request("T", b"never answered"), 300)

    began_ms = int(time.time() * 1000)
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError) as err:
        await asyncio.create_task(send())
    assert 0.3 <= time.monotonic() - started < 5
    assert err.value.code == ResponseCode.RPC_TIME_OUT
    (frame,) = servicer.frames
    assert frame.request_id == "req-stream-1"
    assert began_ms + 300 <= frame.deadline_unix_ms <= began_ms + 300 + 1000
    assert [r.body for r in frame.batch.requests] == [b"never answered"]


async def test_a_frame_level_refusal_is_every_message_s_code(
    silent: tuple[SilentBroker, str], client: BrokerClient
) -> None:
    servicer, addr = silent
    servicer.answer_with = (ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy")
    answers = await client.send_batch(addr, [send_request("T", b"a"), send_request("T", b"b")], TIMEOUT_MS)
    assert [(a.code, a.remark) for a in answers] == [(ResponseCode.SYSTEM_BUSY, "[TIMEOUT_CLEAN_QUEUE]broker busy")] * 2
    frame_ids = [f.frame_id for f in servicer.frames]
    assert len(set(frame_ids)) == len(frame_ids) == 1
