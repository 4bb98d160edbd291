"""Topic message types end to end with ``mqadmin`` against a real local cluster (mqnamesrv + two mqbroker + mqgateway
processes): ``updateTopic -a +message.type=...`` -> both brokers -> name server -> route (``topicRoute``,
``topicList -c``) -> the gateway's v2 QueryRoute ``accept_message_types``; the attribute's refusals with RocketMQ's
remarks (nothing changed); and the broker's own send check (MESSAGE_ILLEGAL 13) for a library producer that talks
to the brokers without the gateway."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendStatus
from mq_common.errors import MQBrokerError, MQError
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import unique_topic

from tests.client_admin.conftest import Mqadmin

pytestmark = pytest.mark.integration
MessageType = definition_pb2.MessageType
ALL_FOUR = [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION]
WAIT_S = 20.0
VALUES = "[UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED]"


@pytest.fixture(scope="module")
def mqadmin(consumer_cluster: LocalCluster) -> Mqadmin:
    return Mqadmin(consumer_cluster.namesrv_addr)


def route_types(mqadmin: Mqadmin, topic: str) -> dict[str, str]:
    """broker name -> the message_type of its QueueData in ``topicRoute --output json`` ({} without a route)."""
    result = mqadmin("topicRoute", "-t", topic, "--output", "json")
    if result.exit_code != 0:
        return {}
    route: dict[str, Any] = json.loads(result.stdout)
    return {q["broker_name"]: q["message_type"] for q in route["queue_datas"]}


def wait_types(mqadmin: Mqadmin, topic: str, message_type: str) -> None:
    """Until both brokers' QueueData of ``topic`` say ``message_type`` ('' = none)."""
    deadline = time.monotonic() + WAIT_S
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = route_types(mqadmin, topic)
        if seen == {"broker-a": message_type, "broker-b": message_type}:
            return
        time.sleep(0.1)
    raise AssertionError(f"route of {topic}: {seen}, wanted {message_type!r} on both brokers")


def query_route_types(cluster: LocalCluster, topic: str) -> set[tuple[int, ...]]:
    """The distinct accept_message_types of the cluster gateway's v2 QueryRoute answer for ``topic``."""

    async def ask() -> set[tuple[int, ...]]:
        async with grpc.aio.insecure_channel(cluster.gateway_addr) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            request = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic))
            answer = await stub.QueryRoute(request, metadata=(("x-mq-client-id", "types-test"),), timeout=10)
            assert answer.status.code == definition_pb2.Code.OK, answer.status.message
            assert len(answer.message_queues) == 4  # 2 queues on each of 2 brokers
            return {tuple(q.accept_message_types) for q in answer.message_queues}

    return asyncio.run(ask())


@pytest.mark.parametrize(
    ("declared", "accepted"),
    [
        (None, [MessageType.NORMAL]),
        ("DELAY", [MessageType.DELAY]),
        ("FIFO", [MessageType.FIFO]),
        ("MIXED", ALL_FOUR),
    ],
)
def test_update_topic_a_reaches_route_and_query_route(
    declared: str | None, accepted: list[int], mqadmin: Mqadmin, consumer_cluster: LocalCluster
) -> None:
    topic = unique_topic(f"typed_{declared or 'absent'}")
    args = ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]
    if declared is not None:
        args += ["-a", f"+message.type={declared}"]
    out = mqadmin.ok(*args)
    assert out.count("success.") == 2
    wait_types(mqadmin, topic, declared or "")
    table = mqadmin.ok("topicRoute", "-t", topic)
    assert "#Message Type" in table
    assert table.count(declared or "NORMAL") >= 2  # one row per broker group
    rows = mqadmin.json("topicList", "-c")["topics"]
    assert {"cluster": "DefaultCluster", "topic": topic, "message_type": declared or "NORMAL"} in rows
    assert query_route_types(consumer_cluster, topic) == {tuple(accepted)}


def test_a_type_is_changed_kept_and_deleted(mqadmin: Mqadmin) -> None:
    topic = unique_topic("retyped")
    base = ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]
    mqadmin.ok(*base, "-a", "+message.type=DELAY")
    wait_types(mqadmin, topic, "DELAY")
    mqadmin.ok(*base, "-a", "+message.type=FIFO")
    wait_types(mqadmin, topic, "FIFO")
    mqadmin.ok(*base, "-w", "2")  # no -a: the type stays
    time.sleep(0.5)
    assert route_types(mqadmin, topic) == {"broker-a": "FIFO", "broker-b": "FIFO"}
    mqadmin.ok(*base, "-a", "-message.type")
    wait_types(mqadmin, topic, "")
    assert "NORMAL" in mqadmin.ok("topicRoute", "-t", topic)


@pytest.mark.parametrize(
    ("attributes", "remark"),
    [
        ("+message.type=BOGUS", f"value is not in set: {VALUES}"),
        ("+message.type=normal", f"value is not in set: {VALUES}"),
        ("+queue.type=BatchCQ", "unsupported key: queue.type"),
        ("-message.type", "attempt to delete a nonexistent key: message.type"),
    ],
)
def test_bad_attributes_are_refused_with_rocketmqs_remarks_and_change_nothing(
    attributes: str, remark: str, mqadmin: Mqadmin
) -> None:
    topic = unique_topic("badattr")
    base = ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]
    mqadmin.ok(*base)  # an existing NORMAL topic
    wait_types(mqadmin, topic, "")
    err = mqadmin.fails(ResponseCode.INVALID_PARAMETER, *base, "-a", attributes)
    assert remark in err
    time.sleep(0.5)
    assert route_types(mqadmin, topic) == {"broker-a": "", "broker-b": ""}


def test_a_delete_on_create_and_malformed_syntax_are_refused(mqadmin: Mqadmin) -> None:
    topic = unique_topic("newbad")
    base = ["updateTopic", "-c", "DefaultCluster", "-t", topic]
    err = mqadmin.fails(ResponseCode.INVALID_PARAMETER, *base, "-a", "-message.type")
    assert "only add attribute is supported while creating topic. key: message.type" in err
    for bad, words in (
        ("message.type=DELAY", "add/alter attribute format is wrong: message.type"),
        ("+message.type", "delete attribute format is wrong: +message.type"),
        ("+message.type=DELAY,+message.type=FIFO", "key duplication: +message.type"),
    ):
        result = mqadmin(*base, "-a", bad)
        assert result.exit_code == 2, result.output
        assert words in result.stderr
    assert route_types(mqadmin, topic) == {}, "no topic was created"


async def _send(namesrv_addr: str, messages: list[Message]) -> list[SendStatus | MQError]:
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="types_producer"), [namesrv_addr])
    await producer.start()
    outcomes: list[SendStatus | MQError] = []
    try:
        for msg in messages:
            try:
                outcomes.append((await producer.send(msg)).send_status)
            except MQError as exc:
                outcomes.append(exc)
    finally:
        await producer.shutdown()
    return outcomes


def test_the_broker_refuses_a_message_its_declared_topic_does_not_accept(
    mqadmin: Mqadmin, consumer_cluster: LocalCluster
) -> None:
    """A library producer (no gateway) meets the broker's check: a declared type is enforced (MESSAGE_ILLEGAL 13,
    the proxy's remark, not retried), MIXED takes all, an undeclared topic takes every type as RocketMQ's broker
    does."""
    typed = {t: unique_topic(f"brk_{t.lower()}") for t in ("FIFO", "MIXED")}
    untyped = unique_topic("brk_untyped")
    for t, topic in typed.items():
        mqadmin.ok("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2", "-a", f"+message.type={t}")
        wait_types(mqadmin, topic, t)
    mqadmin.ok("updateTopic", "-c", "DefaultCluster", "-t", untyped, "-r", "2", "-w", "2")
    wait_types(mqadmin, untyped, "")
    outcomes = asyncio.run(
        _send(
            consumer_cluster.namesrv_addr,
            [
                Message(typed["FIFO"], b"plain"),
                Message(typed["FIFO"], b"ordered", sharding_key="k"),
                Message(typed["MIXED"], b"plain"),
                Message(typed["MIXED"], b"ordered", sharding_key="k"),
                Message(untyped, b"ordered", sharding_key="k"),
            ],
        )
    )
    refused = outcomes[0]
    assert isinstance(refused, MQBrokerError), outcomes
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert refused.remark == "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
    assert outcomes[1:] == [SendStatus.SEND_OK] * 4
