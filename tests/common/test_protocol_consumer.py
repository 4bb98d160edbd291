"""mq_common.protocol.consumer: proto converters round-trip, enum defaults, RocketMQ's JSON of a group config,
retry/DLQ topic names and group validation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mq.broker.v1 import broker_pb2
from mq_common.constants import GROUP_MAX_LENGTH, dlq_topic, retry_topic, validate_group
from mq_common.protocol import (
    ConsumerConnection,
    ConsumerConnectionInfo,
    ConsumerQueueOffset,
    ConsumeStats,
    ConsumeType,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    HeartbeatData,
    MessageModel,
    QueryConsumerOffsetRequestHeader,
    QueueConsumeStats,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SubscriptionData,
    SubscriptionGroupConfig,
    UnregisterClientRequestHeader,
    convert,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789%|", min_size=1, max_size=12)
i32 = st.integers(min_value=0, max_value=2**31 - 1)
i64 = st.integers(min_value=-1, max_value=2**63 - 1)

group_configs = st.builds(
    SubscriptionGroupConfig,
    group_name=names,
    consume_enable=st.booleans(),
    consume_from_min_enable=st.booleans(),
    consume_broadcast_enable=st.booleans(),
    consume_message_orderly=st.booleans(),
    retry_queue_nums=i32,
    retry_max_times=i32,
    broker_id=i64,
    which_broker_when_consume_slowly=i64,
    notify_consumer_ids_changed_enable=st.booleans(),
    group_sys_flag=i32,
    consume_timeout_minute=i32,
    attributes=st.dictionaries(names, names, max_size=3),
)
subscriptions = st.builds(SubscriptionData, names, names)
queue_stats = st.builds(QueueConsumeStats, names, names, i32, i64, i64, i64, i64)
connections = st.builds(ConsumerConnection, names, names, names, names, i64)


@given(group_configs)
def test_subscription_group_config_round_trips_proto_and_json(config: SubscriptionGroupConfig) -> None:
    assert convert.subscription_group_config_from_proto(convert.subscription_group_config_to_proto(config)) == config
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config


@given(st.builds(ConsumerQueueOffset, names, names, i32, i64), st.lists(queue_stats, max_size=3))
def test_offsets_and_consume_stats_round_trip(offset: ConsumerQueueOffset, queues: list[QueueConsumeStats]) -> None:
    assert convert.consumer_queue_offset_from_proto(convert.consumer_queue_offset_to_proto(offset)) == offset
    stats = ConsumeStats(tuple(queues), 2.5)
    assert convert.consume_stats_from_proto(convert.consume_stats_to_proto(stats)) == stats


@given(
    st.builds(
        HeartbeatData,
        names,
        names,
        st.sampled_from(ConsumeType),
        st.sampled_from(MessageModel),
        st.lists(subscriptions, max_size=3).map(tuple),
        names,
        names,
    )
)
def test_heartbeat_round_trips(heartbeat: HeartbeatData) -> None:
    assert convert.heartbeat_from_proto(convert.heartbeat_to_proto(heartbeat)) == heartbeat


@given(
    st.builds(
        ConsumerConnectionInfo,
        st.lists(connections, max_size=3).map(tuple),
        st.lists(subscriptions, max_size=3).map(tuple),
        st.sampled_from(ConsumeType),
        st.sampled_from(MessageModel),
    )
)
def test_connection_info_round_trips(info: ConsumerConnectionInfo) -> None:
    assert convert.consumer_connection_info_from_proto(convert.consumer_connection_info_to_proto(info)) == info


@given(names, names, i32, i64, st.booleans())
def test_request_headers_round_trip(group: str, topic: str, queue_id: int, ts: int, flag: bool) -> None:
    pairs = [
        (QueryConsumerOffsetRequestHeader(group, topic, queue_id, flag), "query_consumer_offset_request"),
        (GetConsumeStatsRequestHeader(group, topic), "consume_stats_request"),
        (SearchOffsetRequestHeader(topic, queue_id, ts), "search_offset_request"),
        (ResetOffsetRequestHeader(group, topic, ts, flag), "reset_offset_request"),
        (DeleteSubscriptionGroupRequestHeader(group, flag), "delete_group_request"),
        (UnregisterClientRequestHeader(topic, group), "unregister_client_request"),
    ]
    for header, name in pairs:
        to_proto = getattr(convert, f"{name}_to_proto")
        from_proto = getattr(convert, f"{name}_from_proto")
        assert from_proto(to_proto(header)) == header


def test_unspecified_enums_read_as_push_clustering() -> None:
    heartbeat = convert.heartbeat_from_proto(broker_pb2.HeartbeatRequest(client_id="c", consumer_group="G"))
    assert heartbeat.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert heartbeat.message_model is MessageModel.CLUSTERING
    assert convert.heartbeat_to_proto(HeartbeatData("c", "G", ConsumeType.CONSUME_POP)).consume_type == (
        broker_pb2.CONSUME_TYPE_CONSUME_POP
    )


def test_retry_and_dlq_topics_and_group_names() -> None:
    assert retry_topic("G") == "%RETRY%G"
    assert dlq_topic("G") == "%DLQ%G"
    assert validate_group("CID_ONS-HTTP-PROXY") is None
    assert validate_group("G" * GROUP_MAX_LENGTH) is None
    assert validate_group("G" * (GROUP_MAX_LENGTH + 1)) == (
        f"The specified group: {'G' * 121}, is longer than group max length: 120"
    )
    assert validate_group(" ") == "The specified group is blank."
    assert "illegal characters" in (validate_group("a.b") or "")
