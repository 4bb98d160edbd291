"""Delay and timer messages with recall through a real cluster and an in-process gateway, both APIs.

v2: a DELAY message (delivery_timestamp) is held by the broker and stored on its topic at its time with its delivery
time kept (the converter's delivery_timestamp and DELAY type); its recall handle recalls it (never stored), a second
recall and a recall after delivery are refused, a garbage handle is BAD_REQUEST; a delivery time beyond the limit,
in the past or malformed is ILLEGAL_DELIVERY_TIME 40012, and so is the broker's refusal of a time past
timer_max_delay_sec when the gateway's own limit is wider. v1 (mq.gateway.v1): a timer (delay_time_sec) and a delay
level (delay_time_level 1 = 1 s) arrive after their delay, a recalled timer never arrives, a garbage handle is
ILLEGAL_OPERATION 604. All timers are sent first and waited for together (one wait of a few seconds).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import timestamp_pb2
from mq_client.gateway_client import GatewayMessage, gateway_recall, gateway_send
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import MQError
from mq_common.recall_handle import decode_recall_handle
from mq_common.response_code import ResponseCode
from mq_gateway.v2.consumer.converter import message_to_v2
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all

from tests.v2.conftest import Gateway, make_typed_topic, metadata, resource, start_gateway
from tests.v2.test_v2_send_message import send, v2_message

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
DELAY_MS = 3_000
LATE_MS = 2_000  # a timer may arrive this much after its time
WAIT_S = 20.0
DAY_MS = 86_400_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def at(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=ms % 1000 * 1_000_000)


def delay_message(topic: str, deliver_ms: int, body: bytes, msg_id: str) -> definition_pb2.Message:
    return v2_message(topic, body, msg_id, message_type=definition_pb2.DELAY, delivery_timestamp=at(deliver_ms))


async def recall(gateway: Gateway, topic: str, handle: str) -> service_pb2.RecallMessageResponse:
    request = service_pb2.RecallMessageRequest(topic=resource(topic), recall_handle=handle)
    return await gateway.stub.RecallMessage(request, metadata=metadata(), timeout=10)  # type: ignore[no-any-return]


async def stored_by_body(cluster: LocalCluster, topic: str) -> dict[bytes, MessageExt]:
    return {m.body: m for _, m in await read_all(cluster.namesrv_addr, topic)}


async def wait_for(
    cluster: LocalCluster, topic: str, done: Callable[[dict[bytes, MessageExt]], bool]
) -> dict[bytes, MessageExt]:
    deadline = time.monotonic() + WAIT_S
    while True:
        stored = await stored_by_body(cluster, topic)
        if done(stored) or time.monotonic() > deadline:
            return stored
        await asyncio.sleep(0.2)


async def test_v2_delay_messages_arrive_at_their_time_and_recalled_ones_never(
    gateway: Gateway, cluster: LocalCluster
) -> None:
    topic = await make_typed_topic(cluster, "v2_timer", "DELAY", queues=2)
    due_ms = now_ms() + DELAY_MS
    kept = await send(gateway, delay_message(topic, due_ms, b"kept", "0102FC000000013D600B1777E8000000A1"))
    gone = await send(gateway, delay_message(topic, due_ms, b"recalled", "0102FC000000013D600B1777E8000000A2"))
    assert [kept.status.code, gone.status.code] == [Code.OK, Code.OK], (kept.status, gone.status)
    (entry,) = kept.entries
    handle = decode_recall_handle(entry.recall_handle)
    assert (handle.topic, handle.deliver_ms, handle.uniq_key) == (topic, due_ms, entry.message_id)

    recalled = await recall(gateway, topic, gone.entries[0].recall_handle)
    assert (recalled.status.code, recalled.message_id) == (Code.OK, gone.entries[0].message_id), recalled.status
    again = await recall(gateway, topic, gone.entries[0].recall_handle)
    assert again.status.code == Code.BAD_REQUEST, again.status
    assert await stored_by_body(cluster, topic) == {}, "nothing is on the topic before its time"

    stored = await wait_for(cluster, topic, lambda s: b"kept" in s)
    message = stored[b"kept"]
    assert due_ms <= message.store_timestamp_ms <= due_ms + LATE_MS, message.store_timestamp_ms - due_ms
    system = message_to_v2(message).system_properties
    assert system.message_type == definition_pb2.DELAY
    assert system.delivery_timestamp.ToMilliseconds() == due_ms
    assert system.message_id == entry.message_id

    await asyncio.sleep(LATE_MS / 1000)
    assert set(await stored_by_body(cluster, topic)) == {b"kept"}, "the recalled message never arrives"
    too_late = await recall(gateway, topic, entry.recall_handle)
    assert too_late.status.code == Code.BAD_REQUEST, too_late.status


@pytest.mark.parametrize(
    ("timestamp", "message"),
    [
        (lambda: at(now_ms() + 4 * DAY_MS), "max delay time of message is too large"),
        (lambda: timestamp_pb2.Timestamp(seconds=(now_ms() + 4 * DAY_MS) // 1000 * 1000), "too large"),
        (lambda: at(now_ms() - 10_000), "in the past"),
        (lambda: timestamp_pb2.Timestamp(seconds=now_ms() // 1000 + 5, nanos=-3), "malformed"),
    ],
)
async def test_v2_bad_delivery_times_are_illegal_delivery_time(
    timestamp: Callable[[], timestamp_pb2.Timestamp], message: str, gateway: Gateway, cluster: LocalCluster
) -> None:
    topic = await make_typed_topic(cluster, "v2_timer_bad", "DELAY", queues=1)
    msg = v2_message(topic, message_type=definition_pb2.DELAY, delivery_timestamp=timestamp())
    answer = await send(gateway, msg)
    assert answer.status.code == Code.ILLEGAL_DELIVERY_TIME, answer.status
    assert message in answer.status.message
    assert answer.entries[0].recall_handle == ""


async def test_v2_the_brokers_timer_limit_is_illegal_delivery_time_too(cluster: LocalCluster) -> None:
    wide = await start_gateway(cluster, max_delay_time_ms=10 * DAY_MS)
    try:
        topic = await make_typed_topic(cluster, "v2_timer_broker", "DELAY", queues=1)
        answer = await send(wide, v2_message(topic, delivery_timestamp=at(now_ms() + 5 * DAY_MS)))
    finally:
        await wide.channel.close()
        await wide.controller.stop(0)
    assert answer.status.code == Code.ILLEGAL_DELIVERY_TIME, answer.status
    assert "timerMaxDelaySec" in answer.status.message
    assert await read_all(cluster.namesrv_addr, topic) == []


@pytest.mark.parametrize("handle", ["", "garbage!", "djIgVCBiIDEgVQ=="])
async def test_v2_garbage_recall_handles_are_bad_request(handle: str, gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_typed_topic(cluster, "v2_recall_bad", "DELAY", queues=1)
    answer = await recall(gateway, topic, handle)
    assert answer.status.code == Code.BAD_REQUEST
    assert answer.status.message == "recall handle is invalid"


async def test_v1_timers_and_delay_levels_arrive_after_their_delay_and_recalled_ones_never(
    gateway: Gateway, cluster: LocalCluster
) -> None:
    topic = await make_typed_topic(cluster, "v1_timer", "DELAY", queues=2)
    pool = ChannelPool()
    addr = gateway.controller.addr
    try:
        before = now_ms()
        timer = await gateway_send(pool, addr, GatewayMessage(topic, b"timer", delay_time_sec=DELAY_MS // 1000))
        level = await gateway_send(pool, addr, GatewayMessage(topic, b"level", delay_time_level=1))
        gone = await gateway_send(pool, addr, GatewayMessage(topic, b"recalled", deliver_time_ms=before + DELAY_MS))
        due_ms = decode_recall_handle(timer.recall_handle).deliver_ms
        assert before + DELAY_MS <= due_ms <= now_ms() + DELAY_MS
        assert level.recall_handle == ""
        assert await gateway_recall(pool, addr, topic, gone.recall_handle) == gone.msg_id
        with pytest.raises(MQError, match="recall handle is invalid") as garbage:
            await gateway_recall(pool, addr, topic, "garbage!")
        assert garbage.value.code == ResponseCode.ILLEGAL_OPERATION
        with pytest.raises(MQError) as past:
            await gateway_send(pool, addr, GatewayMessage(topic, b"past", deliver_time_ms=before - 10_000))
        assert past.value.code == ResponseCode.MESSAGE_ILLEGAL
    finally:
        await pool.close()

    stored = await wait_for(cluster, topic, lambda s: {b"timer", b"level"} <= set(s))
    assert due_ms <= stored[b"timer"].store_timestamp_ms <= due_ms + LATE_MS
    assert stored[b"timer"].properties["TIMER_DELIVER_MS"] == str(due_ms)
    assert before + 1_000 <= stored[b"level"].store_timestamp_ms <= now_ms()
    await asyncio.sleep(max(0.0, (before + DELAY_MS + LATE_MS - now_ms()) / 1000))
    assert b"recalled" not in await stored_by_body(cluster, topic)
