"""ConsumerActivity against a real local cluster: ForwardMessageToDeadLetterQueue (the message lands in
%DLQ%<group> and its handle is spent), the max-attempts dead letter of a receive, QueryAssignment (plain and FIFO
groups, refusals) and the 5.x pull API round trip (QueryOffset, PullMessage, UpdateOffset, GetOffset)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import dlq_topic, retry_topic
from mq_common.errors import TopicNotExistError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import SubscriptionGroupConfig
from mq_gateway.v2.consumer import ConsumerActivity, ConsumerActivityConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from v2_consumer_testkit import (  # noqa: E402  (importable only after the path insert)
    CTX,
    DEADLINE_S,
    ack_request,
    new_activity,
    receive,
    receive_request,
    receive_until,
    resource,
    send_all,
    started_cluster,
)

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
BROKERS = ("broker-a", "broker-b")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with started_cluster(tmp_path_factory.mktemp("v2-consumer-dlq")) as started:
        yield started


@pytest.fixture
async def producer(cluster: LocalCluster) -> AsyncIterator[DefaultMQProducer]:
    p = DefaultMQProducer.connect(ProducerConfig(producer_group="v2c_dlq_producer"), [cluster.namesrv_addr])
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


@pytest.fixture
async def activity(cluster: LocalCluster, pool: ChannelPool) -> AsyncIterator[ConsumerActivity]:
    made = new_activity(cluster, pool)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def topic(cluster: LocalCluster, request: pytest.FixtureRequest) -> str:
    return await make_topic(cluster, request.node.name)


async def stored(cluster: LocalCluster, topic: str, want: int) -> list[MessageExt]:
    """The messages of ``topic`` once at least ``want`` are readable (the topic is routed a heartbeat after the
    broker creates it)."""
    deadline = time.monotonic() + DEADLINE_S
    found: list[MessageExt] = []
    while time.monotonic() < deadline:
        try:
            found = [m for _, m in await read_all(cluster.namesrv_addr, topic)]
        except TopicNotExistError:
            found = []
        if len(found) >= want:
            return found
        await asyncio.sleep(0.2)
    return found


async def update_group(cluster: LocalCluster, pool: ChannelPool, topic: str, config: SubscriptionGroupConfig) -> None:
    route = await NameServerClient([cluster.namesrv_addr], pool).get_route_info_by_topic(topic)
    admin = ConsumerAdminCalls(pool)
    for broker in route.broker_datas:
        addr = broker.master_addr()
        assert addr is not None
        await admin.update_subscription_group(addr, config)


def any_broker(group: str, topic: str, **kwargs: int) -> list[service_pb2.ReceiveMessageRequest]:
    return [receive_request(group, topic, broker_name=b, **kwargs) for b in BROKERS]


async def test_forward_to_dead_letter_queue_moves_the_message_and_spends_the_handle(
    cluster: LocalCluster, activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    sent = await send_all(producer, topic, 1, body_prefix="dead")
    (message,) = await receive_until(activity, any_broker("v2c_fwd", topic), 1)
    request = service_pb2.ForwardMessageToDeadLetterQueueRequest(
        group=resource("v2c_fwd"),
        topic=resource(topic),
        receipt_handle=message.system_properties.receipt_handle,
        message_id=message.system_properties.message_id,
        delivery_attempt=1,
        max_delivery_attempts=17,
    )
    answer = await activity.forward_message_to_dead_letter_queue(request, CTX)
    assert answer.status.code == Code.OK, answer
    (dead,) = await stored(cluster, dlq_topic("v2c_fwd"), 1)
    assert (dead.uniq_key, dead.body) == next(iter(sent.items()))
    spent = await activity.ack_message(ack_request("v2c_fwd", topic, [message]), CTX)
    assert spent.status.code == Code.INVALID_RECEIPT_HANDLE
    again = await activity.forward_message_to_dead_letter_queue(request, CTX)
    assert again.status.code == Code.INVALID_RECEIPT_HANDLE
    assert len(await stored(cluster, dlq_topic("v2c_fwd"), 1)) == 1
    for broker in BROKERS:
        empty = await receive(activity, receive_request("v2c_fwd", topic, broker_name=broker))
        assert empty.status.code == Code.MESSAGE_NOT_FOUND


async def test_a_message_past_max_attempts_goes_to_the_dlq_instead_of_the_client(
    cluster: LocalCluster, pool: ChannelPool, producer: DefaultMQProducer, topic: str
) -> None:
    group = "v2c_max_attempts"
    fast = new_activity(cluster, pool, ConsumerActivityConfig(min_invisible_time_ms_for_recv=1_000))
    sent = await send_all(producer, topic, 1)
    (first,) = await receive_until(fast, any_broker(group, topic, invisible_ms=1_000), 1)
    assert first.system_properties.delivery_attempt == 1
    (retried,) = await stored(cluster, retry_topic(group), 1)  # revived: reconsume times 1, attempt 2 next
    assert retried.reconsume_times == 1
    # the group's limit drops to one attempt while the message waits: the gateway dead-letters it
    await update_group(cluster, pool, topic, SubscriptionGroupConfig(group, retry_max_times=0))
    fresh = new_activity(cluster, pool)
    for broker in BROKERS:
        answer = await receive(fresh, receive_request(group, topic, broker_name=broker))
        assert answer.messages == []
    (dead,) = await stored(cluster, dlq_topic(group), 1)
    assert dead.uniq_key in sent
    await fast.close()
    await fresh.close()


async def test_query_assignment_per_broker_or_per_queue_for_fifo_groups(
    cluster: LocalCluster, pool: ChannelPool, activity: ConsumerActivity, topic: str
) -> None:
    endpoints = definition_pb2.Endpoints(addresses=[definition_pb2.Address(host="127.0.0.1", port=8081)])

    def query(group: str, name: str = topic) -> service_pb2.QueryAssignmentRequest:
        return service_pb2.QueryAssignmentRequest(topic=resource(name), group=resource(group), endpoints=endpoints)

    answer = await activity.query_assignment(query("v2c_assign"), CTX)
    assert answer.status.code == Code.OK
    queues = [a.message_queue for a in answer.assignments]
    assert sorted(q.broker.name for q in queues) == list(BROKERS)
    for queue in queues:
        assert (queue.id, queue.broker.id, queue.topic.name) == (-1, 0, topic)
        assert queue.permission == definition_pb2.Permission.READ_WRITE
        assert queue.broker.endpoints.scheme == definition_pb2.AddressScheme.IPv4
        assert queue.broker.endpoints.addresses[0].port == 8081
    await update_group(cluster, pool, topic, SubscriptionGroupConfig("v2c_fifo", consume_message_orderly=True))
    fifo = await activity.query_assignment(query("v2c_fifo"), CTX)
    assert sorted((a.message_queue.broker.name, a.message_queue.id) for a in fifo.assignments) == [
        (b, i) for b in BROKERS for i in range(4)
    ]
    assert (await activity.query_assignment(query("v2c_assign", "v2c_no_topic"), CTX)).status.code == (
        Code.TOPIC_NOT_FOUND
    )
    assert (await activity.query_assignment(query("bad group!"), CTX)).status.code == Code.ILLEGAL_CONSUMER_GROUP


async def test_pull_api_round_trip(activity: ConsumerActivity, producer: DefaultMQProducer, topic: str) -> None:
    sent = await send_all(producer, topic, 16)
    group = "v2c_pull"
    pulled: dict[str, bytes] = {}
    for broker in BROKERS:
        for queue_id in range(4):
            queue = definition_pb2.MessageQueue(
                topic=resource(topic), id=queue_id, broker=definition_pb2.Broker(name=broker)
            )
            begin = await activity.query_offset(service_pb2.QueryOffsetRequest(message_queue=queue), CTX)
            end = await activity.query_offset(
                service_pb2.QueryOffsetRequest(message_queue=queue, query_offset_policy=definition_pb2.END), CTX
            )
            assert (begin.status.code, begin.offset) == (Code.OK, 0)
            assert end.status.code == Code.OK
            pull = service_pb2.PullMessageRequest(
                group=resource(group),
                message_queue=queue,
                offset=0,
                batch_size=32,
                filter_expression=definition_pb2.FilterExpression(expression="*"),
            )
            responses = [r async for r in activity.pull_message(pull, CTX, 10_000.0)]
            kinds = [r.WhichOneof("content") for r in responses]
            assert kinds == ["status"] + ["message"] * end.offset + ["next_offset"], kinds
            assert responses[0].status.code == (Code.OK if end.offset else Code.MESSAGE_NOT_FOUND)
            assert responses[-1].next_offset == end.offset
            pulled |= {r.message.system_properties.message_id: r.message.body for r in responses[1:-1]}
            missing = await activity.get_offset(
                service_pb2.GetOffsetRequest(group=resource(group), message_queue=queue), CTX
            )
            assert missing.status.code == Code.OFFSET_NOT_FOUND
            update = service_pb2.UpdateOffsetRequest(group=resource(group), message_queue=queue, offset=end.offset)
            assert (await activity.update_offset(update, CTX)).status.code == Code.OK
            got = await activity.get_offset(
                service_pb2.GetOffsetRequest(group=resource(group), message_queue=queue), CTX
            )
            assert (got.status.code, got.offset) == (Code.OK, end.offset)
    assert pulled == sent
    queue = definition_pb2.MessageQueue(topic=resource(topic), id=0, broker=definition_pb2.Broker(name="broker-a"))
    by_time = service_pb2.QueryOffsetRequest(message_queue=queue, query_offset_policy=definition_pb2.TIMESTAMP)
    by_time.timestamp.FromMilliseconds(0)
    assert (await activity.query_offset(by_time, CTX)).offset == 0
    no_time = service_pb2.QueryOffsetRequest(message_queue=queue, query_offset_policy=definition_pb2.TIMESTAMP)
    assert (await activity.query_offset(no_time, CTX)).status.code == Code.BAD_REQUEST
    negative = service_pb2.UpdateOffsetRequest(group=resource(group), message_queue=queue, offset=-1)
    assert (await activity.update_offset(negative, CTX)).status.code == Code.ILLEGAL_OFFSET
