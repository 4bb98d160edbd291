"""Helpers of the consumer-state tests: polling for a condition with a generous deadline, and the consumer RPCs
of an in-process broker (broker_grpc_testkit) with their common arguments."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from broker_grpc_testkit import send_request, stream_send_batch
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq_common.response_code import ResponseCode

DEADLINE_S = 30.0
POLL_INTERVAL_S = 0.01


async def wait_until(check: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    """Poll ``check`` without blocking the event loop; AssertionError when it is still false at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"condition not met within {timeout_s} s"
        await asyncio.sleep(POLL_INTERVAL_S)


def wait_until_blocking(check: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    """:func:`wait_until` for a test without an event loop (it sleeps the thread)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"condition not met within {timeout_s} s"
        time.sleep(POLL_INTERVAL_S)


async def create_topic(stub: broker_pb2_grpc.BrokerAsyncStub, topic: str, queue_nums: int = 4) -> None:
    """CreateTopic with ``queue_nums`` read and write queues (must succeed)."""
    config = common_pb2.TopicConfig(topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=6)
    created = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config))
    assert created.code == ResponseCode.SUCCESS, created.remark


async def send_to_queue(
    stub: broker_pb2_grpc.BrokerAsyncStub, topic: str, queue_id: int, count: int
) -> list[broker_pb2.SendMessageResponse]:
    """``count`` messages to one queue in one frame (each must be stored)."""
    answers = await stream_send_batch(
        stub, *(send_request(topic, f"m{i}".encode(), queue_id=queue_id) for i in range(count))
    )
    assert all(a.code == ResponseCode.SUCCESS for a in answers), [a.remark for a in answers]
    return answers


def offset(group: str, topic: str, queue_id: int, value: int) -> broker_pb2.ConsumerQueueOffset:
    return broker_pb2.ConsumerQueueOffset(consumer_group=group, topic=topic, queue_id=queue_id, offset=value)


async def commit(stub: broker_pb2_grpc.BrokerAsyncStub, *offsets: broker_pb2.ConsumerQueueOffset) -> list[int]:
    """UpdateConsumerOffsets; the per-offset codes."""
    answer = await stub.UpdateConsumerOffsets(broker_pb2.UpdateConsumerOffsetsRequest(offsets=offsets))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert len(answer.codes) == len(answer.remarks) == len(offsets)
    return list(answer.codes)


async def query(
    stub: broker_pb2_grpc.BrokerAsyncStub, group: str, topic: str, queue_id: int, set_zero: bool = False
) -> broker_pb2.QueryConsumerOffsetResponse:
    request = broker_pb2.QueryConsumerOffsetRequest(
        consumer_group=group, topic=topic, queue_id=queue_id, set_zero_if_not_found=set_zero
    )
    return await stub.QueryConsumerOffset(request)


def heartbeat(client_id: str, group: str, *topics: str) -> broker_pb2.HeartbeatRequest:
    """A push consumer's heartbeat subscribing to ``topics`` with every tag."""
    return broker_pb2.HeartbeatRequest(
        client_id=client_id,
        consumer_group=group,
        consume_type=broker_pb2.CONSUME_TYPE_CONSUME_PASSIVELY,
        message_model=broker_pb2.MESSAGE_MODEL_CLUSTERING,
        subscriptions=[broker_pb2.SubscriptionData(topic=t, sub_string="*") for t in topics],
        language="PYTHON",
        version="V5_3_0",
    )
