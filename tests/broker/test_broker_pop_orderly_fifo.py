"""Orderly POP, issue 33's bad input and FIFO metrics, over an in-process broker: an attempt id replayed by another
client (``<client id>/<attempt id>``, as the gateway sends it) is refused ILLEGAL_OPERATION while the attempt's
messages are in flight, changing nothing (over gRPC too); the FIFO metrics count blocked queues, age the oldest
block and observe, per block, how long the queue stayed blocked (redeliveries included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mq.broker.v1 import broker_pb2
from mq_broker.consumer.pop.order_info import ConsumerOrderInfoManager
from mq_broker.controller import BrokerController
from mq_broker.metrics import BrokerMetrics
from mq_common.codec import decode_message
from mq_common.errors import MQBrokerError
from mq_common.metrics import NodeIdentity
from mq_common.protocol import PopMessageRequestHeader, SubscriptionGroupConfig
from mq_common.protocol.convert import subscription_group_config_to_proto
from mq_common.response_code import ResponseCode
from pop_testkit import GROUP, ack, create_topic, pop, pop_broker, popped, send
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from pop_testkit import Stub

TOPIC = "FifoTopic"
INVISIBLE_MS = 1_000


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    async with pop_broker(tmp_path / "store") as started:
        stub = started[1]
        await create_topic(stub, TOPIC, queues=1)
        config = SubscriptionGroupConfig(GROUP, consume_message_orderly=True)
        request = broker_pb2.UpdateSubscriptionGroupRequest(config=subscription_group_config_to_proto(config))
        assert (await stub.UpdateSubscriptionGroup(request)).code == ResponseCode.SUCCESS
        await send(stub, TOPIC, [b"m0", b"m1", b"m2", b"m3"])
        yield started


def order_info(controller: BrokerController) -> ConsumerOrderInfoManager:
    assert controller.pop is not None
    return controller.pop.context.order_info


async def pop_attempt(controller: BrokerController, attempt_id: str, max_msg_nums: int = 2) -> list[tuple[bytes, int]]:
    assert controller.pop is not None
    header = PopMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, max_msg_nums=max_msg_nums, invisible_time_ms=60_000, queue_id=-1,
        init_mode=1, attempt_id=attempt_id,
    )  # fmt: skip
    reply = await controller.pop.pop(header)
    return [((m := decode_message(p.message)).body, m.reconsume_times) for p in reply.messages]


async def test_an_attempt_id_replayed_by_another_client_is_refused_and_changes_nothing(
    broker: tuple[BrokerController, Stub],
) -> None:
    controller, _stub = broker
    assert await pop_attempt(controller, "client-a/attempt-1") == [(b"m0", 0), (b"m1", 0)]
    info = order_info(controller).get(TOPIC, GROUP, 0)
    assert info is not None
    before = (info.attempt_id, info.pop_time_ms, info.offsets, dict(info.consumed_count))
    with pytest.raises(MQBrokerError) as refused:
        await pop_attempt(controller, "client-b/attempt-1")
    assert refused.value.code == ResponseCode.ILLEGAL_OPERATION
    assert "attempt-1" in refused.value.remark
    assert "another client" in refused.value.remark
    assert "client-a" not in refused.value.remark  # the holder's id is not told
    after = order_info(controller).get(TOPIC, GROUP, 0)
    assert after is not None
    assert (after.attempt_id, after.pop_time_ms, after.offsets, dict(after.consumed_count)) == before
    assert await pop_attempt(controller, "client-b/attempt-2") == []  # its own new attempt: simply blocked
    assert await pop_attempt(controller, "client-a/attempt-1") == [(b"m0", 0), (b"m1", 0)]  # the owner's retry


@pytest.mark.parametrize(("holder", "replay"), [("attempt-1", "other/attempt-1"), ("client-a/", "client-b/")])
async def test_no_refusal_without_a_client_id_or_an_attempt(
    broker: tuple[BrokerController, Stub], holder: str, replay: str
) -> None:
    controller, _stub = broker
    assert await pop_attempt(controller, holder) == [(b"m0", 0), (b"m1", 0)]
    assert await pop_attempt(controller, replay) == []  # not namespaced (a v1 client's), or no attempt: blocked


async def test_the_refusal_over_grpc(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker

    async def pop_order(attempt_id: str) -> broker_pb2.PopMessageResponse:
        request = broker_pb2.PopMessageRequest(
            consumer_group=GROUP, topic=TOPIC, queue_id=0, max_msg_nums=2, invisible_time_ms=60_000, init_mode=1,
            order=True, attempt_id=attempt_id,
        )  # fmt: skip
        return await stub.PopMessage(request, timeout=30)

    first = await pop_order("c1/a1")
    assert [m.body for m, _ in popped(first)] == [b"m0", b"m1"]
    refused = await pop_order("c2/a1")
    assert refused.code == ResponseCode.ILLEGAL_OPERATION, refused.remark
    assert "another client" in refused.remark
    assert not refused.messages
    assert (await ack(stub, TOPIC, [h for _, h in popped(first)])).code == ResponseCode.SUCCESS
    again = await pop_order("c2/a1")  # the attempt ended: an ordinary pop of what comes next
    assert again.code == ResponseCode.SUCCESS, again.remark
    assert [(m.body, m.reconsume_times) for m, _ in popped(again)] == [(b"m2", 0), (b"m3", 0)]
    assert controller.consumer_offsets is not None
    assert controller.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 2


def scraped(metrics: BrokerMetrics) -> dict[tuple[str, str], float]:
    """(sample name, topic) -> value of the FIFO samples of GROUP."""
    return {
        (s.name, s.labels.get("topic", "")): s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
        if s.name.startswith("mq_broker_fifo_") and s.labels.get("consumer_group") == GROUP and "le" not in s.labels
    }


async def test_fifo_metrics_count_blocked_queues_age_and_order_wait(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    metrics = BrokerMetrics(NodeIdentity("c", "broker", "broker-a"), max_topics=10, flush_disk_type="SYNC_FLUSH")
    metrics.bind_fifo(order_info(controller))
    first = popped(await pop(stub, TOPIC, max_msg_nums=2, invisible_time_ms=INVISIBLE_MS))
    assert [m.body for m, _ in first] == [b"m0", b"m1"]
    got = scraped(metrics)
    assert got[("mq_broker_fifo_blocked_queues", TOPIC)] == 1
    assert 0 <= got[("mq_broker_fifo_block_age_ms", TOPIC)] < 10_000
    assert ("mq_broker_fifo_order_wait_ms_count", TOPIC) not in got
    assert (await ack(stub, TOPIC, [first[0][1]])).code == ResponseCode.SUCCESS
    assert scraped(metrics)[("mq_broker_fifo_blocked_queues", TOPIC)] == 1  # m1 still un-acked
    await asyncio.sleep(INVISIBLE_MS / 1000 + 0.1)
    started = time.time()
    again = popped(await pop(stub, TOPIC, max_msg_nums=1, invisible_time_ms=INVISIBLE_MS))
    assert [(m.body, m.reconsume_times) for m, _ in again] == [(b"m1", 1)]  # redelivered: the same block goes on
    assert scraped(metrics)[("mq_broker_fifo_block_age_ms", TOPIC)] >= INVISIBLE_MS
    assert (await ack(stub, TOPIC, [again[0][1]])).code == ResponseCode.SUCCESS
    got = scraped(metrics)
    assert got[("mq_broker_fifo_blocked_queues", TOPIC)] == 0
    assert got[("mq_broker_fifo_block_age_ms", TOPIC)] == 0
    assert got[("mq_broker_fifo_order_wait_ms_count", TOPIC)] == 1
    waited_ms = got[("mq_broker_fifo_order_wait_ms_sum", TOPIC)]
    assert INVISIBLE_MS <= waited_ms < INVISIBLE_MS + (time.time() - started) * 1000 + 5_000
    third = popped(await pop(stub, TOPIC, max_msg_nums=2, invisible_time_ms=INVISIBLE_MS))
    assert (await ack(stub, TOPIC, [h for _, h in third])).code == ResponseCode.SUCCESS
    assert scraped(metrics)[("mq_broker_fifo_order_wait_ms_count", TOPIC)] == 2
