"""Orderly POP over the broker's gRPC API, in process (a group with consumeMessageOrderly=true): an un-acked
invisible message blocks its queue, comes back first with its reconsume times one higher, acks move the consume
offset, a retried attempt id gets the same messages, past retryMaxTimes the message goes to %DLQ% and the queue
moves on, a parked pop wakes when the blocking message turns visible, config/consumerOrderInfo.json keeps the
state, and the state of deleted topics, groups and queues and of idle queues is cleaned."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from consumer_testkit import wait_until
from mq.broker.v1 import broker_pb2
from mq_broker.consumer.pop.order_info import CLEAN_SPAN_FROM_LAST_MS, ConsumerOrderInfoManager
from mq_broker.controller import BrokerController
from mq_common.codec import decode_message
from mq_common.constants import dlq_topic
from mq_common.protocol import PopMessageRequestHeader, ReceiptHandle, SubscriptionGroupConfig
from mq_common.protocol.convert import subscription_group_config_to_proto
from mq_common.response_code import ResponseCode
from pop_testkit import GROUP, ack, change_invisible, create_topic, pop, pop_broker, popped, send

if TYPE_CHECKING:
    from pop_testkit import Stub

TOPIC = "OrderTopic"
INVISIBLE_MS = 1_000


async def orderly_group(stub: Stub, retry_max_times: int = 16) -> None:
    config = SubscriptionGroupConfig(GROUP, consume_message_orderly=True, retry_max_times=retry_max_times)
    request = broker_pb2.UpdateSubscriptionGroupRequest(config=subscription_group_config_to_proto(config))
    assert (await stub.UpdateSubscriptionGroup(request)).code == ResponseCode.SUCCESS


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    async with pop_broker(tmp_path / "store") as started:
        await create_topic(started[1], TOPIC, queues=1)
        await orderly_group(started[1])
        await send(started[1], TOPIC, [b"m0", b"m1", b"m2", b"m3"])
        yield started


def bodies(reply: broker_pb2.PopMessageResponse) -> list[tuple[bytes, int]]:
    return [(m.body, m.reconsume_times) for m, _ in popped(reply)]


async def test_unacked_message_blocks_its_queue_then_comes_back_first(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    first = await pop(stub, TOPIC, max_msg_nums=2, invisible_time_ms=INVISIBLE_MS)
    assert bodies(first) == [(b"m0", 0), (b"m1", 0)]
    handles = [h for _, h in popped(first)]
    assert ReceiptHandle.decode(handles[0]).revive_queue_id == 999
    assert (await pop(stub, TOPIC, invisible_time_ms=INVISIBLE_MS)).code == ResponseCode.POLLING_TIMEOUT
    assert (await ack(stub, TOPIC, handles[:1])).code == ResponseCode.SUCCESS
    assert controller.consumer_offsets is not None
    assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 1
    assert (await pop(stub, TOPIC, invisible_time_ms=INVISIBLE_MS)).code == ResponseCode.POLLING_TIMEOUT  # m1 held
    await asyncio.sleep(INVISIBLE_MS / 1000 + 0.1)
    again = await pop(stub, TOPIC, invisible_time_ms=INVISIBLE_MS)
    assert bodies(again) == [(b"m1", 1), (b"m2", 0), (b"m3", 0)]
    stale = await ack(stub, TOPIC, handles[1:])  # m1's first handle: handed out again since
    assert stale.code == ResponseCode.NO_MESSAGE, stale.remark
    assert (await ack(stub, TOPIC, [h for _, h in popped(again)])).code == ResponseCode.SUCCESS
    assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 4
    assert (await pop(stub, TOPIC)).code == ResponseCode.POLLING_TIMEOUT
    assert controller.pop is not None
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 0  # no checkpoint, nothing to revive


async def test_acks_out_of_order_move_the_offset_to_the_first_unacked(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    handles = [h for _, h in popped(await pop(stub, TOPIC, max_msg_nums=3))]
    assert (await ack(stub, TOPIC, handles[1:])).code == ResponseCode.SUCCESS
    assert controller.consumer_offsets is not None
    assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 0
    assert (await ack(stub, TOPIC, handles[:1])).code == ResponseCode.SUCCESS
    assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 3
    assert bodies(await pop(stub, TOPIC)) == [(b"m3", 0)]


async def test_a_retried_attempt_id_gets_the_same_messages(broker: tuple[BrokerController, Stub]) -> None:
    controller, _stub = broker
    assert controller.pop is not None
    service = controller.pop

    async def pop_attempt(attempt_id: str) -> list[tuple[bytes, int]]:
        header = PopMessageRequestHeader(
            consumer_group=GROUP,
            topic=TOPIC,
            max_msg_nums=2,
            invisible_time_ms=60_000,
            queue_id=0,
            init_mode=1,
            attempt_id=attempt_id,
        )
        reply = await service.pop(header)
        return [((m := decode_message(p.message)).body, m.reconsume_times) for p in reply.messages]

    assert await pop_attempt("attempt-1") == [(b"m0", 0), (b"m1", 0)]
    assert await pop_attempt("attempt-1") == [(b"m0", 0), (b"m1", 0)]  # the same attempt: not a redelivery
    assert await pop_attempt("attempt-2") == []  # another attempt: blocked


async def test_change_invisible_time_zero_redelivers_at_once(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    [(message, handle)] = popped(await pop(stub, TOPIC, max_msg_nums=1))
    changed = await change_invisible(stub, TOPIC, handle, 0)
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    assert (
        ReceiptHandle.decode(changed.receipt_handle).retrieve_time_ms == ReceiptHandle.decode(handle).retrieve_time_ms
    )
    assert bodies(await pop(stub, TOPIC, max_msg_nums=1)) == [(message.body, 1)]


async def test_a_parked_pop_wakes_when_the_blocking_message_turns_visible(
    broker: tuple[BrokerController, Stub],
) -> None:
    _controller, stub = broker
    assert len(popped(await pop(stub, TOPIC, max_msg_nums=1, invisible_time_ms=INVISIBLE_MS))) == 1
    started = time.monotonic()
    reply = await pop(stub, TOPIC, max_msg_nums=1, poll_time_ms=10_000)
    assert bodies(reply) == [(b"m0", 1)]
    assert time.monotonic() - started < 5


async def test_past_retry_max_times_the_message_goes_to_the_dlq(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store") as (controller, stub):
        await create_topic(stub, TOPIC, queues=1)
        await orderly_group(stub, retry_max_times=1)
        await send(stub, TOPIC, [b"m0", b"m1"])
        for attempt in range(2):  # delivered retryMaxTimes + 1 times, never acked
            assert bodies(await pop(stub, TOPIC, max_msg_nums=1, invisible_time_ms=INVISIBLE_MS)) == [(b"m0", attempt)]
            await asyncio.sleep(INVISIBLE_MS / 1000 + 0.1)
        assert bodies(await pop(stub, TOPIC, max_msg_nums=2)) == [(b"m1", 0)]
        dlq = await pop(stub, dlq_topic(GROUP), group="dlq_reader")
        assert [m.body for m, _ in popped(dlq)] == [b"m0"]
        assert controller.consumer_offsets is not None
        assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 1


async def test_the_order_info_is_persisted_and_loaded(tmp_path: Path) -> None:
    root = tmp_path / "store"
    async with pop_broker(root) as (_controller, stub):
        await create_topic(stub, TOPIC, queues=1)
        await orderly_group(stub)
        await send(stub, TOPIC, [b"m0", b"m1"])
        assert len(popped(await pop(stub, TOPIC, max_msg_nums=1))) == 1
        path = root / "config" / "consumerOrderInfo.json"
        await wait_until(path.exists)
    info = json.loads(path.read_text())["table"][f"{TOPIC}@{GROUP}"]["0"]
    assert (info["o"], info["cm"], info["i"]) == ([0], 0, 60_000)
    async with pop_broker(root) as (_controller, stub):
        assert (await pop(stub, TOPIC)).code == ResponseCode.POLLING_TIMEOUT  # still blocked after the restart


async def test_the_request_order_flag_and_attempt_id_over_grpc(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store") as (_controller, stub):
        await create_topic(stub, TOPIC, queues=1)  # the group is not orderly: the request asks for it
        await send(stub, TOPIC, [b"m0", b"m1"])

        async def pop_order(attempt_id: str) -> broker_pb2.PopMessageResponse:
            request = broker_pb2.PopMessageRequest(
                consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=1, invisible_time_ms=60_000,
                init_mode=1, order=True, attempt_id=attempt_id,
            )  # fmt: skip
            return await stub.PopMessage(request, timeout=30)

        assert bodies(await pop_order("a1")) == [(b"m0", 0)]
        assert bodies(await pop_order("a1")) == [(b"m0", 0)]
        assert (await pop_order("a2")).code == ResponseCode.POLLING_TIMEOUT


def test_auto_clean_drops_deleted_topics_groups_queues_and_idle_queues() -> None:
    manager = ConsumerOrderInfoManager(None)
    now = 10 * CLEAN_SPAN_FROM_LAST_MS
    for topic, group, queue_id, last_ms in (
        ("T", "G", 0, now),
        ("T", "G", 1, now - CLEAN_SPAN_FROM_LAST_MS - 1),  # idle for more than a day
        ("T", "G", 4, now),  # past the topic's read queues
        ("T", "gone", 0, now),  # deleted group
        ("Gone", "G", 0, now),  # deleted topic
    ):
        manager.update("", topic, group, queue_id, last_ms, 60_000, [0], last_ms)
    read_queues = {"T": 4}
    assert manager.auto_clean(read_queues.get, lambda group: group == "G", now) == 4
    assert {key: sorted(queues) for key, queues in manager.table.items()} == {"T@G": [0]}
