"""The gateway servicer over a real gRPC server in-process, with the producer core on in-memory brokers:
proto <-> domain translation, every outcome as a SendResult, INVALID_ARGUMENT only for whole-request errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.gateway_client import GatewayMessage, gateway_send
from mq_client.producer import DefaultMQProducer, Message, MessageBatch, ProducerConfig, SendResult
from mq_client.producer.message_batch import ChunkOutcome, EncodedMessageBatch
from mq_client.producer.testing import FakeClock, InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.channels import ChannelPool
from mq_common.codec import decode_properties
from mq_common.errors import MQError, RemotingError
from mq_common.response_code import ResponseCode
from mq_gateway import wire
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


@dataclass
class Env:
    controller: GatewayController
    transport: ScriptedBrokerTransport
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub
    channel: grpc.aio.Channel


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with gateway_env() as made:
        yield made


@asynccontextmanager
async def gateway_env(**settings_fields: object) -> AsyncIterator[Env]:
    settings = GatewaySettings(
        listen_port=0,
        max_batch_messages=5,
        max_send_msg_timeout_ms=10_000,
        **settings_fields,  # type: ignore[arg-type]
    )
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B})})
    producer = DefaultMQProducer(ProducerConfig("gw_group"), ns, transport, clock_ms=clock)
    controller = GatewayController(settings, producer)
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        yield Env(controller, transport, gateway_pb2_grpc.ProducerGatewayStub(channel), channel)
    finally:
        await channel.close()
        await controller.stop(0)


def msg(topic: str = "T", body: bytes = b"hello", **kwargs: object) -> gateway_pb2.Message:
    return gateway_pb2.Message(topic=topic, body=body, **kwargs)  # type: ignore[arg-type]


async def test_send_ok(env: Env) -> None:
    request = gateway_pb2.SendRequest(
        message=msg(tag="TagA", keys=["k1", "k2"], properties={"color": "red"}, flag=3), producer_group="ignored"
    )
    result = (await env.stub.Send(request)).result
    assert result.code == ResponseCode.SUCCESS
    assert result.send_status == common_pb2.SEND_STATUS_SEND_OK
    assert len(result.msg_id) == 32
    assert result.offset_msg_id
    assert result.broker_name in ("broker-a", "broker-b")
    (stored_addr, req) = env.transport.stored[0]
    assert stored_addr == (A if result.broker_name == "broker-a" else B)
    assert req.queue_id == result.queue_id
    assert req.flag == 3
    assert req.producer_group == "gw_group"
    props = decode_properties(req.properties)
    assert (props["TAGS"], props["KEYS"], props["color"], props["UNIQ_KEY"]) == ("TagA", "k1 k2", "red", result.msg_id)


async def test_send_timeout_is_passed_to_the_core(env: Env) -> None:
    await env.stub.Send(gateway_pb2.SendRequest(message=msg(), send_timeout_ms=1234))
    await env.stub.Send(gateway_pb2.SendRequest(message=msg()))
    assert [c.timeout_ms for c in env.transport.calls] == [1234, 3000]


@pytest.mark.parametrize(
    ("request_", "code", "remark"),
    [
        (gateway_pb2.SendRequest(), ResponseCode.MESSAGE_ILLEGAL, "the message is null"),
        (
            gateway_pb2.SendRequest(message=msg(body=b"")),
            ResponseCode.MESSAGE_ILLEGAL,
            "the message body length is zero",
        ),
        (
            gateway_pb2.SendRequest(message=msg(properties={"UNIQ_KEY": "x"})),
            ResponseCode.MESSAGE_ILLEGAL,
            "property is used by system: UNIQ_KEY",
        ),
        (
            gateway_pb2.SendRequest(message=msg(topic="bad topic")),
            ResponseCode.MESSAGE_ILLEGAL,
            "contains illegal characters",
        ),
        (gateway_pb2.SendRequest(message=msg(topic="Nope")), ResponseCode.TOPIC_NOT_EXIST, "No route info"),
    ],
)
async def test_send_refusals_are_results(env: Env, request_: gateway_pb2.SendRequest, code: int, remark: str) -> None:
    result = (await env.stub.Send(request_)).result
    assert result.code == code
    assert remark in result.remark
    assert result.send_status == common_pb2.SEND_STATUS_UNSPECIFIED
    assert env.transport.calls == []


@pytest.mark.parametrize("timeout_ms", [-1, 10_001])
async def test_bad_timeout_is_invalid_argument(env: Env, timeout_ms: int) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await env.stub.Send(gateway_pb2.SendRequest(message=msg(), send_timeout_ms=timeout_ms))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as batch_info:
        await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg()], send_timeout_ms=timeout_ms))
    assert batch_info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_flush_disk_timeout_is_code_zero_with_status(env: Env) -> None:
    env.transport.always(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    env.transport.always(B, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=msg()))).result
    assert result.code == ResponseCode.SUCCESS
    assert result.send_status == common_pb2.SEND_STATUS_FLUSH_DISK_TIMEOUT


async def test_all_attempts_failed(env: Env) -> None:
    env.transport.always(A, Step(error=RemotingError("connect to <a> failed")))
    env.transport.always(B, Step(error=RemotingError("connect to <b> failed")))
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=msg()))).result
    assert result.code == ResponseCode.RPC_SEND_TO_CHANNEL_FAILED
    assert result.remark.startswith("Send [3] times, still failed, cost [")
    assert "Topic: T, BrokersSent: [" in result.remark
    assert result.broker_name in ("broker-a", "broker-b")


async def test_send_batch_mixed(env: Env) -> None:
    request = gateway_pb2.SendBatchRequest(
        messages=[
            msg(body=b"1"),
            msg(body=b"2", properties={"KEYS": "x"}),
            msg(body=b"3", sharding_key="order-1"),
            msg(topic="Nope", body=b"4"),
            msg(body=b""),
        ]
    )
    results = (await env.stub.SendBatch(request)).results
    assert [r.code for r in results] == [
        ResponseCode.SUCCESS,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.SUCCESS,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.MESSAGE_ILLEGAL,
    ]
    assert results[1].remark == "property is used by system: KEYS"
    assert results[4].remark == "the message body length is zero"
    assert all(c.batch for c in env.transport.calls)
    assert sorted(r.body for _, r in env.transport.stored) == [b"1", b"3"]


async def test_send_batch_of_one_topic_is_one_message_batch(env: Env) -> None:
    messages = [
        msg(body=b"1", tag="TagA", keys=["k1", "k2"], flag=7),
        msg(body=b"2", properties={"color": "red"}),
        msg(body=b"3"),
    ]
    results = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages))).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 3
    assert all(r.send_status == common_pb2.SEND_STATUS_SEND_OK for r in results)
    (call,) = env.transport.calls
    assert call.message_batch
    assert len({(r.broker_name, r.queue_id) for r in results}) == 1
    assert [r.queue_offset for r in results] == [0, 1, 2]
    assert [r.body for r in call.requests] == [b"1", b"2", b"3"]
    assert [r.flag for r in call.requests] == [7, 0, 0]
    props = [decode_properties(r.properties) for r in call.requests]
    assert [p["UNIQ_KEY"] for p in props] == [r.msg_id for r in results]
    assert (props[0]["TAGS"], props[0]["KEYS"], props[1]["color"]) == ("TagA", "k1 k2", "red")
    assert "TAGS" not in props[2]
    assert len({r.offset_msg_id for r in results}) == 3


async def test_send_batch_with_several_sharding_keys_is_one_message_batch_per_queue(env: Env) -> None:
    keys = ["tail-1", "tail-2", "tail-1", "tail-3", "tail-2"]
    messages = [msg(body=f"m{i}".encode(), tag="AA", sharding_key=k) for i, k in enumerate(keys)]
    env.transport.always(B, Step(code=ResponseCode.SYSTEM_ERROR))  # a keyed message never leaves its queue
    results = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages))).results
    assert all(c.message_batch for c in env.transport.calls)
    queue_of: dict[str, tuple[str, int]] = {}
    for key, result in zip(keys, results, strict=True):
        if result.code == ResponseCode.SUCCESS:
            assert queue_of.setdefault(key, (result.broker_name, result.queue_id)) == (
                result.broker_name,
                result.queue_id,
            )
        else:
            assert result.code == ResponseCode.SYSTEM_ERROR
    stored = {r.body: (addr, r) for addr, r in env.transport.stored}
    for i, (key, result) in enumerate(zip(keys, results, strict=True)):
        if result.code != ResponseCode.SUCCESS:
            assert f"m{i}".encode() not in stored
            continue
        addr, req = stored[f"m{i}".encode()]
        props = decode_properties(req.properties)
        assert (props["__SHARDINGKEY"], props["TAGS"], props["UNIQ_KEY"]) == (key, "AA", result.msg_id)
        assert (addr, req.queue_id) == (A if result.broker_name == "broker-a" else B, result.queue_id)
    # per queue, the stored order is the send order and the offsets are the ones answered
    for queue in set(queue_of.values()):
        offsets = [r.queue_offset for r in results if r.code == 0 and (r.broker_name, r.queue_id) == queue]
        assert offsets == sorted(offsets)
    assert {r.code for r in results} == {ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR}  # both brokers were keyed


async def test_send_batch_of_one_topic_with_an_invalid_message_gets_one_outcome_each(env: Env) -> None:
    results = (
        await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg(body=b"1"), msg(body=b""), msg(body=b"3")]))
    ).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SUCCESS]
    assert results[1].remark == "the message body length is zero"
    assert sorted(r.body for _, r in env.transport.stored) == [b"1", b"3"]


async def test_send_batch_of_one_topic_failing_gets_the_error_for_every_message(env: Env) -> None:
    env.transport.always(A, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    env.transport.always(B, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    results = (
        await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg(body=b"1"), msg(body=b"2")]))
    ).results
    assert [(r.code, r.send_status) for r in results] == [(ResponseCode.MESSAGE_ILLEGAL, 0)] * 2
    assert all(r.broker_name in ("broker-a", "broker-b") for r in results)


async def test_send_batch_too_large_is_invalid_argument(env: Env) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg()] * 6))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "more than 5 elements in one request (max_batch_messages)" in (info.value.details() or "")
    assert env.transport.calls == []


async def test_empty_batch(env: Env) -> None:
    assert list((await env.stub.SendBatch(gateway_pb2.SendBatchRequest())).results) == []


async def test_health_is_serving(env: Env) -> None:
    health = health_pb2_grpc.HealthStub(env.channel)
    resp = await health.Check(health_pb2.HealthCheckRequest(service="mq.gateway.v1.ProducerGateway"))
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_mq_client_gateway_send_round_trip(env: Env) -> None:
    pool = ChannelPool()
    try:
        result = await gateway_send(pool, env.controller.addr, GatewayMessage("T", b"via client", tag="t"))
    finally:
        await pool.close()
    assert result.send_status == "SEND_OK"
    assert env.transport.stored[0][1].body == b"via client"


class ExplodingProducer:
    config = ProducerConfig("exploding")

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        raise RuntimeError("boom")

    async def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> list[SendResult | MQError]:
        raise RuntimeError("boom")

    async def send_message_batch(self, batch: MessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome] | None:
        raise RuntimeError("boom")

    async def send_encoded_batch(self, batch: EncodedMessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome]:
        raise RuntimeError("boom")

    async def send_oneway(self, msg: Message, timeout_ms: int | None = None) -> str:
        raise RuntimeError("boom")


async def test_unexpected_errors_become_system_error() -> None:
    from mq_gateway.grpc_api import ProducerGatewayServicer, add_to_server

    server = grpc.aio.server()
    add_to_server(ProducerGatewayServicer(ExplodingProducer(), max_send_timeout_ms=1000, max_batch_messages=10), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        result = (await stub.Send(gateway_pb2.SendRequest(message=msg()))).result
        assert result.code == ResponseCode.SYSTEM_ERROR
        assert result.remark == "Send failed on an internal error; the service logged the cause"
        assert "RuntimeError" not in result.remark
        batch = (
            await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg(), msg(properties={"TAGS": "x"})]))
        ).results
        assert [r.code for r in batch] == [ResponseCode.SYSTEM_ERROR, ResponseCode.MESSAGE_ILLEGAL]
        oneway = await stub.SendOneway(gateway_pb2.SendOnewayRequest(message=msg()))
        assert (oneway.code, oneway.msg_id) == (ResponseCode.SYSTEM_ERROR, "")
    finally:
        await channel.close()
        await server.stop(0)


async def test_stopped_gateway_producer_reports_service_not_available(env: Env) -> None:
    await env.controller.producer.shutdown()
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=msg()))).result
    assert result.code == ResponseCode.SERVICE_NOT_AVAILABLE
    batch = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=[msg()]))).results
    assert [r.code for r in batch] == [ResponseCode.SERVICE_NOT_AVAILABLE]


async def test_send_batch_that_does_not_parse_is_invalid_argument(env: Env) -> None:
    send_batch = env.channel.unary_unary("/mq.gateway.v1.ProducerGateway/SendBatch")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await send_batch(b"\x0a\x09\x0a\x01T")  # a message cut short
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cannot decode the request as SendBatchRequest" in (info.value.details() or "")
    assert env.transport.calls == []


async def test_plain_batches_take_the_encoded_path_and_others_the_protobuf_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C path built and loaded, a plain SendBatch goes through send_encoded_batch; one with a user property
    does not (nor any under MQ_NO_EXTENSIONS=1), and both are stored with their messages' properties."""
    async with gateway_env() as env:
        await _check_paths(env, monkeypatch, wire.AVAILABLE)


async def _check_paths(env: Env, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    producer = env.controller.producer
    encoded: list[int] = []
    real = producer.send_encoded_batch

    async def counting(batch: EncodedMessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome]:
        encoded.append(len(batch.msg_ids))
        return await real(batch, timeout_ms)

    monkeypatch.setattr(producer, "send_encoded_batch", counting)
    plain = [msg(body=b"p1", tag="tg", keys=["k1", "k2"], flag=4), msg(body=b"p2")]
    results = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=plain))).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 2
    assert encoded == ([2] if native else [])
    with_property = [msg(body=b"q1", properties={"color": "red"}), msg(body=b"q2")]
    results = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=with_property))).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 2
    assert encoded == ([2] if native else [])
    stored = {r.body: decode_properties(r.properties) for _, r in env.transport.stored}
    assert stored[b"p1"]["TAGS"] == "tg"
    assert stored[b"p1"]["KEYS"] == "k1 k2"
    assert stored[b"q1"]["color"] == "red"


async def test_a_message_field_the_c_path_does_not_know_is_sent_by_the_protobuf_path(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SendBatch whose message carries field 15 (built by hand: gateway.proto has no such field yet) is served by
    protobuf, not by the C path, and every message of it is stored."""
    encoded: list[int] = []
    real = env.controller.producer.send_encoded_batch

    async def counting(batch: EncodedMessageBatch, timeout_ms: int | None = None) -> list[ChunkOutcome]:
        encoded.append(len(batch.msg_ids))
        return await real(batch, timeout_ms)

    monkeypatch.setattr(env.controller.producer, "send_encoded_batch", counting)
    with_unknown = msg(body=b"u1", tag="tg").SerializeToString() + b"\x78\x05"  # field 15, varint 5
    plain = msg(body=b"u2").SerializeToString()
    raw = b"".join(b"\x0a" + bytes([len(m)]) + m for m in (with_unknown, plain))  # messages = 1, LEN (< 128)
    send_batch = env.channel.unary_unary(
        "/mq.gateway.v1.ProducerGateway/SendBatch",
        request_serializer=None,
        response_deserializer=gateway_pb2.SendBatchResponse.FromString,
    )
    results = (await send_batch(raw, timeout=10)).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS] * 2
    assert encoded == []
    assert sorted(r.body for _, r in env.transport.stored) == [b"u1", b"u2"]
