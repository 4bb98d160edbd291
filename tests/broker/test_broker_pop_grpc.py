"""POP over the broker's gRPC API, in process: pop/ack round trip, batch ack, change of invisible time, long
polling, tag filter, init modes, the refusal codes (garbage / replayed / foreign / expired / superseded handles)
and the bounds (batch size, invisible time, queue id, unknown topic or group, consume disabled)."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import closed_port
from consumer_testkit import wait_until
from mq.broker.v1 import broker_pb2
from mq_broker.controller import BrokerController
from mq_common.protocol import ReceiptHandle, SubscriptionGroupConfig
from mq_common.protocol.convert import subscription_group_config_to_proto
from mq_common.response_code import ResponseCode
from pop_testkit import (
    GROUP,
    RPC_TIMEOUT_S,
    ack,
    change_invisible,
    create_topic,
    pop,
    pop_all,
    pop_broker,
    popped,
    send,
)

if TYPE_CHECKING:
    from pop_testkit import Stub

TOPIC = "PopTopic"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    async with pop_broker(tmp_path / "store") as started:
        await create_topic(started[1], TOPIC)
        yield started


async def test_pop_then_ack_round_trip(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [b"m0", b"m1", b"m2"])
    reply = await pop(stub, TOPIC, max_msg_nums=2)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    first = popped(reply)
    assert [m.body for m, _ in first] == [b"m0", b"m1"]
    assert all(m.reconsume_times == 0 and m.topic == TOPIC for m, _ in first)
    handle = ReceiptHandle.decode(first[0][1])
    assert (handle.broker_name, handle.queue_id, handle.offset, handle.topic_type) == ("broker-a", 0, 0, "0")
    assert handle.commit_log_offset == first[0][0].commit_log_offset
    assert handle.invisible_time_ms == 60_000
    assert handle.retrieve_time_ms == reply.pop_time_ms
    assert controller.pop is not None
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 2
    # the rest of the queue, then nothing
    assert [m.body for m, _ in popped(await pop(stub, TOPIC))] == [b"m2"]
    empty = await pop(stub, TOPIC)
    assert (empty.code, len(empty.messages)) == (ResponseCode.POLLING_TIMEOUT, 0)
    answer = await ack(stub, TOPIC, [h for _, h in first])
    assert (answer.code, list(answer.codes)) == (ResponseCode.SUCCESS, [0, 0]), answer.remark
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 1
    assert controller.pop.inflight_by_group_topic() == {(GROUP, TOPIC): 1}


async def test_batch_ack_writes_one_record_per_checkpoint(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [f"b{i}".encode() for i in range(5)])
    handles = [h for _, h in popped(await pop(stub, TOPIC))]
    assert len(handles) == 5
    assert controller.store is not None
    assert controller.pop is not None
    revive_topic = controller.pop.config.revive_topic
    before = sum(controller.store.get_max_offset_in_queue(revive_topic, q) for q in range(8))
    answer = await ack(stub, TOPIC, handles)
    assert (answer.code, list(answer.codes)) == (ResponseCode.SUCCESS, [0] * 5)
    after = sum(controller.store.get_max_offset_in_queue(revive_topic, q) for q in range(8))
    assert after - before == 1  # one bAck for the five messages of one checkpoint
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 0


async def test_refused_handles_get_codes_per_handle(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    await send(stub, TOPIC, [b"r0", b"r1"])
    (_, good), (_, other) = popped(await pop(stub, TOPIC))
    foreign_text = replace(ReceiptHandle.decode(good), broker_name="broker-z").encode()
    answer = await ack(stub, TOPIC, [good, "garbage", foreign_text, good])
    assert list(answer.codes) == [
        ResponseCode.SUCCESS,
        ResponseCode.INVALID_PARAMETER,
        ResponseCode.INVALID_PARAMETER,
        ResponseCode.NO_MESSAGE,
    ]
    assert answer.code == ResponseCode.INVALID_PARAMETER
    assert "receipt handle is invalid" in answer.remarks[1]
    assert "broker-z" in answer.remarks[2]
    assert "acked already" in answer.remarks[3]
    replayed = await ack(stub, TOPIC, [good])
    assert (replayed.code, list(replayed.codes)) == (ResponseCode.NO_MESSAGE, [ResponseCode.NO_MESSAGE])
    assert "acked already" in replayed.remark
    # another group or another topic does not own the handle
    assert (await ack(stub, TOPIC, [other], group="someone_else")).code == ResponseCode.NO_MESSAGE
    await create_topic(stub, "OtherTopic")
    assert (await ack(stub, "OtherTopic", [other])).code == ResponseCode.NO_MESSAGE
    assert (await ack(stub, TOPIC, [other])).code == ResponseCode.SUCCESS
    assert (await ack(stub, TOPIC, [])).code == ResponseCode.NO_MESSAGE
    assert (await ack(stub, "NoSuchTopic", [other])).code == ResponseCode.TOPIC_NOT_EXIST


async def test_ack_after_expiry_is_refused(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    await send(stub, TOPIC, [b"e0"])
    ((_, handle),) = popped(await pop(stub, TOPIC, invisible_time_ms=1_000))
    visible_at_ms = ReceiptHandle.decode(handle).next_visible_time_ms
    await wait_until(lambda: time.time() * 1000 >= visible_at_ms)
    answer = await ack(stub, TOPIC, [handle])
    assert answer.code == ResponseCode.NO_MESSAGE
    assert "expired" in answer.remark


async def test_change_invisible_time_gives_a_new_handle_and_retires_the_old(
    broker: tuple[BrokerController, Stub],
) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [b"c0", b"c1"])
    (_, old), (_, sibling) = popped(await pop(stub, TOPIC))
    changed = await change_invisible(stub, TOPIC, old, 120_000)
    assert changed.code == ResponseCode.SUCCESS, changed.remark
    new = ReceiptHandle.decode(changed.receipt_handle)
    assert (new.offset, new.start_offset, new.invisible_time_ms) == (0, 0, 120_000)
    assert new.retrieve_time_ms == changed.pop_time_ms
    refused = await ack(stub, TOPIC, [old])
    assert refused.code == ResponseCode.NO_MESSAGE
    again = await change_invisible(stub, TOPIC, old, 1_000)
    assert again.code == ResponseCode.NO_MESSAGE
    assert controller.pop is not None
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 2
    assert (await ack(stub, TOPIC, [changed.receipt_handle, sibling])).code == ResponseCode.SUCCESS
    assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 0
    garbage = await change_invisible(stub, TOPIC, "1 2 3", 1_000)
    assert garbage.code == ResponseCode.INVALID_PARAMETER
    for bad in (-1, 12 * 3600 * 1000 + 1):
        assert (await change_invisible(stub, TOPIC, changed.receipt_handle, bad)).code == ResponseCode.INVALID_PARAMETER


async def test_long_polling_returns_when_a_message_arrives(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    waiting = asyncio.create_task(pop(stub, TOPIC, poll_time_ms=20_000))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await send(stub, TOPIC, [b"late"], queue_id=3)
    reply = await asyncio.wait_for(waiting, RPC_TIMEOUT_S)
    assert reply.code == ResponseCode.SUCCESS
    assert [m.body for m, _ in popped(reply)] == [b"late"]


async def test_poll_time_ends_with_polling_timeout(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    reply = await pop(stub, TOPIC, poll_time_ms=300)
    assert (reply.code, len(reply.messages)) == (ResponseCode.POLLING_TIMEOUT, 0)


async def test_tag_filter_skips_other_tags(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    await send(stub, TOPIC, [b"a0"], TAGS="A")
    await send(stub, TOPIC, [b"b0"], TAGS="B")
    await send(stub, TOPIC, [b"a1"], TAGS="A")
    got = await pop_all(stub, TOPIC, 2, expression="A")
    assert [m.body for m, _ in got] == [b"a0", b"a1"]
    assert (await pop(stub, TOPIC, expression="A")).code == ResponseCode.POLLING_TIMEOUT
    bad = await pop(stub, TOPIC, expression="||")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_init_modes(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    await send(stub, TOPIC, [b"i0", b"i1", b"i2"])
    first = await pop(stub, TOPIC, group="from_first", init_mode=1)
    assert [m.body for m, _ in popped(first)] == [b"i0", b"i1", b"i2"]
    # LAST: the queue's first message is in the page cache here, so RocketMQ's initPopOffsetByCheckMsgInMem
    # starts at 0 too; with the check off it starts at the last message
    assert len((await pop(stub, TOPIC, group="from_last_mem", init_mode=0)).messages) == 3


async def test_init_mode_last_without_the_memory_check(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store", init_pop_offset_by_check_msg_in_mem=False) as (_controller, stub):
        await create_topic(stub, TOPIC)
        await send(stub, TOPIC, [b"l0", b"l1", b"l2"])
        reply = await pop(stub, TOPIC, group="from_last", init_mode=0)
        assert [m.body for m, _ in popped(reply)] == [b"l2"]


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("max_msg_nums", 0, ResponseCode.INVALID_PARAMETER),
        ("max_msg_nums", 33, ResponseCode.INVALID_PARAMETER),
        ("invisible_time_ms", 999, ResponseCode.INVALID_PARAMETER),
        ("invisible_time_ms", -5, ResponseCode.INVALID_PARAMETER),
        ("invisible_time_ms", 12 * 3600 * 1000 + 1, ResponseCode.INVALID_PARAMETER),
        ("poll_time_ms", -1, ResponseCode.INVALID_PARAMETER),
        ("init_mode", 7, ResponseCode.INVALID_PARAMETER),
        ("queue_id", 4, ResponseCode.INVALID_PARAMETER),
        ("topic", "NoSuchTopic", ResponseCode.TOPIC_NOT_EXIST),
    ],
)
async def test_pop_bounds(broker: tuple[BrokerController, Stub], field: str, value: object, code: int) -> None:
    _controller, stub = broker
    request = broker_pb2.PopMessageRequest(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=1, invisible_time_ms=10_000
    )
    setattr(request, field, value)
    reply = await stub.PopMessage(request, timeout=RPC_TIMEOUT_S)
    assert reply.code == code, reply.remark
    assert reply.remark


async def test_unknown_group_and_disabled_group(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store", auto_create_subscription_group=False) as (_controller, stub):
        await create_topic(stub, TOPIC)
        assert (await pop(stub, TOPIC, group="nobody")).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        config = subscription_group_config_to_proto(SubscriptionGroupConfig("disabled", consume_enable=False))
        created = await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))
        assert created.code == ResponseCode.SUCCESS, created.remark
        assert (await pop(stub, TOPIC, group="disabled")).code == ResponseCode.NO_PERMISSION


async def test_concurrent_pops_of_one_group_split_a_queue(broker: tuple[BrokerController, Stub]) -> None:
    """Pops of one group never read a queue together; one that found the queue busy is woken when messages are
    left behind, so 64 messages of one queue reach 4 concurrent long-polling pops without duplicates."""
    _controller, stub = broker
    await send(stub, TOPIC, [f"q{i}".encode() for i in range(64)])
    replies = await asyncio.gather(*(pop(stub, TOPIC, queue_id=0, poll_time_ms=3_000) for _ in range(4)))
    bodies = [m.body for reply in replies for m, _ in popped(reply)]
    assert len(bodies) == len(set(bodies))
    rest = [m.body for m, _ in await pop_all(stub, TOPIC, 64 - len(bodies))]
    assert sorted(bodies + rest) == sorted(f"q{i}".encode() for i in range(64))
    assert sum(1 for reply in replies if reply.messages) >= 2


async def test_too_many_parked_polls_answer_polling_full(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store", max_pull_polling_size=1) as (controller, stub):
        await create_topic(stub, TOPIC)
        parked = asyncio.create_task(pop(stub, TOPIC, poll_time_ms=20_000))
        await wait_until(lambda: controller.long_polling is not None and controller.long_polling.parked_count == 1)
        full = await pop(stub, TOPIC, poll_time_ms=20_000, group="second")
        assert full.code == ResponseCode.POLLING_FULL
        await send(stub, TOPIC, [b"wake"])
        assert [m.body for m, _ in popped(await asyncio.wait_for(parked, RPC_TIMEOUT_S))] == [b"wake"]


async def test_unreadable_broker_refuses_pops(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store", broker_permission=2) as (_controller, stub):
        await create_topic(stub, TOPIC)
        reply = await pop(stub, TOPIC)
        assert reply.code == ResponseCode.NO_PERMISSION
        assert "forbidden" in reply.remark


async def test_each_queue_read_is_reported_as_messages_out(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    seen: list[tuple[str, str, int, int, bool]] = []

    class Recorder:
        def on_messages_out(self, topic: str, group: str, count: int, size_bytes: int, *, is_retry: bool) -> None:
            seen.append((topic, group, count, size_bytes, is_retry))

    assert controller.pop is not None
    controller.pop.pop_processor.metrics = Recorder()
    await send(stub, TOPIC, [b"o0", b"o1"], queue_id=1)
    reply = await pop(stub, TOPIC)
    assert seen == [(TOPIC, GROUP, 2, sum(len(m.message) for m in reply.messages), False)]


async def test_metrics_export_pop_figures(tmp_path: Path) -> None:
    """The broker's /metrics counts popped messages out and gauges the un-acked ones in flight."""
    port = closed_port()
    async with pop_broker(tmp_path / "store", metrics_port=port) as (_controller, stub):
        await create_topic(stub, TOPIC)
        await send(stub, TOPIC, [b"f0", b"f1", b"f2"])
        handles = [h for _, h in popped(await pop(stub, TOPIC))]
        assert (await ack(stub, TOPIC, handles[:1])).code == ResponseCode.SUCCESS
        url = f"http://127.0.0.1:{port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=RPC_TIMEOUT_S).read().decode())
    samples = {line.split("{")[0]: line for line in text.splitlines() if f'consumer_group="{GROUP}"' in line}
    assert samples["rocketmq_messages_out_total"].endswith(" 3.0")
    assert samples["rocketmq_consumer_inflight_messages"].endswith(" 2.0")
