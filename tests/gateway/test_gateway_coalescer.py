"""CoalescingBrokerTransport over in-memory brokers: merging per broker, splitting answers back, the message and
byte bounds, the linger flush, pass-through of large batches, error fan-out, dropped cancelled callers, and N
concurrent gateway Sends turning into fewer broker calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer.testing import InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.errors import RemotingError
from mq_common.protocol import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from mq_common.response_code import ResponseCode
from mq_gateway.coalescer import CoalescingBrokerTransport, request_size_bytes
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


def req(i: int, body: bytes = b"x", queue_id: int = 0) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(producer_group="g", topic="T", queue_id=queue_id, flag=i, body=body)


def coalescer(
    inner: ScriptedBrokerTransport, *, linger_ms: float = 1.0, max_bytes: int = 1 << 20, max_messages: int = 64
) -> CoalescingBrokerTransport:
    return CoalescingBrokerTransport(
        inner, linger_ms=linger_ms, max_batch_bytes=max_bytes, max_batch_messages=max_messages
    )


async def test_concurrent_sends_to_one_broker_become_one_batch_call() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner)
    responses = await asyncio.gather(*(c.send_message(A, req(i), 1000) for i in range(10)))
    assert len(inner.calls) == 1
    assert inner.calls[0].batch
    assert [r.flag for r in inner.calls[0].requests] == list(range(10))
    # each caller gets its own answer: queue 0 offsets 0..9 in submission order
    assert [r.queue_offset for r in responses] == list(range(10))
    assert all(r.code == ResponseCode.SUCCESS for r in responses)
    assert c.stats.units == 10
    assert c.stats.broker_calls == 1
    await c.close()


async def test_each_broker_gets_its_own_call() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner)
    await asyncio.gather(*(c.send_message(A if i % 2 else B, req(i), 1000) for i in range(8)))
    assert sorted((call.addr, len(call.requests)) for call in inner.calls) == [(A, 4), (B, 4)]


async def test_message_bound_splits_into_several_calls() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, max_messages=4)
    responses = await asyncio.gather(*(c.send_message(A, req(i), 1000) for i in range(10)))
    assert [len(call.requests) for call in inner.calls] == [4, 4, 2]
    assert sorted(r.queue_offset for r in responses) == list(range(10))


async def test_byte_bound_splits_into_several_calls() -> None:
    inner = ScriptedBrokerTransport()
    one = request_size_bytes(req(0, b"y" * 100))
    c = coalescer(inner, max_bytes=3 * one)
    await asyncio.gather(*(c.send_message(A, req(i, b"y" * 100), 1000) for i in range(7)))
    assert [len(call.requests) for call in inner.calls] == [3, 3, 1]


async def test_small_batches_join_whole_and_keep_their_order() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, max_messages=7)
    batches = [[req(10 * b + i) for i in range(3)] for b in range(4)]
    answers = await asyncio.gather(*(c.send_batch(A, batch, 1000) for batch in batches))
    # units of 3 are never split: 3 + 3 fit under 7, the third closes the open batch
    assert [[r.flag for r in call.requests] for call in inner.calls] == [
        [0, 1, 2, 10, 11, 12],
        [20, 21, 22, 30, 31, 32],
    ]
    assert [[r.queue_offset for r in a] for a in answers] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]


async def test_large_batch_goes_straight_to_the_broker() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, max_messages=4, linger_ms=2.0)
    single = asyncio.ensure_future(c.send_message(A, req(99), 1000))
    answers = await c.send_batch(A, [req(i) for i in range(5)], 1000)
    assert len(answers) == 5
    assert [len(call.requests) for call in inner.calls] == [5]  # the open single-message batch still lingers
    assert (await single).code == ResponseCode.SUCCESS
    assert [len(call.requests) for call in inner.calls] == [5, 1]
    assert not inner.calls[1].batch  # a one-message batch goes out as SendMessage


async def test_linger_flushes_a_lone_send() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, linger_ms=2.0)
    response = await asyncio.wait_for(c.send_message(A, req(1), 1000), 5)
    assert response.code == ResponseCode.SUCCESS
    assert len(inner.calls) == 1


class GatedTransport(ScriptedBrokerTransport):
    """Each call waits for ``gate`` before answering."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        await self.gate.wait()
        return await super().send_message(addr, request, timeout_ms)

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        await self.gate.wait()
        return await super().send_batch(addr, requests, timeout_ms)


async def test_idle_broker_gets_a_send_at_once_and_later_ones_gather_behind_its_call() -> None:
    inner = GatedTransport()
    c = coalescer(inner, linger_ms=2.0)
    first = asyncio.ensure_future(c.send_message(A, req(0), 1000))
    for _ in range(3):
        await asyncio.sleep(0)
    assert c.stats.broker_calls == 1  # no linger for an idle broker: the call is under way already
    later = [asyncio.ensure_future(c.send_message(A, req(i), 1000)) for i in (1, 2, 3)]
    await asyncio.sleep(0)
    inner.gate.set()  # the first call returns: what gathered behind it goes out together
    await asyncio.gather(first, *later)
    assert [[r.flag for r in call.requests] for call in inner.calls] == [[0], [1, 2, 3]]
    await c.close()


async def test_zero_linger_still_merges_sends_of_one_loop_turn() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, linger_ms=0)
    await asyncio.gather(*(c.send_message(A, req(i), 1000) for i in range(5)))
    assert [len(call.requests) for call in inner.calls] == [5]


async def test_transport_error_reaches_every_caller_of_the_call() -> None:
    inner = ScriptedBrokerTransport()
    inner.script(A, Step(error=RemotingError("connection reset")))
    c = coalescer(inner)
    outcomes = await asyncio.gather(*(c.send_message(A, req(i), 1000) for i in range(3)), return_exceptions=True)
    assert all(isinstance(o, RemotingError) for o in outcomes)
    # the next call is a new batch and succeeds
    assert (await c.send_message(A, req(9), 1000)).code == ResponseCode.SUCCESS


async def test_per_message_codes_are_split_back() -> None:
    inner = ScriptedBrokerTransport()
    inner.script(A, Step(code_for=lambda r: ResponseCode.SUCCESS if r.flag % 2 else ResponseCode.MESSAGE_ILLEGAL))
    c = coalescer(inner)
    responses = await asyncio.gather(*(c.send_message(A, req(i), 1000) for i in range(4)))
    assert [r.code for r in responses] == [ResponseCode.MESSAGE_ILLEGAL, 0, ResponseCode.MESSAGE_ILLEGAL, 0]


async def test_a_caller_that_gave_up_before_the_flush_is_not_sent() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, linger_ms=2.0)
    gone = asyncio.ensure_future(c.send_message(A, req(1), 1000))
    await asyncio.sleep(0)
    gone.cancel()
    kept = await c.send_message(A, req(2), 1000)
    assert kept.code == ResponseCode.SUCCESS
    assert [[r.flag for r in call.requests] for call in inner.calls] == [[2]]


async def test_close_sends_open_batches() -> None:
    inner = ScriptedBrokerTransport()
    c = coalescer(inner, linger_ms=2.0)
    pending = asyncio.ensure_future(c.send_message(A, req(1), 1000))
    await asyncio.sleep(0)
    await c.close()
    assert pending.done()
    assert isinstance(pending.result(), SendMessageResponseHeader)


def test_linger_is_bounded() -> None:
    with pytest.raises(ValueError, match="linger_ms"):
        coalescer(ScriptedBrokerTransport(), linger_ms=5)


class SlowTransport(ScriptedBrokerTransport):
    """Every broker call takes BROKER_CALL_S of real time, like a round trip to a real broker."""

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        await asyncio.sleep(BROKER_CALL_S)
        return await super().send_message(addr, request, timeout_ms)

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        await asyncio.sleep(BROKER_CALL_S)
        return await super().send_batch(addr, requests, timeout_ms)

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        await asyncio.sleep(BROKER_CALL_S)
        return await super().send_message_batch(addr, request, timeout_ms)


BROKER_CALL_S = 0.005


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[GatewayController, ScriptedBrokerTransport, grpc.aio.Channel]]:
    transport = SlowTransport()
    ns = InMemoryNameServer({"T": make_route({"broker-a": 4, "broker-b": 4}, addrs={"broker-a": A, "broker-b": B})})
    controller = GatewayController(
        GatewaySettings(listen_port=0, coalesce_linger_ms=2.0),
        namesrv=ns,
        transport=transport,
    )
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        yield controller, transport, channel
    finally:
        await channel.close()
        await controller.stop(0)


async def test_concurrent_gateway_sends_make_fewer_broker_calls(
    gateway: tuple[GatewayController, ScriptedBrokerTransport, grpc.aio.Channel],
) -> None:
    controller, transport, channel = gateway
    stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
    n = 64
    requests = [gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="T", body=b"m%d" % i)) for i in range(n)]
    results = await asyncio.gather(*(stub.Send(r, timeout=10) for r in requests))
    assert [r.result.code for r in results] == [ResponseCode.SUCCESS] * n
    assert len(transport.stored) == n
    assert len({r.result.msg_id for r in results}) == n
    assert len(transport.calls) < n
    assert controller.coalescer is not None
    assert controller.coalescer.stats.units == n
    assert controller.coalescer.stats.broker_calls == len(transport.calls)


async def test_concurrent_gateway_batches_make_fewer_broker_calls(
    gateway: tuple[GatewayController, ScriptedBrokerTransport, grpc.aio.Channel],
) -> None:
    """Concurrent one-topic SendBatch calls: their MessageBatches are merged per broker; every message is stored
    once, each call's messages together, in order, at the offsets its results give."""
    controller, transport, channel = gateway
    stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
    n = 32
    batches = [[gateway_pb2.Message(topic="T", body=b"c%d-%d" % (c, i)) for i in range(10)] for c in range(n)]
    responses = await asyncio.gather(
        *(stub.SendBatch(gateway_pb2.SendBatchRequest(messages=b), timeout=10) for b in batches)
    )
    assert all(r.code == ResponseCode.SUCCESS for resp in responses for r in resp.results)
    assert all(c.message_batch for c in transport.calls)
    assert len(transport.calls) < n
    assert controller.coalescer is not None
    assert controller.coalescer.stats.message_batches == n
    stored: dict[tuple[str, int, int], bytes] = {}
    next_offset: dict[tuple[str, int], int] = {}
    for addr, request in transport.stored:  # the in-memory broker's offsets: per queue, in storing order
        offset = next_offset.get((addr, request.queue_id), 0)
        next_offset[(addr, request.queue_id)] = offset + 1
        stored[(addr, request.queue_id, offset)] = request.body
    assert len(stored) == n * 10
    addrs = {"broker-a": A, "broker-b": B}
    for batch, response in zip(batches, responses, strict=True):
        where = [(addrs[r.broker_name], r.queue_id, r.queue_offset) for r in response.results]
        assert [stored[w] for w in where] == [m.body for m in batch]
