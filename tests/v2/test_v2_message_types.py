"""Topic message types through a real cluster and an in-process gateway: a topic's ``message.type`` (set with the
broker's CreateTopic/UpdateTopic attributes, as ``mqadmin updateTopic -a``) travels broker -> name server -> route
-> v2 QueryRoute's ``accept_message_types``, and v2 SendMessage refuses a message of another type with the proxy's
code (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE 40014) and remark, storing nothing; off with
enable_topic_message_type_check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import timestamp_pb2
from mq_client.admin.admin_client import MQAdminClient
from mq_common.protocol import TopicConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

from tests.v2.conftest import Gateway, make_typed_topic, metadata, resource, start_gateway
from tests.v2.test_v2_send_message import send, v2_message

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
MessageType = definition_pb2.MessageType
ALL_FOUR = [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION]


async def accept_types(gateway: Gateway, topic: str) -> set[tuple[int, ...]]:
    answer = await gateway.stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=resource(topic)), metadata=metadata(), timeout=10
    )
    assert answer.status.code == Code.OK, answer.status.message
    assert answer.message_queues
    return {tuple(q.accept_message_types) for q in answer.message_queues}


@pytest.mark.parametrize(
    ("declared", "accepted"),
    [
        (None, [MessageType.NORMAL]),
        ("NORMAL", [MessageType.NORMAL]),
        ("FIFO", [MessageType.FIFO]),
        ("DELAY", [MessageType.DELAY]),
        ("TRANSACTION", [MessageType.TRANSACTION]),
        ("MIXED", ALL_FOUR),
    ],
)
async def test_query_route_answers_the_topics_declared_type(
    declared: str | None, accepted: list[int], gateway: Gateway, cluster: LocalCluster
) -> None:
    if declared is None:
        topic = await make_topic(cluster, "v2_types_absent")
    else:
        topic = await make_typed_topic(cluster, f"v2_types_{declared.lower()}", declared)
    assert await accept_types(gateway, topic) == {tuple(accepted)}


def _fifo(topic: str) -> definition_pb2.Message:
    return v2_message(topic, message_group="g1")


def _delay(topic: str) -> definition_pb2.Message:
    return v2_message(topic, delivery_timestamp=timestamp_pb2.Timestamp(seconds=2_000_000_000))


def _transaction(topic: str) -> definition_pb2.Message:
    return v2_message(topic, message_type=MessageType.TRANSACTION)


@pytest.mark.parametrize(
    ("declared", "build", "actual"),
    [
        (None, _fifo, "FIFO"),
        (None, _delay, "DELAY"),
        ("NORMAL", _transaction, "TRANSACTION"),
        ("FIFO", v2_message, "NORMAL"),
        ("DELAY", v2_message, "NORMAL"),
        ("DELAY", _fifo, "FIFO"),
        ("TRANSACTION", v2_message, "NORMAL"),
    ],
)
async def test_a_message_of_another_type_is_refused_with_the_proxys_code_and_remark(
    declared: str | None,
    build: Callable[[str], definition_pb2.Message],
    actual: str,
    gateway: Gateway,
    cluster: LocalCluster,
) -> None:
    if declared is None:
        topic = await make_topic(cluster, "v2_mismatch", queues=1)
    else:
        topic = await make_typed_topic(cluster, "v2_mismatch", declared, queues=1)
    answer = await send(gateway, build(topic))
    expected = declared or "NORMAL"
    assert answer.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    remark = f"TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}"
    assert answer.status.message == remark
    assert [e.status.code for e in answer.entries] == [Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE]
    assert await read_all(cluster.namesrv_addr, topic) == []


async def test_mixed_and_matching_topics_take_their_messages(gateway: Gateway, cluster: LocalCluster) -> None:
    mixed = await make_typed_topic(cluster, "v2_mixed_ok", "MIXED", queues=1)
    answer = await send(gateway, v2_message(mixed, b"plain", "ID1"))
    assert answer.status.code == Code.OK, answer.status.message
    answer = await send(gateway, v2_message(mixed, b"ordered", "ID2", message_group="g"))
    assert answer.status.code == Code.OK, answer.status.message
    fifo = await make_typed_topic(cluster, "v2_fifo_ok", "FIFO", queues=1)
    answer = await send(gateway, v2_message(fifo, b"ordered", "ID3", message_group="g"))
    assert answer.status.code == Code.OK, answer.status.message
    stored = {m.body for _q, m in await read_all(cluster.namesrv_addr, mixed)}
    assert stored == {b"plain", b"ordered"}


async def test_type_changed_with_update_topic_reaches_a_new_gateway(cluster: LocalCluster) -> None:
    """updateTopic -a +message.type=DELAY on an existing NORMAL topic, then -message.type: the route follows (a
    gateway that has not cached the route yet sees it at once; a cached one at its next refresh)."""
    topic = await make_topic(cluster, "v2_retyped", queues=2)
    async with MQAdminClient([cluster.namesrv_addr]) as admin:
        await admin.update_topic(
            TopicConfig(topic, 2, 2, attributes={"+message.type": "DELAY"}), cluster_name="DefaultCluster"
        )
        await _wait_route_type(admin, topic, "DELAY")
        gw = await start_gateway(cluster)
        try:
            assert await accept_types(gw, topic) == {(MessageType.DELAY,)}
        finally:
            await gw.channel.close()
            await gw.controller.stop(0)
        # an update without attributes keeps the type; "-message.type" removes it (NORMAL again)
        await admin.update_topic(TopicConfig(topic, 2, 2), cluster_name="DefaultCluster")
        assert (await admin.topic_route(topic)).topic_message_type().value == "DELAY"
        await admin.update_topic(
            TopicConfig(topic, 2, 2, attributes={"-message.type": ""}), cluster_name="DefaultCluster"
        )
        await _wait_route_type(admin, topic, "")


async def _wait_route_type(admin: MQAdminClient, topic: str, message_type: str) -> None:
    for _ in range(300):
        route = await admin.topic_route(topic)
        if {q.message_type for q in route.queue_datas} == {message_type}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"route of {topic} still {route.queue_datas}")


async def test_the_check_is_off_with_enable_topic_message_type_check_false(cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v2_unchecked", queues=1)
    gw = await start_gateway(cluster, enable_topic_message_type_check=False)
    try:
        answer = await send(gw, v2_message(topic, b"ordered", message_group="g1"))
        assert answer.status.code == Code.OK, answer.status.message
        # QueryRoute still answers the topic's type (the SDKs are told not to check: validate_message_type false)
        assert await accept_types(gw, topic) == {(MessageType.NORMAL,)}
    finally:
        await gw.channel.close()
        await gw.controller.stop(0)
    assert [m.body for _q, m in await read_all(cluster.namesrv_addr, topic)] == [b"ordered"]
