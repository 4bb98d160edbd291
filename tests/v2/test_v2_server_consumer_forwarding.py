"""The servicer forwards the consumer RPCs to its ConsumerActivities (an in-test fake here; the real one is
mq_gateway.v2.consumer) with the client context and remaining deadline, and turns anything a handler raises into
an in-band status: unexpected errors INTERNAL_SERVER_ERROR, MQError through the codes table."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.errors import MQBrokerError
from mq_common.response_code import ResponseCode
from mq_gateway.v2.context import ClientContext
from mq_local.cluster import LocalCluster
from unwired_consumer import UnwiredConsumer

from tests.v2.conftest import Gateway, metadata, start_gateway

pytestmark = pytest.mark.integration
Code = definition_pb2.Code


class RecordingConsumer(UnwiredConsumer):
    """Answers OK and records what it was given; AckMessage fails unexpectedly, GetOffset with a broker code."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float | None]] = []

    async def receive_message(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        self.seen.append(("receive", ctx.client_id, time_remaining_ms))
        yield service_pb2.ReceiveMessageResponse(status=definition_pb2.Status(code=Code.OK, message="OK"))
        yield service_pb2.ReceiveMessageResponse(message=definition_pb2.Message(body=b"m"))
        if request.batch_size == 13:
            raise RuntimeError("broken mid-stream")

    async def query_offset(
        self, request: service_pb2.QueryOffsetRequest, ctx: ClientContext
    ) -> service_pb2.QueryOffsetResponse:
        self.seen.append(("query_offset", ctx.client_id, None))
        return service_pb2.QueryOffsetResponse(status=definition_pb2.Status(code=Code.OK), offset=42)

    async def ack_message(
        self, request: service_pb2.AckMessageRequest, ctx: ClientContext
    ) -> service_pb2.AckMessageResponse:
        raise RuntimeError("unexpected")

    async def get_offset(
        self, request: service_pb2.GetOffsetRequest, ctx: ClientContext
    ) -> service_pb2.GetOffsetResponse:
        raise MQBrokerError("no such group", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)


@pytest.fixture
async def forwarding(cluster: LocalCluster) -> AsyncIterator[tuple[Gateway, RecordingConsumer]]:
    consumer = RecordingConsumer()
    gateway = await start_gateway(cluster, consumer=consumer)
    try:
        yield gateway, consumer
    finally:
        await gateway.channel.close()
        await gateway.controller.stop(0)


async def test_consumer_rpcs_are_forwarded_with_context_and_deadline(
    forwarding: tuple[Gateway, RecordingConsumer],
) -> None:
    gateway, consumer = forwarding
    stream = gateway.stub.ReceiveMessage(service_pb2.ReceiveMessageRequest(), metadata=metadata("c1"), timeout=30)
    answers = [a async for a in stream]
    assert [a.WhichOneof("content") for a in answers] == ["status", "message"]
    offset = await gateway.stub.QueryOffset(service_pb2.QueryOffsetRequest(), metadata=metadata("c1"))
    assert (offset.status.code, offset.offset) == (Code.OK, 42)
    (receive, query) = consumer.seen
    assert receive[:2] == ("receive", "c1")
    assert receive[2] is not None
    # the deadline travels as a gRPC timeout header re-based on the server's clock: about the client's 30 s, never
    # far above it (a little above when the header's unit rounds up)
    assert 0 < receive[2] <= 31_000
    assert query == ("query_offset", "c1", None)


async def test_handler_failures_answer_in_band(forwarding: tuple[Gateway, RecordingConsumer]) -> None:
    gateway, _ = forwarding
    ack = await gateway.stub.AckMessage(service_pb2.AckMessageRequest(), metadata=metadata(), timeout=10)
    assert ack.status.code == Code.INTERNAL_SERVER_ERROR
    assert "internal error" in ack.status.message
    assert "Error" not in ack.status.message  # no exception type or text
    got = await gateway.stub.GetOffset(service_pb2.GetOffsetRequest(), metadata=metadata(), timeout=10)
    assert got.status.code == Code.CONSUMER_GROUP_NOT_FOUND
    stream = gateway.stub.ReceiveMessage(service_pb2.ReceiveMessageRequest(batch_size=13), metadata=metadata())
    answers = [a async for a in stream]
    assert answers[-1].status.code == Code.INTERNAL_SERVER_ERROR
    anonymous = gateway.stub.ReceiveMessage(service_pb2.ReceiveMessageRequest(), timeout=10)
    assert [a.status.code async for a in anonymous] == [Code.CLIENT_ID_REQUIRED]
