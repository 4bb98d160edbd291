"""Helpers for the delay-level and timer tests: a broker with fast delay levels, sends of held messages, and pulls of
what a real topic received."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from broker_grpc_testkit import RunningBrokers, send_request, stream_send
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.codec import MessageExt, iter_messages

TOPIC = "Timed"
FAST_LEVELS = "200ms 400ms 600ms"
WAIT_S = 15.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def start(brokers: RunningBrokers, root: Path, **overrides: Any) -> tuple[BrokerController, Any]:
    """A broker with FAST_LEVELS and the topic-type check off (the type check has tests of its own)."""
    values: dict[str, Any] = {"message_delay_level": FAST_LEVELS, "enable_topic_message_type_check": False}
    values.update(overrides)
    return await brokers.start(root, **values)


async def send(stub: broker_pb2_grpc.BrokerAsyncStub, uniq: str, queue_id: int = 1, **props: str) -> Any:
    return await stream_send(stub, send_request(TOPIC, uniq.encode(), queue_id, UNIQ_KEY=uniq, TAGS="T", **props))


async def pulled(stub: broker_pb2_grpc.BrokerAsyncStub, queue_id: int = 1, topic: str = TOPIC) -> list[MessageExt]:
    resp = await stub.PullMessage(
        broker_pb2.PullMessageRequest(
            consumer_group="G", topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=32
        )
    )
    return list(iter_messages(resp.message_bytes)) if resp.status == broker_pb2.PULL_STATUS_FOUND else []


async def wait_for(stub: broker_pb2_grpc.BrokerAsyncStub, count: int, queue_id: int = 1) -> list[MessageExt]:
    """The queue's messages once there are ``count`` (TimeoutError after WAIT_S)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            found = await pulled(stub, queue_id)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.02)
