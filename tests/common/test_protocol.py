"""mq_common.protocol: proto converters round-trip, PermName semantics of ``perm``, and the one gRPC status
-> MQError mapping."""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq_common.constants import PermName
from mq_common.errors import InvalidParameterError, RemotingError, RemotingTimeoutError
from mq_common.grpc_errors import transport_error
from mq_common.protocol import (
    BrokerData,
    BrokerLiveInfo,
    BrokerRegistration,
    ClusterInfo,
    ConsumerSendMsgBackRequestHeader,
    DataVersion,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullStatus,
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueueData,
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicConfig,
    TopicQueueOffset,
    TopicRouteData,
    ViewMessageRequestHeader,
    ViewMessageResponseHeader,
    convert,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=12)
i32 = st.integers(min_value=0, max_value=2**31 - 1)
i64 = st.integers(min_value=0, max_value=2**63 - 1)
perms = st.integers(min_value=0, max_value=0xF)
addrs = st.builds(lambda h, p: f"{h}:{p}", names, st.integers(min_value=1, max_value=65_535))

topic_configs = st.builds(
    TopicConfig,
    topic_name=names,
    read_queue_nums=i32,
    write_queue_nums=i32,
    perm=perms,
    topic_sys_flag=i32,
    order=st.booleans(),
    attributes=st.dictionaries(names, names, max_size=3),
)
data_versions = st.builds(DataVersion, i64, i64, i64)
broker_datas = st.builds(BrokerData, names, names, st.dictionaries(i64, addrs, max_size=3))
queue_datas = st.builds(QueueData, names, i32, i32, perms, i32)


@given(topic_configs)
def test_topic_config_round_trips(config: TopicConfig) -> None:
    assert convert.topic_config_from_proto(convert.topic_config_to_proto(config)) == config
    assert TopicConfig.from_json(config.to_json()) == config


@given(
    st.builds(
        BrokerRegistration,
        cluster_name=names,
        broker_name=names,
        broker_id=i64,
        broker_addr=addrs,
        topic_configs=st.dictionaries(names, topic_configs, max_size=3),
        data_version=data_versions,
        ha_server_addr=st.one_of(st.just(""), addrs),
        heartbeat_timeout_ms=i64,
    )
)
def test_registration_round_trips(registration: BrokerRegistration) -> None:
    assert convert.registration_from_proto(convert.registration_to_proto(registration)) == registration
    unregister = convert.unregister_request_to_proto(registration)
    assert (unregister.cluster_name, unregister.broker_name, unregister.broker_id, unregister.broker_addr) == (
        registration.cluster_name,
        registration.broker_name,
        registration.broker_id,
        registration.broker_addr,
    )


@given(st.builds(TopicRouteData, st.tuples(queue_datas, queue_datas), st.tuples(broker_datas), names))
def test_route_round_trips(route: TopicRouteData) -> None:
    assert convert.route_from_proto(convert.route_to_proto(route)) == route


@given(
    st.dictionaries(names, broker_datas, max_size=3),
    st.dictionaries(names, st.lists(names, max_size=3).map(lambda ns: tuple(sorted(ns))), max_size=3),
    st.dictionaries(addrs, st.tuples(i64, i64, data_versions), max_size=3),
)
def test_cluster_info_round_trips(
    brokers: dict[str, BrokerData],
    clusters: dict[str, tuple[str, ...]],
    lives: dict[str, tuple[int, int, DataVersion]],
) -> None:
    live_table = {a: BrokerLiveInfo(a, ts, hb, dv) for a, (ts, hb, dv) in lives.items()}
    info = ClusterInfo(brokers, clusters, live_table)
    assert convert.cluster_info_from_proto(convert.cluster_info_to_proto(info)) == info


@given(st.builds(TopicQueueOffset, names, i32, i64, i64, i64))
def test_topic_queue_offset_round_trips(offset: TopicQueueOffset) -> None:
    assert convert.topic_queue_offset_from_proto(convert.topic_queue_offset_to_proto(offset)) == offset


@pytest.mark.parametrize("status", [*PullStatus, None])
def test_pull_status_round_trips(status: PullStatus | None) -> None:
    assert convert.pull_status_from_proto(convert.pull_status_to_proto(status)) is status


signed32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
signed64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
texts = st.text(max_size=20)
blobs = st.binary(max_size=64)


@given(
    st.builds(
        SendMessageRequestHeader,
        topic=names,
        body=blobs,
        producer_group=texts,
        queue_id=signed32,
        sys_flag=i32,
        born_timestamp_ms=i64,
        flag=signed32,
        properties=texts,
        default_topic=names,
        default_topic_queue_nums=i32,
        reconsume_times=i32,
        born_host=addrs,
    ),
    st.builds(SendMessageResponseHeader, signed32, texts, texts, i32, signed64, texts),
)
def test_send_headers_round_trip(request: SendMessageRequestHeader, response: SendMessageResponseHeader) -> None:
    assert convert.send_request_from_proto(convert.send_request_to_proto(request)) == request
    assert convert.send_response_from_proto(convert.send_response_to_proto(response)) == response
    batch = convert.send_batch_to_proto([request, replace(request, queue_id=request.queue_id ^ 1)])
    assert [convert.send_request_from_proto(r) for r in batch.requests] == [
        request,
        replace(request, queue_id=request.queue_id ^ 1),
    ]


@given(
    st.builds(
        SendMessageBatchRequestHeader,
        topic=names,
        body=blobs,
        producer_group=texts,
        queue_id=signed32,
        sys_flag=i32,
        born_timestamp_ms=i64,
        properties=texts,
        default_topic=names,
        default_topic_queue_nums=i32,
        born_host=addrs,
    ),
    st.builds(SendMessageBatchResponseHeader, signed32, texts, texts, i32, signed64, i32),
)
def test_batch_headers_round_trip(
    request: SendMessageBatchRequestHeader, response: SendMessageBatchResponseHeader
) -> None:
    assert convert.batch_request_from_proto(convert.batch_request_to_proto(request)) == request
    assert convert.batch_response_from_proto(convert.batch_response_to_proto(response)) == response


def test_batch_request_fills_a_frame_in_place_and_keeps_sender_only_fields_off_the_wire() -> None:
    request = SendMessageBatchRequestHeader(topic="T", body=b"encoded", queue_id=3, message_count=9, queue_free=True)
    frame = broker_pb2.SendStreamRequest(frame_id=5)
    assert convert.batch_request_to_proto(request, frame.message_batch) is frame.message_batch
    assert (frame.WhichOneof("send"), frame.message_batch.body, frame.message_batch.queue_id) == (
        "message_batch",
        b"encoded",
        3,
    )
    back = convert.batch_request_from_proto(frame.message_batch)
    assert (back.message_count, back.queue_free) == (0, False)
    assert back == SendMessageBatchRequestHeader(topic="T", body=b"encoded", queue_id=3)


@given(
    st.builds(
        PullMessageRequestHeader,
        topic=names,
        queue_id=signed32,
        queue_offset=signed64,
        max_msg_nums=signed32,
        consumer_group=texts,
        subscription=texts,
        commit_offset=st.none() | signed64,
        suspend_timeout_ms=signed64,
    ),
    st.builds(
        PullMessageResponseHeader,
        signed32,
        texts,
        st.sampled_from([*PullStatus, None]),
        i64,
        i64,
        i64,
        blobs,
        i32,
    ),
)
def test_pull_headers_round_trip(request: PullMessageRequestHeader, response: PullMessageResponseHeader) -> None:
    assert convert.pull_request_from_proto(convert.pull_request_to_proto(request)) == request
    assert convert.pull_response_from_proto(convert.pull_response_to_proto(response)) == response


@given(
    st.builds(
        ConsumerSendMsgBackRequestHeader,
        group=names,
        offset=signed64,
        delay_level=signed32,
        origin_msg_id=texts,
        origin_topic=texts,
        max_reconsume_times=st.none() | st.integers(min_value=1, max_value=2**31 - 1),
    )
)
def test_send_msg_back_header_round_trips(header: ConsumerSendMsgBackRequestHeader) -> None:
    assert convert.send_msg_back_request_from_proto(convert.send_msg_back_request_to_proto(header)) == header


def test_send_msg_back_zero_max_reconsume_times_means_the_groups() -> None:
    header = ConsumerSendMsgBackRequestHeader(group="g", offset=1, max_reconsume_times=0)
    assert (
        convert.send_msg_back_request_from_proto(convert.send_msg_back_request_to_proto(header)).max_reconsume_times
        is None
    )


@given(
    st.builds(
        QueryMessageRequestHeader,
        topic=names,
        key=texts,
        max_num=signed32,
        begin_timestamp_ms=signed64,
        end_timestamp_ms=signed64,
    ),
    st.builds(QueryMessageResponseHeader, signed32, texts, blobs, i32, signed64, signed64),
)
def test_query_headers_round_trip(request: QueryMessageRequestHeader, response: QueryMessageResponseHeader) -> None:
    assert convert.query_request_from_proto(convert.query_request_to_proto(request)) == request
    assert convert.query_response_from_proto(convert.query_response_to_proto(response)) == response


@given(
    st.builds(QueryMessageByUniqueKeyRequestHeader, topic=names, uniq_key=texts),
    st.builds(QueryMessageByUniqueKeyResponseHeader, signed32, texts, blobs, i32),
)
def test_uniq_key_query_headers_round_trip(
    request: QueryMessageByUniqueKeyRequestHeader, response: QueryMessageByUniqueKeyResponseHeader
) -> None:
    assert convert.uniq_key_request_from_proto(convert.uniq_key_request_to_proto(request)) == request
    assert convert.uniq_key_response_from_proto(convert.uniq_key_response_to_proto(response)) == response


@given(
    st.builds(ViewMessageRequestHeader, offset_msg_id=texts),
    st.builds(ViewMessageResponseHeader, signed32, texts, blobs),
)
def test_view_headers_round_trip(request: ViewMessageRequestHeader, response: ViewMessageResponseHeader) -> None:
    assert convert.view_request_from_proto(convert.view_request_to_proto(request)) == request
    assert convert.view_response_from_proto(convert.view_response_to_proto(response)) == response


def test_cluster_info_last_update_of_an_unknown_broker_is_zero() -> None:
    live = BrokerLiveInfo("127.0.0.1:10911", 1234, 120_000, DataVersion())
    info = ClusterInfo({}, {}, {live.broker_addr: live})
    assert info.last_update_timestamp_ms("127.0.0.1:10911") == 1234
    assert info.last_update_timestamp_ms("127.0.0.1:1") == 0


def test_perm_default_is_read_write_as_rocketmq() -> None:
    config = TopicConfig("T")
    assert config.perm == 6 == PermName.PERM_READ | PermName.PERM_WRITE
    assert (PermName.is_readable(config.perm), PermName.is_writeable(config.perm)) == (True, True)
    assert not PermName.is_inherited(config.perm)
    assert (config.read_queue_nums, config.write_queue_nums) == (16, 16)


@pytest.mark.parametrize(
    ("perm", "rwx"),
    [(0, "---"), (PermName.PERM_READ, "R--"), (PermName.PERM_WRITE, "-W-"), (6, "RW-"), (7, "RWX"), (1, "--X")],
)
def test_perm_is_a_bit_set_taken_as_is(perm: int, rwx: str) -> None:
    config = TopicConfig("T", perm=perm)
    assert PermName.to_string(config.perm) == rwx
    flags = (PermName.is_readable(perm), PermName.is_writeable(perm), PermName.is_inherited(perm))
    assert flags == (rwx[0] == "R", rwx[1] == "W", rwx[2] == "X")


def test_perm_zero_on_the_wire_stays_zero() -> None:
    """proto3 cannot tell 0 from unset; the one meaning is 0 = neither read nor write (never "default")."""
    assert convert.topic_config_from_proto(common_pb2.TopicConfig(topic_name="T")).perm == 0
    assert not PermName.is_readable(convert.topic_config_from_proto(common_pb2.TopicConfig(topic_name="T")).perm)


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def test_invalid_argument_is_a_non_retriable_invalid_parameter() -> None:
    err = transport_error(_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "too many"), "127.0.0.1:1")
    assert isinstance(err, InvalidParameterError)
    assert (err.code, err.retriable, err.remark) == (29, False, "too many")


@pytest.mark.parametrize(
    ("status", "cls", "code"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, RemotingTimeoutError, -1006),
        (grpc.StatusCode.UNAVAILABLE, RemotingError, -1004),
        (grpc.StatusCode.INTERNAL, RemotingError, -1004),
    ],
)
def test_transport_statuses_are_retriable_remoting_errors(
    status: grpc.StatusCode, cls: type[RemotingError], code: int
) -> None:
    err = transport_error(_rpc_error(status, "x"), "127.0.0.1:1")
    assert type(err) is cls
    assert (err.code, err.retriable) == (code, True)
    assert "127.0.0.1:1" in err.remark
