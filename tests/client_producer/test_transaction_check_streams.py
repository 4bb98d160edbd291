"""mq_client.transaction_checks.TransactionCheckStreams across a broker restart: the stream to a broker that went
away and came back on the same address registers the producer groups again on the new stream (regression: the
request reader of the broken call still waited on a shared outbox and took the re-registration, so a restarted
broker never knew the producer and every check-back found no producer). An in-process TransactionCheck server stands
in for the broker and records the frames each stream got."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_client.transaction_checks import TransactionCheck, TransactionCheckStreams
from mq_common.channels import ChannelPool


class Recorder(transaction_pb2_grpc.TransactionCheckServicer):
    """Every stream's registration frames, per stream in arrival order."""

    def __init__(self) -> None:
        self.streams: list[list[tuple[str, ...]]] = []

    async def TransactionChecks(
        self,
        request_iterator: AsyncIterator[transaction_pb2.TransactionChecksRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[transaction_pb2.TransactionChecksResponse]:
        frames: list[tuple[str, ...]] = []
        self.streams.append(frames)
        async for request in request_iterator:
            frames.append(tuple(request.producer_groups))
        return
        yield  # an async generator that never writes a check


async def serve(recorder: Recorder, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    transaction_pb2_grpc.add_TransactionCheckServicer_to_server(recorder, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


async def wait_for(predicate: Callable[[], object], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110  (the recorder has no event to wait on)
            await asyncio.sleep(0.02)


async def test_a_restarted_broker_gets_the_groups_again() -> None:
    recorder = Recorder()
    server, port = await serve(recorder)
    addr = f"127.0.0.1:{port}"

    async def masters() -> set[str]:
        return {addr}

    async def on_check(check: TransactionCheck) -> None:
        return None

    pool = ChannelPool()
    streams = TransactionCheckStreams(
        pool, "test", lambda: frozenset({"pg"}), masters, on_check, register_interval_s=0.05, reconnect_s=0.1
    )
    streams.start()
    try:
        await wait_for(lambda: recorder.streams and recorder.streams[0])
        assert set(recorder.streams[0]) == {("pg",)}
        await server.stop(grace=None)  # the broker dies: the stream breaks, reconnects fail for a while
        await asyncio.sleep(0.5)
        server, _ = await serve(recorder, port)  # back on the same address
        await wait_for(lambda: any(frames for frames in recorder.streams[1:]))
        assert [frames[0] for frames in recorder.streams[1:] if frames] == [("pg",)]
    finally:
        await streams.stop()
        await pool.close()
        await server.stop(grace=None)


class Flood(transaction_pb2_grpc.TransactionCheckServicer):
    """Writes ``count`` checks at once on every stream, then holds it open."""

    def __init__(self, count: int) -> None:
        self.count = count

    async def TransactionChecks(
        self,
        request_iterator: AsyncIterator[transaction_pb2.TransactionChecksRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[transaction_pb2.TransactionChecksResponse]:
        await anext(aiter(request_iterator))  # the registration
        for i in range(self.count):
            yield transaction_pb2.TransactionChecksResponse(producer_group="pg", msg_id=f"m{i}", transaction_id=f"m{i}")
        await asyncio.Event().wait()


async def test_answers_in_flight_are_bounded() -> None:
    server = grpc.aio.server()
    transaction_pb2_grpc.add_TransactionCheckServicer_to_server(Flood(40), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    running = peak = 0
    answered: list[str] = []

    async def masters() -> set[str]:
        return {f"127.0.0.1:{port}"}

    async def on_check(check: TransactionCheck) -> None:  # a slow END_TRANSACTION
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        answered.append(check.msg_id)

    pool = ChannelPool()
    streams = TransactionCheckStreams(
        pool, "test", lambda: frozenset({"pg"}), masters, on_check, register_interval_s=0.05, max_answers_in_flight=4
    )
    streams.start()
    try:
        await wait_for(lambda: len(answered) == 40)
        assert peak == 4, "the other checks waited their turn"
        assert sorted(answered) == sorted(f"m{i}" for i in range(40))
    finally:
        await streams.stop()
        await pool.close()
        await server.stop(grace=None)
