"""ServiceServer on both gRPC fronts (grpcio's grpc.aio and pygrpc-native): the same servicer, interceptors, request
guard, deadlines, cancellation, health Check/Watch, reflection, a bidi stream (served by pygrpc-native's grpc.aio
fallback behind a Unix socket), graceful stop and the one bound port. Real servers on 127.0.0.1, real clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from mq_common.grpc_front import GrpcFront
from mq_common.grpc_guard import RequestLimits
from mq_common.grpc_server import ServiceServer
from mq_common.request_context import RequestContextInterceptor, current_request_id
from mq_common.tls import TlsServerConfig
from mq_common.wire_bounds import method_bounds

SERVICE = "apache.rocketmq.v2.MessagingService"
SEND = f"/{SERVICE}/SendMessage"
MAX_MESSAGES = 3
SLOW_TOPIC = "slow"
DEADLINE_TOPIC = "deadline"
FRONTS: list[GrpcFront] = ["grpcio", "native"]


class Servicer(service_pb2_grpc.MessagingServiceServicer):
    """SendMessage answers with the caller's peer and request id (``slow``: waits until cancelled); Telemetry echoes
    each command after one carrying the peer."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.slow_started = asyncio.Event()

    async def SendMessage(self, request: Any, context: Any) -> service_pb2.SendMessageResponse:
        if request.messages and request.messages[0].topic.name == SLOW_TOPIC:
            self.slow_started.set()
            try:
                await asyncio.sleep(float(request.messages[0].body or b"60"))
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if request.messages and request.messages[0].topic.name == DEADLINE_TOPIC:
            return service_pb2.SendMessageResponse(status=definition_pb2.Status(message=repr(context.time_remaining())))
        entry = service_pb2.SendResultEntry(message_id=current_request_id())
        status = definition_pb2.Status(message=context.peer())
        return service_pb2.SendMessageResponse(status=status, entries=[entry] * len(request.messages))

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[service_pb2.TelemetryCommand]:
        yield service_pb2.TelemetryCommand(status=definition_pb2.Status(message=context.peer()))
        async for command in request_iterator:
            yield command


def _limits() -> RequestLimits:
    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    return RequestLimits(dict([method_bounds(service, "SendMessage", ("messages", MAX_MESSAGES, "max_msgs", None))]))


def _request(n: int, topic: str = "t", body: bytes = b"x") -> service_pb2.SendMessageRequest:
    message = definition_pb2.Message(topic=definition_pb2.Resource(name=topic), body=body)
    return service_pb2.SendMessageRequest(messages=[message] * n)


class Served:
    def __init__(self, server: ServiceServer, servicer: Servicer, channel: grpc.aio.Channel) -> None:
        self.server, self.servicer, self.channel = server, servicer, channel
        self.stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture(params=FRONTS)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    server = ServiceServer(
        [SERVICE], [RequestContextInterceptor(generate=True)], limits=_limits(), grpc_server=request.param
    )
    servicer = Servicer()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server.server)
    port = server.bind("127.0.0.1", 0)
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Served(server, servicer, channel)
    finally:
        await channel.close()
        await server.stop(0)


async def test_the_front_is_the_one_asked_for_and_binds_one_port(served: Served) -> None:
    assert served.server.front in FRONTS
    assert served.server.port > 0
    with pytest.raises(RuntimeError, match="one port"):
        served.server.bind("127.0.0.1", 0)


async def test_unary_call_sees_the_client_address_and_the_interceptors_request_id(served: Served) -> None:
    response = await served.stub.SendMessage(_request(2), metadata=(("x-mq-request-id", "rid-7"),))
    # unary calls are served natively: the peer is the client's address on both fronts
    assert response.status.message.startswith("ipv4:127.0.0.1:")
    assert [e.message_id for e in response.entries] == ["rid-7", "rid-7"]


async def test_the_request_guard_refuses_an_oversized_element_and_undecodable_bytes(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.stub.SendMessage(_request(MAX_MESSAGES + 1))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_msgs" in (refused.value.details() or "")
    raw = served.channel.unary_unary(SEND)
    with pytest.raises(grpc.aio.AioRpcError) as garbage:
        await raw(b"\xff\xff\xff\xff")
    assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cannot decode" in (garbage.value.details() or "")


async def test_time_remaining_is_none_without_a_deadline_and_seconds_with_one(served: Served) -> None:
    assert (await served.stub.SendMessage(_request(1, DEADLINE_TOPIC))).status.message == "None"
    remaining = float((await served.stub.SendMessage(_request(1, DEADLINE_TOPIC), timeout=7)).status.message)
    assert 5.0 < remaining < 7.1  # the grpc-timeout header rounds up


async def test_a_deadline_ends_the_call_and_cancels_the_handler(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await served.stub.SendMessage(_request(1, SLOW_TOPIC, b"60"), timeout=0.3)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    async with asyncio.timeout(5):
        await served.servicer.cancelled.wait()


async def test_a_client_cancel_cancels_the_handler(served: Served) -> None:
    call = served.stub.SendMessage(_request(1, SLOW_TOPIC, b"60"))
    async with asyncio.timeout(5):
        await served.servicer.slow_started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    async with asyncio.timeout(5):
        await served.servicer.cancelled.wait()


async def test_health_check_and_watch(served: Served) -> None:
    health = health_pb2_grpc.HealthStub(served.channel)
    for name in ("", SERVICE):
        answer = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE))
    statuses = watch.__aiter__()
    async with asyncio.timeout(5):
        assert (await anext(statuses)).status == health_pb2.HealthCheckResponse.SERVING
        await served.server.health.set(SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        assert (await anext(statuses)).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()


async def test_reflection_lists_every_service(served: Served) -> None:
    database = ProtoReflectionDescriptorDatabase(grpc.insecure_channel(f"127.0.0.1:{served.server.port}"))
    services = await asyncio.to_thread(database.get_services)
    assert {SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= set(services)
    method = await asyncio.to_thread(database.FindFileContainingSymbol, SERVICE)
    assert method.name == "apache/rocketmq/v2/service.proto"


async def test_telemetry_bidi_stream_echoes(served: Served) -> None:
    async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
        for nonce in ("a", "b"):
            yield service_pb2.TelemetryCommand(verify_message_command=service_pb2.VerifyMessageCommand(nonce=nonce))

    answers = [a async for a in served.stub.Telemetry(commands())]
    peer = answers[0].status.message
    # grpc.aio: the client's address; pygrpc-native serves bidi calls through its grpc.aio fallback on a Unix socket
    assert peer.startswith("unix:" if served.server.front == "native" else "ipv4:127.0.0.1:"), peer
    assert [a.verify_message_command.nonce for a in answers[1:]] == ["a", "b"]


async def test_stop_lets_an_in_flight_call_finish(served: Served) -> None:
    call = served.stub.SendMessage(_request(1, SLOW_TOPIC, b"0.3"))
    async with asyncio.timeout(5):
        await served.servicer.slow_started.wait()
    await served.server.stop(5.0)
    response = await call
    assert len(response.entries) == 1
    assert not served.servicer.cancelled.is_set()


async def test_stop_answers_every_call_in_flight_and_refuses_later_ones(served: Served) -> None:
    """64 calls inside their handler when stop() begins: every one is answered (on the native front a stop that
    closed the front right after the handlers returned lost answers not written yet); a call made after stop()
    began is refused with UNAVAILABLE, not answered."""
    calls = [asyncio.ensure_future(served.stub.SendMessage(_request(1, SLOW_TOPIC, b"0.2"))) for _ in range(64)]
    async with asyncio.timeout(5):
        await served.servicer.slow_started.wait()
    await asyncio.sleep(0.05)  # the other calls reached their handlers too
    stopping = asyncio.ensure_future(served.server.stop(5.0))
    await asyncio.sleep(0.01)
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await served.stub.SendMessage(_request(1), timeout=5)
    assert late.value.code() == grpc.StatusCode.UNAVAILABLE
    answers = await asyncio.gather(*calls)
    await stopping
    assert [len(a.entries) for a in answers] == [1] * 64
    assert not served.servicer.cancelled.is_set()


async def test_native_front_refuses_tls_at_bind() -> None:
    server = ServiceServer([SERVICE], grpc_server="native")
    tls = TlsServerConfig(cert_file=Path(__file__), key_file=Path(__file__))
    with pytest.raises(RuntimeError, match="plaintext only"):
        server.bind("127.0.0.1", 0, tls)
    await server.stop(0)
