"""v1 delays and recall through the gateway servicer (real gRPC in-process, the producer core on in-memory
brokers): the delay fields of mq.gateway.v1.Message, a timer's recall handle in its SendResult, the per-message path
for delayed messages of a SendBatch (never a MessageBatch, never the C path), and RecallMessage's answers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.gateway_client import GatewayMessage, gateway_recall, gateway_send
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_client.producer.testing import FakeClock, InMemoryNameServer, ScriptedBrokerTransport, make_route
from mq_common.channels import ChannelPool
from mq_common.codec import decode_properties
from mq_common.errors import MQBrokerError, MQError
from mq_common.recall_handle import build_recall_handle, decode_recall_handle
from mq_common.response_code import ResponseCode
from mq_gateway import wire
from mq_gateway.controller import GatewayController
from mq_gateway.grpc_api import batch_from_protos
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"
ADDRS = {"broker-a": A, "broker-b": B}


@dataclass
class FakeRecaller:
    """A BrokerClient's recall_message: records calls, answers the handle's UNIQ_KEY or raises ``error``."""

    error: MQError | None = None
    calls: list[tuple[str, str, str, str, str, int]] = field(default_factory=list)

    async def recall_message(
        self, addr: str, producer_group: str, topic: str, recall_handle: str, broker_name: str, timeout_ms: int
    ) -> str:
        self.calls.append((addr, producer_group, topic, recall_handle, broker_name, timeout_ms))
        if self.error is not None:
            raise self.error
        return decode_recall_handle(recall_handle).uniq_key


@dataclass
class Env:
    controller: GatewayController
    transport: ScriptedBrokerTransport
    recaller: FakeRecaller
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub


@asynccontextmanager
async def gateway_env(recaller: FakeRecaller | None = None) -> AsyncIterator[Env]:
    settings = GatewaySettings(listen_port=0, max_send_msg_timeout_ms=10_000)
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    recaller = recaller or FakeRecaller()
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs=ADDRS)})
    producer = DefaultMQProducer(ProducerConfig("gw_group"), ns, transport, clock_ms=clock, recaller=recaller)
    controller = GatewayController(settings, producer)
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        yield Env(controller, transport, recaller, gateway_pb2_grpc.ProducerGatewayStub(channel))
    finally:
        await channel.close()
        await controller.stop(0)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with gateway_env() as made:
        yield made


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_a_timer_message_is_stored_with_its_time_and_answered_with_its_recall_handle(env: Env) -> None:
    due_ms = now_ms() + 5_000
    message = gateway_pb2.Message(topic="T", body=b"x", deliver_time_ms=due_ms)
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=message))).result
    assert result.code == ResponseCode.SUCCESS
    props = decode_properties(env.transport.stored[-1][1].properties)
    assert props["TIMER_DELIVER_MS"] == str(due_ms)
    handle = decode_recall_handle(result.recall_handle)
    assert (handle.topic, handle.broker_name, handle.deliver_ms, handle.uniq_key) == (
        "T",
        result.broker_name,
        due_ms,
        result.msg_id,
    )


async def test_a_relative_delay_becomes_the_delivery_time_of_its_handle(env: Env) -> None:
    before = now_ms()
    message = gateway_pb2.Message(topic="T", body=b"x", delay_time_sec=3)
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=message))).result
    props = decode_properties(env.transport.stored[-1][1].properties)
    due_ms = int(props["TIMER_DELIVER_MS"])
    assert before + 3_000 <= due_ms <= now_ms() + 3_000
    assert decode_recall_handle(result.recall_handle).deliver_ms == due_ms


async def test_a_delay_level_is_the_delay_property_without_a_handle(env: Env) -> None:
    message = gateway_pb2.Message(topic="T", body=b"x", delay_time_level=2)
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=message))).result
    assert result.code == ResponseCode.SUCCESS
    assert decode_properties(env.transport.stored[-1][1].properties)["DELAY"] == "2"
    assert result.recall_handle == ""


@pytest.mark.parametrize(
    ("message", "remark"),
    [
        (gateway_pb2.Message(topic="T", body=b"x", delay_time_level=1, delay_time_ms=5), "takes one of"),
        (gateway_pb2.Message(topic="T", body=b"x", delay_time_sec=-3), "must not be negative"),
        (gateway_pb2.Message(topic="T", body=b"x", properties={"DELAY": "3"}), "used by system: DELAY"),
        (gateway_pb2.Message(topic="T", body=b"x", properties={"TIMER_DELIVER_MS": "1"}), "used by system"),
    ],
)
async def test_bad_delays_are_message_illegal(env: Env, message: gateway_pb2.Message, remark: str) -> None:
    result = (await env.stub.Send(gateway_pb2.SendRequest(message=message))).result
    assert result.code == ResponseCode.MESSAGE_ILLEGAL
    assert remark in result.remark
    assert env.transport.stored == []


async def test_send_batch_sends_delayed_messages_one_by_one(env: Env) -> None:
    due_ms = now_ms() + 60_000
    messages = [
        gateway_pb2.Message(topic="T", body=b"a", deliver_time_ms=due_ms),
        gateway_pb2.Message(topic="T", body=b"b"),
    ]
    assert batch_from_protos(messages) is None
    if wire.AVAILABLE:
        assert wire.scan_send_batch(gateway_pb2.SendBatchRequest(messages=messages).SerializeToString()) is None
    results = (await env.stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages))).results
    assert [r.code for r in results] == [ResponseCode.SUCCESS, ResponseCode.SUCCESS]
    assert not any(call.message_batch for call in env.transport.calls)
    assert decode_recall_handle(results[0].recall_handle).deliver_ms == due_ms
    assert results[1].recall_handle == ""


async def test_recall_goes_to_the_handles_broker_and_answers_its_id(env: Env) -> None:
    handle = build_recall_handle("T", "broker-b", now_ms() + 60_000, "UNIQ7")
    answer = await env.stub.RecallMessage(gateway_pb2.RecallMessageRequest(topic="T", recall_handle=handle))
    assert (answer.code, answer.msg_id) == (ResponseCode.SUCCESS, "UNIQ7")
    assert env.recaller.calls == [(B, "gw_group", "T", handle, "broker-b", 3000)]


@pytest.mark.parametrize(
    ("topic", "handle", "code", "remark"),
    [
        ("T", "garbage!", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        ("T", "", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        ("bad topic!", build_recall_handle("T", "broker-a", 1, "U"), ResponseCode.MESSAGE_ILLEGAL, "illegal"),
        ("T", build_recall_handle("T", "broker-z", 1, "U"), ResponseCode.BROKER_NOT_EXIST, "broker-z"),
    ],
)
async def test_bad_recalls_are_refused_with_a_code(env: Env, topic: str, handle: str, code: int, remark: str) -> None:
    answer = await env.stub.RecallMessage(gateway_pb2.RecallMessageRequest(topic=topic, recall_handle=handle))
    assert answer.code == code
    assert remark in answer.remark
    assert env.recaller.calls == []


async def test_the_brokers_refusal_of_a_recall_is_answered_as_it_is() -> None:
    refusal = MQBrokerError("recall failed, timestamp invalid", ResponseCode.ILLEGAL_OPERATION, "broker-a")
    async with gateway_env(FakeRecaller(error=refusal)) as env:
        handle = build_recall_handle("T", "broker-a", now_ms() - 1, "U")
        answer = await env.stub.RecallMessage(gateway_pb2.RecallMessageRequest(topic="T", recall_handle=handle))
    assert (answer.code, answer.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")


async def test_the_gateway_client_sends_a_timer_and_recalls_it(env: Env) -> None:
    pool = ChannelPool()
    try:
        due_ms = now_ms() + 30_000
        sent = await gateway_send(pool, env.controller.addr, GatewayMessage("T", b"x", deliver_time_ms=due_ms))
        assert decode_recall_handle(sent.recall_handle).deliver_ms == due_ms
        assert await gateway_recall(pool, env.controller.addr, "T", sent.recall_handle) == sent.msg_id
        with pytest.raises(MQError, match="recall handle is invalid"):
            await gateway_recall(pool, env.controller.addr, "T", "nope")
    finally:
        await pool.close()
