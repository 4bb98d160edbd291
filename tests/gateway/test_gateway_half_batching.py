"""Transaction half messages take the gateway's batched hop like any message: a SendBatch of half messages of ONE
transaction (Message.transaction_id) goes as one MessageBatch (PREPARED sysflag, the transaction in the batch's
properties; this project's extension, tests/gateway/test_gateway_half_batch.py), a SendBatch mixing transaction ids
goes to each broker as multi-message sends of independent half messages, and concurrent half-message sends to one
broker coalesce into one broker call (CoalescingBrokerTransport), each request keeping its PREPARED sysflag and its
own answer."""

from __future__ import annotations

import asyncio

import grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_client.producer.testing import FakeClock, InMemoryNameServer, ScriptedBrokerTransport, make_route
from mq_common.codec import decode_properties
from mq_common.constants import MessageSysFlag
from mq_common.protocol import SendMessageRequestHeader
from mq_common.response_code import ResponseCode
from mq_gateway.coalescer import CoalescingBrokerTransport
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"
PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE


async def test_a_send_batch_of_mixed_transactions_is_one_multi_message_call_per_broker() -> None:
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B})})
    producer = DefaultMQProducer(ProducerConfig("gw_group"), ns, transport, clock_ms=clock)
    controller = GatewayController(GatewaySettings(listen_port=0, max_send_msg_timeout_ms=60_000), producer)
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        messages = [
            gateway_pb2.Message(topic="T", body=f"r{i}".encode(), transaction_id=f"job-p0-a0-t{i % 2}")
            for i in range(64)
        ]
        answer = await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages, producer_group="SPARK_job"))
    finally:
        await channel.close()
        await controller.stop(0)
    assert [r.code for r in answer.results] == [ResponseCode.SUCCESS] * 64
    assert sorted(call.addr for call in transport.calls) == [A, B], "one call per broker"
    assert all(call.batch and not call.message_batch for call in transport.calls), "independent messages"
    assert sum(len(call.requests) for call in transport.calls) == 64
    for call in transport.calls:
        for request in call.requests:
            assert request.sys_flag & PREPARED
            assert (
                decode_properties(request.properties)["__transactionId__"] == f"job-p0-a0-t{int(request.body[1:]) % 2}"
            )


async def test_concurrent_half_message_sends_coalesce_into_one_broker_call() -> None:
    inner = ScriptedBrokerTransport()
    c = CoalescingBrokerTransport(inner, linger_ms=1.0, max_batch_bytes=1 << 20, max_batch_messages=64)

    def half(i: int) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group="SPARK_job",
            topic="T",
            queue_id=i % 2,
            sys_flag=PREPARED,
            flag=i,
            properties="TRAN_MSG\x01true\x02__transactionId__\x01tx\x02",
            body=b"x",
        )

    answers = await asyncio.gather(*(c.send_message(A, half(i), 1000) for i in range(10)))
    assert len(inner.calls) == 1
    (call,) = inner.calls
    assert call.batch
    assert not call.message_batch
    assert [(r.flag, r.sys_flag) for r in call.requests] == [(i, PREPARED) for i in range(10)]
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 10
    assert c.stats.broker_calls == 1
    await c.close()
