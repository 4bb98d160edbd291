"""The gateway's half messages and whole-transaction EndTransaction (this project's extension): Message.transaction_id
sends a half message on the one send path (TRAN_MSG, PGROUP = the request's group, __transactionId__, the PREPARED
sysflag), ProducerGateway.EndTransaction fans one scope-TRANSACTION (or PRODUCER_GROUP) end out to every broker of the
topic's route and sums the counts; bad requests get INVALID_PARAMETER, a broker's refusal its code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_client.producer.testing import FakeClock, InMemoryNameServer, ScriptedBrokerTransport, make_route
from mq_common.codec import decode_properties
from mq_common.constants import MessageSysFlag
from mq_common.errors import MQBrokerError
from mq_common.protocol.transaction import EndTransactionRequestHeader, EndTransactionScope, whole_end_remark
from mq_common.response_code import ResponseCode
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


class Ender:
    """Answers broker EndTransaction calls as a broker would, and records them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, EndTransactionRequestHeader, int]] = []
        self.refuse: dict[str, MQBrokerError] = {}

    async def end_transaction(
        self, addr: str, header: EndTransactionRequestHeader, broker_name: str, timeout_ms: int
    ) -> str:
        self.calls.append((addr, header, timeout_ms))
        if broker_name in self.refuse:
            raise self.refuse[broker_name]
        return whole_end_remark(3 if addr == A else 2, 1, 0)

    async def recall_message(self, *args: object, **kwargs: object) -> str:
        raise AssertionError("not used")


@asynccontextmanager
async def gateway(
    ender: Ender,
) -> AsyncIterator[tuple[gateway_pb2_grpc.ProducerGatewayAsyncStub, ScriptedBrokerTransport]]:
    settings = GatewaySettings(listen_port=0, max_send_msg_timeout_ms=60_000)
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B})})
    producer = DefaultMQProducer(ProducerConfig("gw_group"), ns, transport, clock_ms=clock, recaller=ender)
    controller = GatewayController(settings, producer)
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        yield gateway_pb2_grpc.ProducerGatewayStub(channel), transport
    finally:
        await channel.close()
        await controller.stop(0)


async def test_a_message_with_a_transaction_id_is_a_half_message_of_the_requests_group() -> None:
    async with gateway(Ender()) as (stub, transport):
        request = gateway_pb2.SendBatchRequest(
            messages=[gateway_pb2.Message(topic="T", body=b"r1", transaction_id="job-p0-a0-t7")] * 2,
            producer_group="SPARK_PRODUCER_job",
        )
        answer = await stub.SendBatch(request)
        assert [r.code for r in answer.results] == [ResponseCode.SUCCESS] * 2
        for _addr, sent in transport.stored:
            props = decode_properties(sent.properties)
            assert (props["TRAN_MSG"], props["PGROUP"], props["__transactionId__"]) == (
                "true",
                "SPARK_PRODUCER_job",
                "job-p0-a0-t7",
            )
            assert sent.sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE
        delayed = gateway_pb2.Message(topic="T", body=b"x", transaction_id="t", delay_time_level=2)
        refused = await stub.Send(gateway_pb2.SendRequest(message=delayed, producer_group="G"))
        assert refused.result.code == ResponseCode.MESSAGE_ILLEGAL
        no_group = await stub.Send(
            gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="T", body=b"x", transaction_id="t"))
        )
        assert no_group.result.code == ResponseCode.MESSAGE_ILLEGAL


async def test_end_transaction_reaches_every_broker_and_sums_the_counts() -> None:
    ender = Ender()
    async with gateway(ender) as (stub, _transport):
        answer = await stub.EndTransaction(
            gateway_pb2.EndTransactionRequest(topic="T", producer_group="G", transaction_id="t1", commit=True)
        )
        assert (answer.code, answer.ended_count, answer.already_ended) == (ResponseCode.SUCCESS, 5, 2), answer.remark
        assert sorted(answer.broker_names) == ["broker-a", "broker-b"]
        assert sorted(addr for addr, _, _ in ender.calls) == [A, B]
        for _addr, header, _timeout in ender.calls:
            assert (header.producer_group, header.transaction_id, header.scope) == (
                "G",
                "t1",
                EndTransactionScope.TRANSACTION,
            )
            assert header.commit_or_rollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        ender.calls.clear()
        rollback = await stub.EndTransaction(
            gateway_pb2.EndTransactionRequest(topic="T", producer_group="G", whole_producer_group=True)
        )
        assert rollback.code == ResponseCode.SUCCESS
        assert {h.scope for _, h, _ in ender.calls} == {EndTransactionScope.PRODUCER_GROUP}
        assert {h.commit_or_rollback for _, h, _ in ender.calls} == {MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}

        ender.refuse["broker-b"] = MQBrokerError("half messages were rolled back", ResponseCode.ILLEGAL_OPERATION)
        refused = await stub.EndTransaction(
            gateway_pb2.EndTransactionRequest(topic="T", producer_group="G", transaction_id="t1", commit=True)
        )
        assert (refused.code, list(refused.broker_names)) == (ResponseCode.ILLEGAL_OPERATION, ["broker-a"])
        assert "broker broker-b" in refused.remark


async def test_bad_end_transaction_requests_are_refused() -> None:
    ender = Ender()
    async with gateway(ender) as (stub, _transport):
        bad = [
            gateway_pb2.EndTransactionRequest(topic="T", transaction_id="t", commit=True),
            gateway_pb2.EndTransactionRequest(topic="T", producer_group="G", commit=True),
            gateway_pb2.EndTransactionRequest(
                topic="T", producer_group="G", transaction_id="t", whole_producer_group=True
            ),
            gateway_pb2.EndTransactionRequest(topic="T", producer_group="G", whole_producer_group=True, commit=True),
        ]
        for request in bad:
            answer = await stub.EndTransaction(request)
            assert answer.code == ResponseCode.INVALID_PARAMETER, request
        unknown = await stub.EndTransaction(
            gateway_pb2.EndTransactionRequest(topic="Nope", producer_group="G", transaction_id="t", commit=True)
        )
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST, unknown.remark
        assert ender.calls == []
