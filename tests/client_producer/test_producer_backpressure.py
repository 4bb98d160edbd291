"""In-flight limits (backpressure): the limiter's admission, FIFO order, timeouts and clamping; the producer
refusing with FLOW_CONTROL (215) once its budget is spent waiting, and admitting again when sends finish."""

from __future__ import annotations

import asyncio

import pytest
from mq_client.producer import DefaultMQProducer, FlowControlError, Message, ProducerConfig
from mq_client.producer.backpressure import InFlightLimiter
from mq_client.producer.testing import InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.response_code import ResponseCode

A = "127.0.0.1:10911"


async def test_admits_within_both_limits_and_refuses_beyond() -> None:
    limiter = InFlightLimiter(max_messages=3, max_bytes=100)
    p1 = await limiter.acquire(2, 40, 0)
    p2 = await limiter.acquire(1, 40, 0)
    assert (limiter.in_flight_messages, limiter.in_flight_bytes) == (3, 80)
    with pytest.raises(FlowControlError) as info:
        await limiter.acquire(1, 1, 0)  # the count is full
    assert info.value.code == ResponseCode.FLOW_CONTROL
    assert "3/3 messages" in info.value.remark
    limiter.release(p2)
    with pytest.raises(FlowControlError, match="40/100 bytes"):
        await limiter.acquire(1, 61, 0)  # the bytes would be 101
    p3 = await limiter.acquire(1, 60, 0)
    limiter.release(p1)
    limiter.release(p3)
    assert (limiter.in_flight_messages, limiter.in_flight_bytes) == (0, 0)


async def test_waiter_is_admitted_when_a_send_finishes() -> None:
    limiter = InFlightLimiter(max_messages=1, max_bytes=0)
    first = await limiter.acquire(1, 10, 0)
    waiting = asyncio.ensure_future(limiter.acquire(1, 10, 5000))
    await asyncio.sleep(0)
    assert not waiting.done()
    limiter.release(first)
    second = await asyncio.wait_for(waiting, 5)
    assert limiter.in_flight_messages == 1
    limiter.release(second)


async def test_waiters_are_served_in_arrival_order() -> None:
    limiter = InFlightLimiter(max_messages=2, max_bytes=0)
    held = await limiter.acquire(2, 0, 0)
    order: list[str] = []

    async def take(name: str, count: int) -> None:
        permit = await limiter.acquire(count, 0, 5000)
        order.append(name)
        limiter.release(permit)

    big = asyncio.ensure_future(take("big", 2))
    await asyncio.sleep(0)
    small = asyncio.ensure_future(take("small", 1))
    await asyncio.sleep(0)
    with pytest.raises(FlowControlError):
        await limiter.acquire(1, 0, 0)  # no jumping the line while others wait
    limiter.release(held)
    await asyncio.wait_for(asyncio.gather(big, small), 5)
    assert order == ["big", "small"]


async def test_wait_times_out_and_leaves_nothing_taken() -> None:
    limiter = InFlightLimiter(max_messages=1, max_bytes=0)
    held = await limiter.acquire(1, 0, 0)
    with pytest.raises(FlowControlError, match="waited 20 ms"):
        await limiter.acquire(1, 0, 20)
    limiter.release(held)
    assert limiter.in_flight_messages == 0
    assert (await limiter.acquire(1, 0, 0)).messages == 1


async def test_a_request_larger_than_the_limit_is_clamped() -> None:
    limiter = InFlightLimiter(max_messages=10, max_bytes=100)
    permit = await limiter.acquire(50, 1000, 0)
    assert (permit.messages, permit.size_bytes) == (10, 100)
    limiter.release(permit)


async def test_cancelled_wait_takes_nothing() -> None:
    limiter = InFlightLimiter(max_messages=1, max_bytes=0)
    held = await limiter.acquire(1, 0, 0)
    waiting = asyncio.ensure_future(limiter.acquire(1, 0, 5000))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    limiter.release(held)
    assert limiter.in_flight_messages == 0


async def producer_over(transport: ScriptedBrokerTransport, **config: object) -> DefaultMQProducer:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2}, addrs={"broker-a": A})})
    producer = DefaultMQProducer(ProducerConfig("g", **config), ns, transport)  # type: ignore[arg-type]
    await producer.start()
    return producer


async def test_send_over_the_limit_fails_with_flow_control_after_its_budget() -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(hang=True))
    producer = await producer_over(transport, max_in_flight_messages=1)
    stuck = asyncio.ensure_future(producer.send(Message("T", b"a"), timeout_ms=3000))
    await asyncio.sleep(0.01)
    with pytest.raises(FlowControlError) as info:
        await producer.send(Message("T", b"b"), timeout_ms=30)
    assert info.value.code == ResponseCode.FLOW_CONTROL
    assert len(transport.calls) == 1  # the refused message never reached a broker
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    assert producer.limiter.in_flight_messages == 0
    await producer.shutdown()


async def test_batch_counts_every_message_and_its_bytes() -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(hang=True))
    producer = await producer_over(transport, max_in_flight_bytes=1000)
    stuck = asyncio.ensure_future(producer.send_batch([Message("T", b"x" * 300)] * 3, timeout_ms=3000))
    await asyncio.sleep(0.01)
    assert producer.limiter.in_flight_bytes == 900
    with pytest.raises(FlowControlError):
        await producer.send(Message("T", b"y" * 101), timeout_ms=20)
    ok = await producer.send(Message("T", b"y" * 100), timeout_ms=1000)
    assert ok.message_queue.broker_name == "broker-a"
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    await producer.shutdown()
