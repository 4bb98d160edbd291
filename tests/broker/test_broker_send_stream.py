"""Broker SendStream over gRPC, in process: frames stored in arrival order and answered by id, frame-level
refusals (no send, too many requests, read past the deadline) that leave the stream open, and shutdown ending
every stream with OK.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from broker_grpc_testkit import ANSWER_WAIT_S, RunningBrokers, exchange, send_request
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_properties, iter_messages
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub


def batch_frame(frame_id: int, *messages: broker_pb2.SendMessageRequest) -> broker_pb2.SendStreamRequest:
    return broker_pb2.SendStreamRequest(frame_id=frame_id, batch=broker_pb2.SendBatchRequest(requests=messages))


async def stored_bodies(stub: Stub, topic: str, queue_id: int) -> list[bytes]:
    resp = await stub.PullMessage(
        broker_pb2.PullMessageRequest(
            consumer_group="CG", topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=1000
        )
    )
    if resp.status != broker_pb2.PULL_STATUS_FOUND:
        return []
    return [m.body for m in iter_messages(resp.message_bytes)]


async def test_frames_are_stored_in_arrival_order_and_answered_by_id(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    frames = [
        batch_frame(i + 1, *(send_request("Orders", f"f{i}-m{j}".encode()) for j in range(i % 3 + 1)))
        for i in range(60)
    ]
    message_batch = broker_pb2.SendMessageBatchRequest(
        producer_group="PG",
        topic="Orders",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        born_timestamp_ms=1_700_000_000_000,
        body=encode_batch((b"mb-%d" % i, encode_properties({"UNIQ_KEY": f"MB{i}"}), 0) for i in range(5)),
    )
    frames.insert(30, broker_pb2.SendStreamRequest(frame_id=1000, message_batch=message_batch))
    answers = await exchange(stub, frames)

    assert sorted(answers) == sorted(f.frame_id for f in frames)
    whole = answers[1000]
    assert (whole.code, whole.WhichOneof("result")) == (ResponseCode.SUCCESS, "message_batch")
    assert (whole.message_batch.code, whole.message_batch.queue_id, whole.message_batch.message_count) == (0, 1, 5)
    assert await stored_bodies(stub, "Orders", 1) == [b"mb-%d" % i for i in range(5)]
    offsets: list[int] = []
    for frame in frames:
        if frame.frame_id == 1000:
            continue
        answer = answers[frame.frame_id]
        assert (answer.code, answer.WhichOneof("result")) == (ResponseCode.SUCCESS, "batch")
        assert [r.code for r in answer.batch.responses] == [ResponseCode.SUCCESS] * len(frame.batch.requests)
        offsets.extend(r.queue_offset for r in answer.batch.responses)
    assert offsets == list(range(len(offsets)))  # arrival order = queue order
    expected = [r.body for f in frames if f.frame_id != 1000 for r in f.batch.requests]
    assert await stored_bodies(stub, "Orders", 0) == expected


async def test_bad_frames_are_refused_and_the_stream_goes_on(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    late = batch_frame(3, send_request("Late", b"late"))
    late.deadline_unix_ms = int(time.time() * 1000) - 50
    in_time = batch_frame(5, send_request("Fine", b"in-time"), send_request("Fine", b""))
    in_time.deadline_unix_ms = int(time.time() * 1000) + 60_000
    frames = [
        broker_pb2.SendStreamRequest(frame_id=1),  # carries no send
        batch_frame(2, send_request("Fine", b"")),  # an empty body: refused by msgCheck, nothing stored
        late,
        batch_frame(4, send_request("Fine", b"fine")),
        in_time,
    ]
    answers = await exchange(stub, frames)

    assert (answers[1].code, answers[1].WhichOneof("result")) == (ResponseCode.INVALID_PARAMETER, None)
    assert "carries no send" in answers[1].remark
    assert answers[2].batch.responses[0].code == ResponseCode.MESSAGE_ILLEGAL
    assert answers[3].code == ResponseCode.SYSTEM_BUSY
    assert answers[3].remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
    assert answers[4].code == ResponseCode.SUCCESS
    codes = [r.code for r in answers[5].batch.responses]
    assert codes == [ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL]
    assert await stored_bodies(stub, "Fine", 0) == [b"fine", b"in-time"]
    assert await stored_bodies(stub, "Late", 0) == []


async def test_a_frame_over_max_send_batch_requests_ends_the_stream_unparsed(
    broker: tuple[BrokerController, Stub],
) -> None:
    controller, stub = broker
    limit = controller.settings.max_send_batch_requests
    answers_before = await exchange(stub, [batch_frame(1, send_request("Fine", b"first"))])
    assert answers_before[1].code == ResponseCode.SUCCESS
    call = stub.SendStream()
    await call.write(batch_frame(2, *[send_request("Many", b"x")] * (limit + 1)))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async with asyncio.timeout(ANSWER_WAIT_S):
            await call.read()
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert f"more than {limit} elements in one request (max_send_batch_requests)" in str(refused.value.details())
    assert await stored_bodies(stub, "Many", 0) == []
    assert (await exchange(stub, [batch_frame(3, send_request("Fine", b"after"))]))[3].code == ResponseCode.SUCCESS


async def test_shutdown_answers_what_was_read_and_ends_every_stream(tmp_path: Path) -> None:
    running = RunningBrokers()
    controller, stub = await running.start(tmp_path / "store")
    try:
        call = stub.SendStream()
        await call.write(batch_frame(1, send_request("Orders", b"before-stop")))
        async with asyncio.timeout(ANSWER_WAIT_S):
            first = await call.read()
        assert isinstance(first, broker_pb2.SendStreamResponse)
        assert first.batch.responses[0].code == ResponseCode.SUCCESS

        began = time.monotonic()
        await controller.stop()  # the stream is still open: stop must end it, not wait out the grace period
        assert time.monotonic() - began < controller.settings.shutdown_grace_ms / 1000
        async with asyncio.timeout(ANSWER_WAIT_S):
            assert await call.read() is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK
    finally:
        await running.stop_all()
