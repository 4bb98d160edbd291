"""Helpers of the POP tests: an in-process broker whose POP accepts 1 s invisible times and revives every 100 ms,
sends, and pop / ack / change-invisible calls over the broker's gRPC API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_grpc_testkit import RunningBrokers, send_request, stream_send_batch
from mq.broker.v1 import broker_pb2
from mq_broker.controller import BrokerController
from mq_common.codec import MessageExt, decode_message
from mq_common.protocol import TopicConfig
from mq_common.protocol.convert import topic_config_to_proto
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    from mq.broker.v1 import broker_pb2_grpc

    Stub = broker_pb2_grpc.BrokerAsyncStub

GROUP = "pop_group"
RPC_TIMEOUT_S = 30.0
POP_SETTINGS: dict[str, Any] = {"revive_interval_ms": 100, "pop_invisible_time_min_ms": 1_000}


@asynccontextmanager
async def pop_broker(root: Path, **overrides: Any) -> AsyncIterator[tuple[BrokerController, Stub]]:
    """One in-process broker (broker_grpc_testkit settings plus POP_SETTINGS and ``overrides``), stopped after."""
    running = RunningBrokers()
    try:
        yield await running.start(root, **{**POP_SETTINGS, **overrides})
    finally:
        await running.stop_all()


async def create_topic(stub: Stub, topic: str, queues: int = 4) -> None:
    config = topic_config_to_proto(TopicConfig(topic, queues, queues))
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config), timeout=RPC_TIMEOUT_S)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def send(stub: Stub, topic: str, bodies: Sequence[bytes], queue_id: int = 0, **props: str) -> None:
    """Store ``bodies`` on ``topic``/``queue_id`` (each with UNIQ_KEY = its body)."""
    requests = [send_request(topic, body, queue_id, UNIQ_KEY=body.decode(), **props) for body in bodies]
    for reply in await stream_send_batch(stub, *requests):
        assert reply.code == ResponseCode.SUCCESS, reply.remark


async def pop(
    stub: Stub,
    topic: str,
    *,
    max_msg_nums: int = 32,
    invisible_time_ms: int = 60_000,
    poll_time_ms: int = 0,
    group: str = GROUP,
    queue_id: int = -1,
    expression: str = "",
    init_mode: int = 1,
    acks: Sequence[str] = (),
) -> broker_pb2.PopMessageResponse:
    """One PopMessage; ``acks``: receipt handles it acks first (ack_receipt_handles)."""
    request = broker_pb2.PopMessageRequest(
        consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_msg_nums,
        invisible_time_ms=invisible_time_ms, poll_time_ms=poll_time_ms, expression=expression, init_mode=init_mode,
        ack_receipt_handles=acks,
    )  # fmt: skip
    return await stub.PopMessage(request, timeout=RPC_TIMEOUT_S + poll_time_ms / 1000)


def popped(reply: broker_pb2.PopMessageResponse) -> list[tuple[MessageExt, str]]:
    """(decoded message, receipt handle) of every popped message."""
    return [(decode_message(m.message), m.receipt_handle) for m in reply.messages]


async def ack(stub: Stub, topic: str, handles: Sequence[str], group: str = GROUP) -> broker_pb2.AckMessageResponse:
    request = broker_pb2.AckMessageRequest(consumer_group=group, topic=topic, receipt_handles=list(handles))
    return await stub.AckMessage(request, timeout=RPC_TIMEOUT_S)


async def change_invisible(
    stub: Stub, topic: str, handle: str, invisible_time_ms: int, group: str = GROUP
) -> broker_pb2.ChangeInvisibleTimeResponse:
    request = broker_pb2.ChangeInvisibleTimeRequest(
        consumer_group=group, topic=topic, receipt_handle=handle, invisible_time_ms=invisible_time_ms
    )
    return await stub.ChangeInvisibleTime(request, timeout=RPC_TIMEOUT_S)


async def pop_all(stub: Stub, topic: str, want: int, **kwargs: Any) -> list[tuple[MessageExt, str]]:
    """Pop (polling 1 s at a time) until ``want`` messages came, at most 60 polls."""
    out: list[tuple[MessageExt, str]] = []
    for _ in range(60):
        if len(out) >= want:
            break
        reply = await pop(stub, topic, poll_time_ms=1_000, **kwargs)
        assert reply.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), (reply.code, reply.remark)
        out.extend(popped(reply))
    return out
