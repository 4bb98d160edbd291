"""The broker's consumer RPCs through a real in-process gRPC broker: subscription groups, consumer offsets, consume
stats, search/reset offset by time, heartbeats and connections, with the refusals of bad input."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import RunningBrokers
from consumer_testkit import commit, create_topic, heartbeat, offset, query, send_to_queue
from mq.broker.v1 import broker_pb2
from mq_broker.controller import BrokerController
from mq_common.codec import iter_messages
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    from mq.broker.v1 import broker_pb2_grpc

Broker = tuple[BrokerController, "broker_pb2_grpc.BrokerAsyncStub"]
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01


@pytest.fixture
async def strict_broker(brokers: RunningBrokers, tmp_path: Path) -> Broker:
    """A broker that does not auto-create subscription groups."""
    return await brokers.start(tmp_path / "strict", auto_create_subscription_group=False)


async def test_subscription_group_crud(broker: Broker) -> None:
    controller, stub = broker
    config = broker_pb2.SubscriptionGroupConfig(
        group_name="G1", consume_enable=True, retry_queue_nums=2, retry_max_times=3, attributes={"+k": "v"}
    )
    assert (await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))).code == 0
    everything = await stub.GetAllSubscriptionGroups(broker_pb2.GetAllSubscriptionGroupsRequest())
    assert everything.code == ResponseCode.SUCCESS
    by_name = {c.group_name: c for c in everything.configs}
    assert by_name["G1"] == config
    assert {"TOOLS_CONSUMER", "CID_RMQ_SYS_TRANS"} <= set(by_name)
    assert everything.data_version.counter >= 1
    assert controller.subscription_groups is not None
    assert controller.subscription_groups.contains("G1")

    for bad in ["", "a b", "x" * 121, "g/1"]:
        refused = await stub.UpdateSubscriptionGroup(
            broker_pb2.UpdateSubscriptionGroupRequest(config=broker_pb2.SubscriptionGroupConfig(group_name=bad))
        )
        assert refused.code == ResponseCode.INVALID_PARAMETER, bad
        assert refused.remark
    negative = broker_pb2.SubscriptionGroupConfig(group_name="G2", retry_queue_nums=-1)
    refused = await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=negative))
    assert refused.code == ResponseCode.INVALID_PARAMETER

    await create_topic(stub, "T", 1)
    await send_to_queue(stub, "T", 0, 2)
    assert await commit(stub, offset("G1", "T", 0, 1)) == [ResponseCode.SUCCESS]
    kept = await stub.DeleteSubscriptionGroup(broker_pb2.DeleteSubscriptionGroupRequest(group_name="G1"))
    assert kept.code == ResponseCode.SUCCESS
    assert (await query(stub, "G1", "T", 0)).offset == 1  # without clean_offset the offsets stay
    await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))
    cleaned = await stub.DeleteSubscriptionGroup(
        broker_pb2.DeleteSubscriptionGroupRequest(group_name="G1", clean_offset=True)
    )
    assert cleaned.code == ResponseCode.SUCCESS
    assert (await query(stub, "G1", "T", 0)).code == ResponseCode.QUERY_NOT_FOUND
    after = await stub.GetAllSubscriptionGroups(broker_pb2.GetAllSubscriptionGroupsRequest())
    assert "G1" not in {c.group_name for c in after.configs}
    unknown = await stub.DeleteSubscriptionGroup(broker_pb2.DeleteSubscriptionGroupRequest(group_name="Nope"))
    assert unknown.code == ResponseCode.SUCCESS
    garbage = await stub.DeleteSubscriptionGroup(broker_pb2.DeleteSubscriptionGroupRequest(group_name="a b"))
    assert garbage.code == ResponseCode.INVALID_PARAMETER


async def test_update_and_query_offsets_with_every_refusal(broker: Broker) -> None:
    _controller, stub = broker
    await create_topic(stub, "T", 2)
    await send_to_queue(stub, "T", 0, 5)
    codes = await commit(
        stub,
        offset("G", "T", 0, 3),
        offset("G", "T", 0, -1),
        offset("G", "T", 0, 6),
        offset("G", "Nope", 0, 0),
        offset("bad group", "T", 0, 0),
        offset("G", "T", 2, 0),
        offset("G", "bad topic", 0, 0),
        offset("G", "T", 1, 0),
    )
    invalid, missing = ResponseCode.INVALID_PARAMETER, ResponseCode.TOPIC_NOT_EXIST
    assert codes == [0, invalid, invalid, missing, invalid, invalid, invalid, 0]
    found = await query(stub, "G", "T", 0)
    assert (found.code, found.offset) == (ResponseCode.SUCCESS, 3)
    assert await commit(stub, offset("G", "T", 0, 5)) == [0]  # the max offset itself: everything consumed
    assert (await query(stub, "G", "T", 0)).offset == 5
    none = await query(stub, "Other", "T", 0)
    assert none.code == ResponseCode.QUERY_NOT_FOUND
    assert none.remark
    zero = await query(stub, "Other", "T", 0, set_zero=True)  # queue from 0, first message just written: cached
    assert (zero.code, zero.offset) == (ResponseCode.SUCCESS, 0)
    await create_topic(stub, "Empty", 1)
    empty = await query(stub, "Other", "Empty", 0, set_zero=True)
    assert empty.code == ResponseCode.QUERY_NOT_FOUND
    assert (await query(stub, "a b", "T", 0)).code == ResponseCode.INVALID_PARAMETER
    assert (await query(stub, "G", "", 0)).code == ResponseCode.INVALID_PARAMETER


async def test_unknown_group_without_auto_create_is_refused(strict_broker: Broker) -> None:
    _controller, stub = strict_broker
    await create_topic(stub, "T", 1)
    await send_to_queue(stub, "T", 0, 1)
    assert await commit(stub, offset("Unknown", "T", 0, 0)) == [ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST]
    reset = await stub.ResetOffsetByTimestamp(
        broker_pb2.ResetOffsetByTimestampRequest(consumer_group="Unknown", topic="T", timestamp_ms=0)
    )
    assert reset.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    config = broker_pb2.SubscriptionGroupConfig(group_name="Known", retry_queue_nums=1, retry_max_times=16)
    await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))
    assert await commit(stub, offset("Known", "T", 0, 1)) == [ResponseCode.SUCCESS]
    assert await commit(stub, offset("TOOLS_CONSUMER", "T", 0, 0)) == [ResponseCode.SUCCESS]  # a system group


async def test_consume_stats(broker: Broker) -> None:
    _controller, stub = broker
    await create_topic(stub, "T", 2)
    await send_to_queue(stub, "T", 0, 5)
    await send_to_queue(stub, "T", 1, 2)
    await create_topic(stub, "U", 1)
    await commit(stub, offset("G", "T", 0, 3), offset("G", "U", 0, 0))
    stats = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="G"))
    assert stats.code == ResponseCode.SUCCESS
    rows = {(q.topic, q.queue_id): q for q in stats.queues}
    assert set(rows) == {("T", 0), ("T", 1), ("U", 0)}  # no %RETRY%G topic yet
    q0 = rows[("T", 0)]
    assert (q0.broker_name, q0.broker_offset, q0.consumer_offset, q0.inflight_count) == ("broker-a", 5, 3, 0)
    pulled = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="G", topic="T", queue_id=0, queue_offset=2, max_msg_nums=1)
    )
    (third,) = iter_messages(pulled.message_bytes)
    assert q0.last_timestamp_ms == third.store_timestamp_ms > 0
    assert (rows[("T", 1)].broker_offset, rows[("T", 1)].consumer_offset, rows[("T", 1)].last_timestamp_ms) == (2, 0, 0)
    assert stats.consume_tps == 0.0

    assert (await stub.Heartbeat(heartbeat("c1", "G", "T"))).code == ResponseCode.SUCCESS  # creates %RETRY%G
    online = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="G"))
    # online and subscribed to T only: U is left out; the retry topic (1 queue) is in
    assert {(q.topic, q.queue_id) for q in online.queues} == {("%RETRY%G", 0), ("T", 0), ("T", 1)}
    one = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="G", topic="T"))
    assert {(q.topic, q.queue_id) for q in one.queues} == {("T", 0), ("T", 1)}
    bad = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="a b"))
    assert bad.code == ResponseCode.INVALID_PARAMETER


async def test_consume_stats_count_inflight_through_the_pop_callback(broker: Broker) -> None:
    controller, stub = broker
    processor = controller.consumer_manage_processor
    assert processor is not None
    processor.inflight_counter = lambda group, topic, queue_id: 7 if (group, topic, queue_id) == ("G", "T", 0) else 0
    await create_topic(stub, "T", 1)
    await commit(stub, offset("G", "T", 0, 0))
    stats = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="G", topic="T"))
    assert [q.inflight_count for q in stats.queues] == [7]


async def test_search_offset_by_timestamp(broker: Broker) -> None:
    _controller, stub = broker
    await create_topic(stub, "T", 2)
    for _ in range(3):  # three frames: store times that need not differ, but never go back
        await send_to_queue(stub, "T", 0, 2)
    pulled = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="G", topic="T", queue_id=0, queue_offset=0, max_msg_nums=32)
    )
    times = [m.store_timestamp_ms for m in iter_messages(pulled.message_bytes)]
    assert len(times) == 6
    assert times == sorted(times)

    async def search(
        timestamp_ms: int, queue_id: int = 0, topic: str = "T"
    ) -> broker_pb2.SearchOffsetByTimestampResponse:
        return await stub.SearchOffsetByTimestamp(
            broker_pb2.SearchOffsetByTimestampRequest(topic=topic, queue_id=queue_id, timestamp_ms=timestamp_ms)
        )

    for t in times:
        found = await search(t)
        assert (found.code, found.offset) == (ResponseCode.SUCCESS, times.index(t))
    assert (await search(0)).offset == 0
    assert (await search(times[-1] + 1)).offset == 6
    assert (await search(FAR_FUTURE_MS, queue_id=1)).offset == 0  # an empty queue
    assert (await search(0, topic="Nope")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await search(0, queue_id=2)).code == ResponseCode.INVALID_PARAMETER
    assert (await search(0, topic="a b")).code == ResponseCode.INVALID_PARAMETER


async def test_reset_offset_by_timestamp(broker: Broker) -> None:
    _controller, stub = broker
    await create_topic(stub, "T", 2)
    await send_to_queue(stub, "T", 0, 4)
    await send_to_queue(stub, "T", 1, 2)
    await commit(stub, offset("G", "T", 0, 4))

    async def reset(
        timestamp_ms: int, force: bool = False, group: str = "G"
    ) -> broker_pb2.ResetOffsetByTimestampResponse:
        return await stub.ResetOffsetByTimestamp(
            broker_pb2.ResetOffsetByTimestampRequest(
                consumer_group=group, topic="T", timestamp_ms=timestamp_ms, force=force
            )
        )

    back = await reset(0)  # to the beginning: moving back needs no force; queue 1 had no offset
    assert back.code == ResponseCode.SUCCESS
    assert [(o.queue_id, o.offset) for o in back.offsets] == [(0, 0), (1, 0)]
    assert (await query(stub, "G", "T", 0)).offset == 0
    ahead = await reset(FAR_FUTURE_MS)  # forward without force: unchanged
    assert [o.offset for o in ahead.offsets] == [0, 0]
    forced = await reset(FAR_FUTURE_MS, force=True)
    assert [o.offset for o in forced.offsets] == [4, 2]
    await reset(0)
    to_max = await reset(-1, force=True)
    assert [o.offset for o in to_max.offsets] == [4, 2]
    assert (await query(stub, "G", "T", 1)).offset == 2
    assert (await reset(-2)).code == ResponseCode.INVALID_PARAMETER
    assert (await reset(0, group="a b")).code == ResponseCode.INVALID_PARAMETER
    missing = await stub.ResetOffsetByTimestamp(
        broker_pb2.ResetOffsetByTimestampRequest(consumer_group="G", topic="Nope", timestamp_ms=0)
    )
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST


async def test_heartbeat_connections_and_unregister(broker: Broker) -> None:
    controller, stub = broker
    assert (await stub.Heartbeat(heartbeat("c2", "G", "T", "U"))).code == ResponseCode.SUCCESS
    assert (await stub.Heartbeat(heartbeat("c1", "G", "T", "U"))).code == ResponseCode.SUCCESS
    listed = await stub.GetConsumerListByGroup(broker_pb2.GetConsumerListByGroupRequest(consumer_group="G"))
    assert (listed.code, list(listed.client_ids)) == (ResponseCode.SUCCESS, ["c1", "c2"])
    conns = await stub.GetConsumerConnectionList(broker_pb2.GetConsumerConnectionListRequest(consumer_group="G"))
    assert conns.code == ResponseCode.SUCCESS
    assert [c.client_id for c in conns.connections] == ["c1", "c2"]
    assert all(c.client_addr.startswith("127.0.0.1:") for c in conns.connections)
    assert {(c.language, c.version) for c in conns.connections} == {("PYTHON", "V5_3_0")}
    assert all(c.last_update_timestamp_ms > 0 for c in conns.connections)
    assert [(s.topic, s.sub_string) for s in conns.subscriptions] == [("T", "*"), ("U", "*")]
    assert conns.consume_type == broker_pb2.CONSUME_TYPE_CONSUME_PASSIVELY
    assert conns.message_model == broker_pb2.MESSAGE_MODEL_CLUSTERING
    assert controller.topics is not None
    retry = controller.topics.select_topic_config("%RETRY%G")  # the group's retry topic, retryQueueNums queues
    assert retry is not None
    assert (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)

    left = await stub.UnregisterClient(broker_pb2.UnregisterClientRequest(client_id="c1", consumer_group="G"))
    assert left.code == ResponseCode.SUCCESS
    listed = await stub.GetConsumerListByGroup(broker_pb2.GetConsumerListByGroupRequest(consumer_group="G"))
    assert list(listed.client_ids) == ["c2"]
    await stub.UnregisterClient(broker_pb2.UnregisterClientRequest(client_id="c2", consumer_group="G"))
    gone = await stub.GetConsumerConnectionList(broker_pb2.GetConsumerConnectionListRequest(consumer_group="G"))
    assert (gone.code, gone.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[G] not online")
    empty = await stub.GetConsumerListByGroup(broker_pb2.GetConsumerListByGroupRequest(consumer_group="G"))
    assert (empty.code, list(empty.client_ids)) == (ResponseCode.SUCCESS, [])


@pytest.mark.parametrize(
    "request_",
    [
        heartbeat("c1", "bad group", "T"),
        heartbeat("", "G", "T"),
        heartbeat("c1", "G", "bad topic"),
        heartbeat("c1", "", "T"),
    ],
)
async def test_bad_heartbeats_are_refused(broker: Broker, request_: broker_pb2.HeartbeatRequest) -> None:
    controller, stub = broker
    refused = await stub.Heartbeat(request_)
    assert refused.code == ResponseCode.INVALID_PARAMETER
    assert refused.remark
    assert controller.consumer_manager.groups() == []


async def test_bad_names_in_connection_calls(broker: Broker) -> None:
    _controller, stub = broker
    listed = await stub.GetConsumerListByGroup(broker_pb2.GetConsumerListByGroupRequest(consumer_group="a/b"))
    assert listed.code == ResponseCode.INVALID_PARAMETER
    conns = await stub.GetConsumerConnectionList(broker_pb2.GetConsumerConnectionListRequest(consumer_group=""))
    assert conns.code == ResponseCode.INVALID_PARAMETER
    left = await stub.UnregisterClient(broker_pb2.UnregisterClientRequest(client_id="c", consumer_group="a b"))
    assert left.code == ResponseCode.INVALID_PARAMETER
