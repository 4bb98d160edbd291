"""SimpleConsumer against a real local cluster (conftest: mqnamesrv + two mqbroker groups + mqgateway on 127.0.0.1,
with the broker's default POP settings: invisible times from 1 s, revive every second): receive
from both brokers with long polling, ack, ack_batch (one RPC per broker), change_invisible_duration (the old
handle is refused), redelivery with delivery_attempt 2 after the invisible duration, tag filter, and the
client-side and broker-side refusals."""

from __future__ import annotations

import asyncio
import time
from typing import Final

import pytest
from mq_client.producer import DefaultMQProducer, Message
from mq_client.simple_consumer import MessageView, SimpleConsumer
from mq_common.errors import MQBrokerError, MQClientError
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

pytestmark = pytest.mark.integration

AWAIT_MS: Final = 2_000
DEADLINE_S: Final = 60.0


@pytest.fixture
async def topic(cluster: LocalCluster, request: pytest.FixtureRequest) -> str:
    return await make_topic(cluster, request.node.name)


async def send_all(producer: DefaultMQProducer, topic: str, count: int, tags: str = "") -> set[str]:
    ids: set[str] = set()
    for i in range(count):
        message = Message(topic, f"m{i}".encode(), tags=tags, keys=(f"k{i}",), properties={"p": "v"})
        result = await producer.send(message)
        ids.add(result.msg_id)
    return ids


async def receive_until(consumer: SimpleConsumer, want: int, invisible_ms: int = 60_000) -> list[MessageView]:
    views: list[MessageView] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(views) < want and time.monotonic() < deadline:
        views += await consumer.receive(32, invisible_ms)
    return views


async def test_receive_from_every_broker_then_ack(
    cluster: LocalCluster, producer: DefaultMQProducer, topic: str
) -> None:
    ids = await send_all(producer, topic, 20)
    async with SimpleConsumer([cluster.namesrv_addr], "sc_group_ack", {topic: "*"}, await_duration_ms=AWAIT_MS) as c:
        views = await receive_until(c, 20)
        assert {v.message_id for v in views} == ids
        assert {v.broker_name for v in views} == {"broker-a", "broker-b"}
        view = views[0]
        assert (view.topic, view.delivery_attempt, view.properties.get("p")) == (topic, 1, "v")
        assert view.keys[0].startswith("k")
        assert view.body.startswith(b"m")
        await c.ack(view)
        with pytest.raises(MQBrokerError) as replayed:
            await c.ack(view)
        assert replayed.value.code == ResponseCode.NO_MESSAGE
        assert await c.ack_batch(views[1:]) == [None] * 19
        assert await c.receive(32, 60_000) == []


async def test_unacked_message_comes_back_with_delivery_attempt_two(
    cluster: LocalCluster, producer: DefaultMQProducer, topic: str
) -> None:
    ids = await send_all(producer, topic, 3)
    async with SimpleConsumer([cluster.namesrv_addr], "sc_group_retry", {topic: "*"}, await_duration_ms=AWAIT_MS) as c:
        first = await receive_until(c, 3, invisible_ms=1_000)
        assert {v.message_id for v in first} == ids
        again = await receive_until(c, 3)
        assert {v.message_id for v in again} == ids
        assert {(v.topic, v.delivery_attempt) for v in again} == {(topic, 2)}
        with pytest.raises(MQBrokerError) as expired:
            await c.ack(first[0])
        assert expired.value.code == ResponseCode.NO_MESSAGE
        assert await c.ack_batch(again) == [None] * 3


async def test_change_invisible_duration_returns_a_new_handle(
    cluster: LocalCluster, producer: DefaultMQProducer, topic: str
) -> None:
    await send_all(producer, topic, 1)
    async with SimpleConsumer([cluster.namesrv_addr], "sc_group_change", {topic: "*"}, await_duration_ms=AWAIT_MS) as c:
        (view,) = await receive_until(c, 1)
        changed = await c.change_invisible_duration(view, 120_000)
        assert changed.receipt_handle != view.receipt_handle
        assert changed.message_id == view.message_id
        with pytest.raises(MQBrokerError):
            await c.ack(view)
        await c.ack(changed)


async def test_tag_filter_and_refusals(cluster: LocalCluster, producer: DefaultMQProducer, topic: str) -> None:
    await send_all(producer, topic, 4, tags="Wanted")
    await send_all(producer, topic, 4, tags="Other")
    async with SimpleConsumer(
        [cluster.namesrv_addr], "sc_group_tags", {topic: "Wanted"}, await_duration_ms=AWAIT_MS
    ) as c:
        views = await receive_until(c, 4)
        assert len(views) == 4
        assert {v.tag for v in views} == {"Wanted"}
        assert await c.ack_batch(views) == [None] * 4
        for bad in (0, 33):
            with pytest.raises(MQClientError):
                await c.receive(bad, 60_000)
        with pytest.raises(MQBrokerError) as too_short:
            await c.receive(1, 10)
        assert too_short.value.code == ResponseCode.INVALID_PARAMETER


async def test_receive_waits_for_a_message_sent_later(
    cluster: LocalCluster, producer: DefaultMQProducer, topic: str
) -> None:
    async with SimpleConsumer([cluster.namesrv_addr], "sc_group_wait", {topic: "*"}, await_duration_ms=20_000) as c:
        waiting = asyncio.ensure_future(asyncio.gather(c.receive(32, 60_000), c.receive(32, 60_000)))
        await asyncio.sleep(0.5)
        ids = await send_all(producer, topic, 1)
        got = await asyncio.wait_for(waiting, DEADLINE_S)
        assert {v.message_id for batch in got for v in batch} == ids


async def test_not_started_and_unknown_topic(cluster: LocalCluster) -> None:
    consumer = SimpleConsumer([cluster.namesrv_addr], "sc_group_x", {"NoSuchTopic_sc": "*"})
    with pytest.raises(MQClientError):
        await consumer.receive(1, 60_000)
    with pytest.raises(MQClientError) as unknown:
        await consumer.start()
    assert unknown.value.code == ResponseCode.TOPIC_NOT_EXIST
    await consumer.close()
