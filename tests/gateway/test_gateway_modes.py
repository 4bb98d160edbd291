"""The gateway's SendOneway RPC, RESOURCE_EXHAUSTED under backpressure, and the topic
allow/deny list, over a real in-process gRPC server with the producer core on in-memory brokers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer.testing import InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.response_code import ResponseCode
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"

Start = Callable[..., "asyncio.Future[tuple[ScriptedBrokerTransport, gateway_pb2_grpc.ProducerGatewayAsyncStub]]"]


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., object]]:
    started: list[tuple[GatewayController, grpc.aio.Channel]] = []

    async def run(**settings: object) -> tuple[ScriptedBrokerTransport, gateway_pb2_grpc.ProducerGatewayAsyncStub]:
        transport = ScriptedBrokerTransport()
        routes = {t: make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B}) for t in "TU"}
        controller = GatewayController(
            GatewaySettings(listen_port=0, **settings),  # type: ignore[arg-type]
            namesrv=InMemoryNameServer(routes),
            transport=transport,
        )
        await controller.start()
        channel = grpc.aio.insecure_channel(controller.addr)
        started.append((controller, channel))
        return transport, gateway_pb2_grpc.ProducerGatewayStub(channel)

    try:
        yield run
    finally:
        for controller, channel in started:
            await channel.close()
            await controller.stop(1)


def msg(topic: str = "T", body: bytes = b"hello") -> gateway_pb2.Message:
    return gateway_pb2.Message(topic=topic, body=body)


async def test_send_oneway_accepts_and_the_message_is_stored(start: Callable[..., object]) -> None:
    transport, stub = await start()  # type: ignore[misc]
    response = await stub.SendOneway(gateway_pb2.SendOnewayRequest(message=msg()), timeout=10)
    assert response.code == ResponseCode.SUCCESS
    assert len(response.msg_id) == 32
    for _ in range(200):
        if transport.stored:
            break
        await asyncio.sleep(0.01)
    ((_, stored),) = transport.stored
    assert response.msg_id in stored.properties


async def test_send_oneway_refusal_comes_back_before_acceptance(start: Callable[..., object]) -> None:
    transport, stub = await start()  # type: ignore[misc]
    response = await stub.SendOneway(gateway_pb2.SendOnewayRequest(message=msg(body=b"")), timeout=10)
    assert (response.code, response.remark) == (ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
    assert response.msg_id == ""
    missing = await stub.SendOneway(gateway_pb2.SendOnewayRequest(message=msg(topic="Nope")), timeout=10)
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert transport.calls == []


async def test_send_is_resource_exhausted_over_the_in_flight_limit(start: Callable[..., object]) -> None:
    transport, stub = await start(max_in_flight_messages=1)  # type: ignore[misc]
    transport.always(A, Step(hang=True))
    transport.always(B, Step(hang=True))
    stuck = asyncio.ensure_future(stub.Send(gateway_pb2.SendRequest(message=msg(), send_timeout_ms=1000), timeout=10))
    for _ in range(200):
        if transport.calls:
            break
        await asyncio.sleep(0.01)
    for call in (
        stub.Send(gateway_pb2.SendRequest(message=msg(), send_timeout_ms=50), timeout=10),
        stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg()], send_timeout_ms=50), timeout=10),
        stub.SendOneway(gateway_pb2.SendOnewayRequest(message=msg(), send_timeout_ms=50), timeout=10),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "flow control" in (info.value.details() or "")
    assert (await stuck).result.code == ResponseCode.RPC_TIME_OUT
    assert len(transport.calls) == 1


async def test_topic_deny_and_allow_lists(start: Callable[..., object]) -> None:
    transport, stub = await start(topic_allow_list=["T", "U"], topic_deny_list=["U"])  # type: ignore[misc]
    ok = (await stub.Send(gateway_pb2.SendRequest(message=msg("T")), timeout=10)).result
    assert ok.code == ResponseCode.SUCCESS
    denied = (await stub.Send(gateway_pb2.SendRequest(message=msg("U")), timeout=10)).result
    assert denied.code == ResponseCode.NO_PERMISSION
    assert denied.remark == "Sending message to topic[U] is forbidden: the topic is in the deny list"
    batch = (await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg("U"), msg("T")]), timeout=10)).results
    assert [r.code for r in batch] == [ResponseCode.NO_PERMISSION, ResponseCode.SUCCESS]
    assert [r.topic for _, r in transport.stored] == ["T", "T"]
