"""ConsumerActivity against a real local cluster (mqnamesrv + broker-a + broker-b on 127.0.0.1), called directly
with v2 proto requests (the servicer is tested elsewhere): receive + convert + ack, redelivery with attempt 2
acked through a second replica, ChangeInvisibleDuration's new handle, the held empty receive, every refusal of bad
input (after which the messages are still receivable), ForwardMessageToDeadLetterQueue (the message lands in
%DLQ%<group>, its handle is spent), the max-attempts dead letter of a receive, a FIFO receive retried with its
attempt_id (and that attempt id replayed by another client: FORBIDDEN), QueryAssignment (plain and FIFO groups,
refusals) and the 5.x pull API round trip (QueryOffset, PullMessage, UpdateOffset, GetOffset)."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer import DefaultMQProducer, ProducerConfig
from mq_common.channels import ChannelPool
from mq_common.constants import dlq_topic, retry_topic
from mq_common.protocol import SubscriptionGroupConfig
from mq_gateway.v2.consumer import ConsumerActivity, ConsumerActivityConfig
from mq_gateway.v2.context import ClientContext
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from v2_consumer_testkit import (  # noqa: E402  (importable only after the path insert)
    CTX,
    ack_request,
    duration,
    new_activity,
    receive,
    receive_request,
    receive_until,
    resource,
    send_all,
    started_cluster,
    stored,
    update_group,
)

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
BROKERS = ("broker-a", "broker-b")
FAST_REDELIVERY = ConsumerActivityConfig(min_invisible_time_ms_for_recv=1_000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with started_cluster(tmp_path_factory.mktemp("v2-consumer")) as started:
        yield started


@pytest.fixture
async def producer(cluster: LocalCluster) -> AsyncIterator[DefaultMQProducer]:
    p = DefaultMQProducer.connect(ProducerConfig(producer_group="v2c_producer"), [cluster.namesrv_addr])
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


async def receive_both(
    activity: ConsumerActivity, group: str, topic: str, want: int, invisible_ms: int = 60_000
) -> list[definition_pb2.Message]:
    requests = [receive_request(group, topic, broker_name=b, invisible_ms=invisible_ms) for b in BROKERS]
    return await receive_until(activity, requests, want)


async def test_receive_converts_every_field_then_ack(
    activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    sent = await send_all(producer, topic, 8, tags="TagA")
    got = await receive_both(activity, "v2c_ack", topic, 8)
    assert {m.system_properties.message_id: m.body for m in got} == sent
    assert {m.system_properties.receipt_handle.split(" ")[5] for m in got} == set(BROKERS)
    message = got[0]
    system = message.system_properties
    assert message.topic.name == topic
    assert dict(message.user_properties) == {"p": "v"}
    assert system.tag == "TagA"
    assert list(system.keys) == [f"k{message.body.decode()[1:]}", f"x{message.body.decode()[1:]}"]
    assert system.body_digest.type == definition_pb2.DigestType.MD5
    assert system.body_digest.checksum == hashlib.md5(message.body).hexdigest().upper()
    assert system.body_encoding == definition_pb2.Encoding.IDENTITY
    assert system.message_type == definition_pb2.MessageType.NORMAL
    assert system.delivery_attempt == 1
    assert system.invisible_duration.ToMilliseconds() == 60_000
    assert system.born_timestamp.ToMilliseconds() > 0
    assert system.store_timestamp.ToMilliseconds() >= system.born_timestamp.ToMilliseconds()
    assert system.store_host
    assert system.born_host
    assert system.queue_offset >= 0
    assert 0 <= system.queue_id < 4

    acked = await activity.ack_message(ack_request("v2c_ack", topic, got[1:]), CTX)
    assert acked.status.code == Code.OK
    assert [e.status.code for e in acked.entries] == [Code.OK] * 7
    mixed = await activity.ack_message(ack_request("v2c_ack", topic, got[:2]), CTX)  # one live, one spent
    assert mixed.status.code == Code.MULTIPLE_RESULTS
    assert [e.status.code for e in mixed.entries] == [Code.OK, Code.INVALID_RECEIPT_HANDLE]
    assert [e.receipt_handle for e in mixed.entries] == [m.system_properties.receipt_handle for m in got[:2]]
    again = await activity.ack_message(ack_request("v2c_ack", topic, got[:1]), CTX)
    assert again.status.code == Code.INVALID_RECEIPT_HANDLE
    assert again.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    for broker in BROKERS:
        empty = await receive(activity, receive_request("v2c_ack", topic, broker_name=broker))
        assert empty.status.code == Code.MESSAGE_NOT_FOUND


async def test_unacked_message_comes_back_with_attempt_two_and_a_second_replica_acks_it(
    cluster: LocalCluster, pool: ChannelPool, producer: DefaultMQProducer, topic: str
) -> None:
    first_replica = new_activity(cluster, pool, FAST_REDELIVERY)
    second_replica = new_activity(cluster, pool)
    sent = await send_all(producer, topic, 2)
    first = await receive_both(first_replica, "v2c_retry", topic, 2, invisible_ms=1_000)
    assert {m.system_properties.message_id for m in first} == set(sent)
    again = await receive_both(first_replica, "v2c_retry", topic, 2)
    assert {m.system_properties.message_id for m in again} == set(sent)
    assert {(m.topic.name, m.system_properties.delivery_attempt) for m in again} == {(topic, 2)}
    stale = await second_replica.ack_message(ack_request("v2c_retry", topic, first[:1]), CTX)
    assert stale.status.code == Code.INVALID_RECEIPT_HANDLE
    acked = await second_replica.ack_message(ack_request("v2c_retry", topic, again), CTX)
    assert acked.status.code == Code.OK, acked
    await first_replica.close()
    await second_replica.close()


async def test_change_invisible_duration_returns_a_new_handle_that_acks(
    activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    await send_all(producer, topic, 1)
    (message,) = await receive_both(activity, "v2c_change", topic, 1)
    old = message.system_properties.receipt_handle

    def change(handle: str, ms: int) -> service_pb2.ChangeInvisibleDurationRequest:
        return service_pb2.ChangeInvisibleDurationRequest(
            group=resource("v2c_change"),
            topic=resource(topic),
            receipt_handle=handle,
            invisible_duration=duration(ms),
            message_id=message.system_properties.message_id,
        )

    too_long = await activity.change_invisible_duration(change(old, 13 * 3_600_000), CTX)
    assert too_long.status.code == Code.ILLEGAL_INVISIBLE_TIME
    garbage = await activity.change_invisible_duration(change("not a handle", 30_000), CTX)
    assert garbage.status.code == Code.INVALID_RECEIPT_HANDLE
    changed = await activity.change_invisible_duration(change(old, 120_000), CTX)
    assert changed.status.code == Code.OK
    assert changed.receipt_handle
    assert changed.receipt_handle != old
    replaced = service_pb2.AckMessageRequest(
        group=resource("v2c_change"),
        topic=resource(topic),
        entries=[service_pb2.AckMessageEntry(message_id="x", receipt_handle=old)],
    )
    assert (await activity.ack_message(replaced, CTX)).status.code == Code.INVALID_RECEIPT_HANDLE
    replaced.entries[0].receipt_handle = changed.receipt_handle
    assert (await activity.ack_message(replaced, CTX)).status.code == Code.OK


async def test_empty_receive_is_held_for_the_poll_time(activity: ConsumerActivity, topic: str) -> None:
    started = time.monotonic()
    answer = await receive(activity, receive_request("v2c_empty", topic, broker_name="broker-a", poll_ms=5_000))
    waited_s = time.monotonic() - started
    assert answer.status.code == Code.MESSAGE_NOT_FOUND
    assert answer.messages == []
    assert waited_s >= 4.0


async def test_every_bad_input_is_refused_and_nothing_is_lost(
    activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    sent = await send_all(producer, topic, 4)
    group = "v2c_bad"
    refusals = {
        Code.ILLEGAL_INVISIBLE_TIME: [
            receive_request(group, topic, invisible_ms=1000),
            receive_request(group, topic, invisible_ms=13 * 3600000),
        ],
        Code.ILLEGAL_FILTER_EXPRESSION: [
            receive_request(group, topic, tag="||"),
            receive_request(group, topic, tag="a||\x01"),
        ],
        Code.ILLEGAL_TOPIC: [receive_request(group, "bad topic!")],
        Code.ILLEGAL_CONSUMER_GROUP: [receive_request("bad group!", topic)],
        Code.TOPIC_NOT_FOUND: [receive_request(group, "v2c_no_such_topic")],
        Code.NOT_FOUND: [receive_request(group, topic, broker_name="broker-zz")],
    }
    for code, requests in refusals.items():
        for request in requests:
            answer = await receive(activity, request)
            assert answer.status.code == code, (request, answer.status)
            assert answer.status.message
    sql = receive_request(group, topic)
    sql.filter_expression.type = definition_pb2.FilterType.SQL
    sql.filter_expression.expression = "a > 1"
    assert (await receive(activity, sql)).status.code == Code.NOT_IMPLEMENTED
    short_deadline = await receive(activity, receive_request(group, topic), remaining_ms=3_000)
    assert short_deadline.status.code == Code.ILLEGAL_POLLING_TIME

    garbage = service_pb2.AckMessageRequest(
        group=resource(group),
        topic=resource(topic),
        entries=[service_pb2.AckMessageEntry(message_id="m", receipt_handle="garbage")],
    )
    answered = await activity.ack_message(garbage, CTX)
    assert answered.status.code == Code.INVALID_RECEIPT_HANDLE
    assert answered.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    forward = service_pb2.ForwardMessageToDeadLetterQueueRequest(
        group=resource(group), topic=resource(topic), receipt_handle="garbage", message_id="m"
    )
    assert (
        await activity.forward_message_to_dead_letter_queue(forward, CTX)
    ).status.code == Code.INVALID_RECEIPT_HANDLE

    got = await receive_both(activity, group, topic, 4)
    assert {m.system_properties.message_id for m in got} == set(sent)
    assert (await activity.ack_message(ack_request(group, topic, got), CTX)).status.code == Code.OK


async def test_messages_not_handed_over_come_back_soon(
    activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    sent = await send_all(producer, topic, 8)
    hour_ms = 3_600_000
    stream = activity.receive_message(
        receive_request("v2c_nack", topic, broker_name="broker-a", invisible_ms=hour_ms), CTX, 30_000.0
    )
    assert (await anext(stream)).status.code == Code.OK
    first = (await anext(stream)).message
    await stream.aclose()  # the client went away while the first message was being written
    await activity.close()  # waits for the nacks
    back = await receive_both(activity, "v2c_nack", topic, len(sent), invisible_ms=hour_ms)
    assert first.system_properties.message_id in {m.system_properties.message_id for m in back}
    assert {m.system_properties.message_id for m in back} == set(sent)


async def test_batch_is_clamped_to_32_and_auto_renew_pops_with_the_default(
    activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    await send_all(producer, topic, 80)
    answer = await receive(activity, receive_request("v2c_batch", topic, broker_name="broker-a", batch_size=1_000))
    assert answer.status.code == Code.OK
    assert 1 <= len(answer.messages) <= 32
    renew = receive_request("v2c_batch", topic, broker_name="broker-b", invisible_ms=None, auto_renew=True)
    renewed = await receive(activity, renew)
    assert renewed.status.code == Code.OK
    assert {m.system_properties.invisible_duration.ToMilliseconds() for m in renewed.messages} == {60_000}


async def test_forward_to_dead_letter_queue_moves_the_message_and_spends_the_handle(
    cluster: LocalCluster, activity: ConsumerActivity, producer: DefaultMQProducer, topic: str
) -> None:
    sent = await send_all(producer, topic, 1, body_prefix="dead")
    (message,) = await receive_both(activity, "v2c_fwd", topic, 1)
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
    (first,) = await receive_both(fast, group, topic, 1, invisible_ms=1_000)
    assert first.system_properties.delivery_attempt == 1
    (retried,) = await stored(cluster, retry_topic(group), 1)  # revived: reconsume times 1, attempt 2 next
    assert retried.reconsume_times == 1
    # the group's config without a topic: through the (now routed) %RETRY%<group>
    assert (await fast.subscription_group_config(group)).retry_max_times == 16
    # the group's limit drops to one attempt while the message waits: the gateway dead-letters it
    await update_group(cluster, pool, topic, SubscriptionGroupConfig(group, retry_max_times=0))
    fresh = new_activity(cluster, pool)
    assert (await fresh.subscription_group_config(group)).retry_max_times == 0
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


async def test_fifo_receive_retried_with_its_attempt_id_gets_the_same_messages(
    activity: ConsumerActivity, pool: ChannelPool, cluster: LocalCluster, producer: DefaultMQProducer, topic: str
) -> None:
    await update_group(cluster, pool, topic, SubscriptionGroupConfig("v2c_attempt", consume_message_orderly=True))
    await send_all(producer, topic, 8)

    async def receive_attempt(attempt_id: str, ctx: ClientContext = CTX) -> list[tuple[str, int]]:
        request = receive_request("v2c_attempt", topic, broker_name="broker-a")
        request.attempt_id = attempt_id
        responses = [r async for r in activity.receive_message(request, ctx, 30_000.0)]
        return sorted(
            (r.message.system_properties.message_id, r.message.system_properties.delivery_attempt)
            for r in responses
            if r.HasField("message")
        )

    first = await receive_attempt("attempt-1")
    assert first
    assert await receive_attempt("attempt-1") == first  # a retry of the same attempt: the same messages, attempt 1
    ids = {message_id for message_id, _ in first}
    later = {message_id for message_id, _ in await receive_attempt("attempt-2")}
    assert not later & ids  # blocked until acked or visible again
    other = replace(CTX, client_id="127.0.0.1@4243@0@v2c-other")  # another client replaying the attempt id
    replay = receive_request("v2c_attempt", topic, broker_name="broker-a")
    replay.attempt_id = "attempt-1"
    responses = [r async for r in activity.receive_message(replay, other, 30_000.0)]
    assert not [r for r in responses if r.HasField("message")]
    statuses = [r.status for r in responses if r.HasField("status")]
    assert [s.code for s in statuses] == [Code.FORBIDDEN]  # the broker's ILLEGAL_OPERATION 604
    assert "issued to another client" in statuses[0].message
    assert await receive_attempt("attempt-1") == first  # nothing changed: the owner's retry still gets them


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


async def test_a_receive_named_for_an_empty_broker_takes_another_brokers_messages_at_once(
    cluster: LocalCluster, activity: ConsumerActivity, producer: DefaultMQProducer, request: pytest.FixtureRequest
) -> None:
    # The SDKs round-robin receives over every read queue of every broker: a receive naming an empty broker must
    # not long-poll it while another broker holds messages.
    topic = await make_topic(cluster, request.node.name)
    sent = await send_all(producer, topic, 8)
    stored_on = {m.store_host for m in await stored(cluster, topic, 8)}
    assert len(stored_on) == 2  # round robin over both brokers' queues
    group = "v2c_other_broker"
    got: list[definition_pb2.Message] = []
    for _ in range(8):
        # once broker-a is empty, a receive naming it answers broker-b's messages (not MESSAGE_NOT_FOUND after
        # its 20 s poll)
        answer = await receive(activity, receive_request(group, topic, broker_name="broker-a", poll_ms=20_000))
        assert answer.status.code == Code.OK, answer.status
        got += answer.messages
        if len(got) >= 8:
            break
    assert sorted(m.body for m in got) == sorted(sent.values())
    ack = await activity.ack_message(ack_request(group, topic, got), CTX)
    assert ack.status.code == Code.OK
