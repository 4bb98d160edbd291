"""Proto <-> domain converters of :mod:`mq_common.protocol`: the edge, the one place they are written.

Every ``*_to_proto`` / ``*_from_proto`` pair round-trips (tests/common/test_protocol.py), except
BrokerLiveInfo's ``ha_server_addr`` and SendMessageBatchRequestHeader's ``message_count`` / ``queue_free``, which
the wire does not carry. The send and pull converters run on the send path of both ends (the broker's
SendStream frames, the clients' BrokerClient), the query and POP converters on both ends of their RPCs.

A field is copied by name when the dataclass and the message both have it (:func:`_to_proto`, :func:`_from_proto`,
:func:`_fill_proto`; the shared names are computed once per pair of classes), so a field added to both is carried
without touching this module; a converter spells out only what differs (nested messages, maps copied into plain
dicts, enums, renamed fields). Messages are mq.common.v1 /
mq.namesrv.v1 / mq.broker.v1. ``perm`` is copied as is: 0 stays 0 (see mq_common.protocol.topic). Pure
functions; any thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from google.protobuf.message import Message
from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2

from mq_common.protocol.admin import TopicQueueOffset
from mq_common.protocol.cluster import BrokerLiveInfo, ClusterInfo
from mq_common.protocol.consumer import (
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
)
from mq_common.protocol.pop import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PoppedMessage,
)
from mq_common.protocol.pull import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullStatus,
)
from mq_common.protocol.query import (
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    ViewMessageResponseHeader,
)
from mq_common.protocol.registration import BrokerRegistration, DataVersion
from mq_common.protocol.route import BrokerData, MessageQueue, QueueData, TopicRouteData
from mq_common.protocol.send import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from mq_common.protocol.topic import TopicConfig

_PULL_STATUS_TO_PROTO: Final = {
    PullStatus.FOUND: broker_pb2.PULL_STATUS_FOUND,
    PullStatus.NO_NEW_MSG: broker_pb2.PULL_STATUS_NO_NEW_MSG,
    PullStatus.NO_MATCHED_MSG: broker_pb2.PULL_STATUS_NO_MATCHED_MSG,
    PullStatus.OFFSET_ILLEGAL: broker_pb2.PULL_STATUS_OFFSET_ILLEGAL,
}
_PULL_STATUS_FROM_PROTO: Final = {v: k for k, v in _PULL_STATUS_TO_PROTO.items()}

_M = TypeVar("_M", bound=Message)
_D = TypeVar("_D")


_SHARED_FIELDS: Final[dict[tuple[object, object], tuple[str, ...]]] = {}


def _shared_fields(domain_cls: Any, proto_cls: type[Message]) -> tuple[str, ...]:
    """The fields of dataclass ``domain_cls`` that message ``proto_cls`` has too, in the dataclass's order
    (computed once per pair; a race computes the same tuple twice)."""
    key = (domain_cls, proto_cls)
    names = _SHARED_FIELDS.get(key)
    if names is None:
        wire = proto_cls.DESCRIPTOR.fields_by_name
        names = _SHARED_FIELDS[key] = tuple(f.name for f in dataclasses.fields(domain_cls) if f.name in wire)
    return names


def _to_proto(value: Any, proto_cls: type[_M], **converted: Any) -> _M:
    """``proto_cls`` with the shared fields of ``value`` copied as they are, and ``converted`` (by proto name)."""
    copied = {n: getattr(value, n) for n in _shared_fields(type(value), proto_cls) if n not in converted}
    return proto_cls(**copied, **converted)


def _from_proto(msg: Message, domain_cls: Callable[..., _D], **converted: Any) -> _D:
    """``domain_cls`` with the shared fields of ``msg`` copied as they are, and ``converted`` (by dataclass name)."""
    copied = {n: getattr(msg, n) for n in _shared_fields(domain_cls, type(msg)) if n not in converted}
    return domain_cls(**copied, **converted)


def _fill_proto(target: _M, value: Any) -> _M:
    """Set the shared (scalar) fields of ``target`` from ``value`` in place and return ``target``."""
    for name in _shared_fields(type(value), type(target)):
        setattr(target, name, getattr(value, name))
    return target


# --- topics, registration, routes, cluster (mq.common.v1, mq.namesrv.v1) ----------------------------------------


def topic_config_to_proto(config: TopicConfig) -> common_pb2.TopicConfig:
    return _to_proto(config, common_pb2.TopicConfig, attributes=dict(config.attributes))


def topic_config_from_proto(msg: common_pb2.TopicConfig) -> TopicConfig:
    return _from_proto(msg, TopicConfig, attributes=dict(msg.attributes))


def data_version_to_proto(version: DataVersion) -> common_pb2.DataVersion:
    return _to_proto(version, common_pb2.DataVersion)


def data_version_from_proto(msg: common_pb2.DataVersion) -> DataVersion:
    return _from_proto(msg, DataVersion)


def registration_to_proto(registration: BrokerRegistration) -> namesrv_pb2.RegisterBrokerRequest:
    return _to_proto(
        registration,
        namesrv_pb2.RegisterBrokerRequest,
        topic_config_table={name: topic_config_to_proto(tc) for name, tc in registration.topic_configs.items()},
        data_version=data_version_to_proto(registration.data_version),
    )


def registration_from_proto(msg: namesrv_pb2.RegisterBrokerRequest) -> BrokerRegistration:
    """RegisterBrokerRequest -> BrokerRegistration (not validated: the name server does that)."""
    return _from_proto(
        msg,
        BrokerRegistration,
        topic_configs={name: topic_config_from_proto(tc) for name, tc in msg.topic_config_table.items()},
        data_version=data_version_from_proto(msg.data_version),
    )


def unregister_request_to_proto(registration: BrokerRegistration) -> namesrv_pb2.UnregisterBrokerRequest:
    """UNREGISTER_BROKER carries the broker's identity only (UnRegisterBrokerRequestHeader)."""
    return _to_proto(registration, namesrv_pb2.UnregisterBrokerRequest)


def queue_data_to_proto(qd: QueueData) -> namesrv_pb2.QueueData:
    return _to_proto(qd, namesrv_pb2.QueueData)


def queue_data_from_proto(msg: namesrv_pb2.QueueData) -> QueueData:
    return _from_proto(msg, QueueData)


def broker_data_to_proto(bd: BrokerData) -> namesrv_pb2.BrokerData:
    return _to_proto(bd, namesrv_pb2.BrokerData, broker_addrs=dict(bd.broker_addrs))


def broker_data_from_proto(msg: namesrv_pb2.BrokerData) -> BrokerData:
    """mq.namesrv.v1.BrokerData -> BrokerData (broker_addrs copied into a plain dict)."""
    return _from_proto(msg, BrokerData, broker_addrs=dict(msg.broker_addrs))


def route_to_proto(route: TopicRouteData) -> namesrv_pb2.TopicRouteData:
    """TopicRouteData -> mq.namesrv.v1.TopicRouteData (order kept)."""
    return _to_proto(
        route,
        namesrv_pb2.TopicRouteData,
        queue_datas=[queue_data_to_proto(q) for q in route.queue_datas],
        broker_datas=[broker_data_to_proto(b) for b in route.broker_datas],
    )


def route_from_proto(msg: namesrv_pb2.TopicRouteData) -> TopicRouteData:
    """mq.namesrv.v1.TopicRouteData -> TopicRouteData (order kept)."""
    return _from_proto(
        msg,
        TopicRouteData,
        queue_datas=tuple(queue_data_from_proto(q) for q in msg.queue_datas),
        broker_datas=tuple(broker_data_from_proto(b) for b in msg.broker_datas),
    )


def broker_live_info_to_proto(live: BrokerLiveInfo) -> namesrv_pb2.BrokerLiveInfo:
    """BrokerLiveInfo -> proto (``ha_server_addr`` is not sent)."""
    return _to_proto(live, namesrv_pb2.BrokerLiveInfo, data_version=data_version_to_proto(live.data_version))


def broker_live_info_from_proto(msg: namesrv_pb2.BrokerLiveInfo) -> BrokerLiveInfo:
    return _from_proto(msg, BrokerLiveInfo, data_version=data_version_from_proto(msg.data_version))


def cluster_info_to_proto(info: ClusterInfo) -> namesrv_pb2.GetBrokerClusterInfoResponse:
    """ClusterInfo -> a GetBrokerClusterInfoResponse with code 0 (SUCCESS)."""
    return namesrv_pb2.GetBrokerClusterInfoResponse(
        broker_addr_table={n: broker_data_to_proto(b) for n, b in info.broker_addr_table.items()},
        cluster_addr_table={
            c: namesrv_pb2.BrokerNames(broker_names=list(ns)) for c, ns in info.cluster_addr_table.items()
        },
        broker_live_table={a: broker_live_info_to_proto(live) for a, live in info.broker_live_table.items()},
    )


def cluster_info_from_proto(msg: namesrv_pb2.GetBrokerClusterInfoResponse) -> ClusterInfo:
    """GetBrokerClusterInfoResponse -> ClusterInfo (broker names of a cluster sorted)."""
    return ClusterInfo(
        broker_addr_table={name: broker_data_from_proto(b) for name, b in msg.broker_addr_table.items()},
        cluster_addr_table={name: tuple(sorted(v.broker_names)) for name, v in msg.cluster_addr_table.items()},
        broker_live_table={addr: broker_live_info_from_proto(live) for addr, live in msg.broker_live_table.items()},
    )


def topic_queue_offset_to_proto(offset: TopicQueueOffset) -> broker_pb2.TopicQueueOffset:
    return _to_proto(offset, broker_pb2.TopicQueueOffset)


def topic_queue_offset_from_proto(msg: broker_pb2.TopicQueueOffset) -> TopicQueueOffset:
    return _from_proto(msg, TopicQueueOffset)


def pull_status_to_proto(status: PullStatus | None) -> broker_pb2.PullStatus.ValueType:
    """PullStatus -> the proto enum; None -> PULL_STATUS_UNSPECIFIED."""
    return broker_pb2.PULL_STATUS_UNSPECIFIED if status is None else _PULL_STATUS_TO_PROTO[status]


def pull_status_from_proto(value: broker_pb2.PullStatus.ValueType) -> PullStatus | None:
    """The proto enum -> PullStatus; PULL_STATUS_UNSPECIFIED (or an unknown number) -> None."""
    return _PULL_STATUS_FROM_PROTO.get(value)


# --- send (SEND_MESSAGE, SEND_BATCH_MESSAGE) ------------------------------------------------------------------------


def send_request_to_proto(header: SendMessageRequestHeader) -> broker_pb2.SendMessageRequest:
    """Field by field, not through _to_proto: it runs once per message sent (1.4 vs 2.4 µs)."""
    return broker_pb2.SendMessageRequest(**_send_request_fields(header))


def send_batch_to_proto(
    headers: Iterable[SendMessageRequestHeader], target: broker_pb2.SendBatchRequest | None = None
) -> broker_pb2.SendBatchRequest:
    """Fill ``target`` (e.g. a SendStreamRequest's ``batch``: then nothing is copied into the frame afterwards;
    copying a 64 x 1 KiB batch into a frame cost 110 µs) or a new SendBatchRequest with ``headers`` and return it.
    Each request is added in place (1.0 µs per message; building each and copying it into the list cost 4.5)."""
    batch = broker_pb2.SendBatchRequest() if target is None else target
    add = batch.requests.add
    for header in headers:
        add(**_send_request_fields(header))
    return batch


def _send_request_fields(h: SendMessageRequestHeader) -> dict[str, Any]:
    return {
        "producer_group": h.producer_group,
        "topic": h.topic,
        "default_topic": h.default_topic,
        "default_topic_queue_nums": h.default_topic_queue_nums,
        "queue_id": h.queue_id,
        "sys_flag": h.sys_flag,
        "born_timestamp_ms": h.born_timestamp_ms,
        "flag": h.flag,
        "properties": h.properties,
        "reconsume_times": h.reconsume_times,
        "body": h.body,
        "born_host": h.born_host,
    }


def send_request_from_proto(msg: broker_pb2.SendMessageRequest) -> SendMessageRequestHeader:
    """Field by field, not through _from_proto: the broker runs it once per message stored."""
    return SendMessageRequestHeader(
        topic=msg.topic,
        body=msg.body,
        producer_group=msg.producer_group,
        queue_id=msg.queue_id,
        sys_flag=msg.sys_flag,
        born_timestamp_ms=msg.born_timestamp_ms,
        flag=msg.flag,
        properties=msg.properties,
        default_topic=msg.default_topic,
        default_topic_queue_nums=msg.default_topic_queue_nums,
        reconsume_times=msg.reconsume_times,
        born_host=msg.born_host,
    )


def send_response_to_proto(header: SendMessageResponseHeader) -> broker_pb2.SendMessageResponse:
    """Field by field, not through _to_proto: the broker runs it once per message stored."""
    return broker_pb2.SendMessageResponse(
        code=header.code,
        remark=header.remark,
        msg_id=header.msg_id,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        transaction_id=header.transaction_id,
    )


def send_response_from_proto(msg: broker_pb2.SendMessageResponse) -> SendMessageResponseHeader:
    """Field by field, not through _from_proto: it runs once per message sent (1.1 vs 2.3 µs)."""
    return SendMessageResponseHeader(
        msg.code, msg.remark, msg.msg_id, msg.queue_id, msg.queue_offset, msg.transaction_id
    )


def batch_request_to_proto(
    header: SendMessageBatchRequestHeader, target: broker_pb2.SendMessageBatchRequest | None = None
) -> broker_pb2.SendMessageBatchRequest:
    """Fill ``target`` (e.g. a SendStreamRequest's ``message_batch``: the body is then copied once, straight into
    the frame) or a new message, and return it. ``message_count`` and ``queue_free`` are not sent."""
    return _fill_proto(broker_pb2.SendMessageBatchRequest() if target is None else target, header)


def batch_request_from_proto(msg: broker_pb2.SendMessageBatchRequest) -> SendMessageBatchRequestHeader:
    """SendMessageBatchRequest -> header; ``message_count`` 0 (not said) and ``queue_free`` False."""
    return _from_proto(msg, SendMessageBatchRequestHeader)


def batch_response_to_proto(header: SendMessageBatchResponseHeader) -> broker_pb2.SendMessageBatchResponse:
    return _to_proto(header, broker_pb2.SendMessageBatchResponse)


def batch_response_from_proto(msg: broker_pb2.SendMessageBatchResponse) -> SendMessageBatchResponseHeader:
    return _from_proto(msg, SendMessageBatchResponseHeader)


# --- pull (PULL_MESSAGE) --------------------------------------------------------------------------------------------


def pull_request_to_proto(header: PullMessageRequestHeader) -> broker_pb2.PullMessageRequest:
    """``commit_offset`` None leaves the optional field unset."""
    return _to_proto(header, broker_pb2.PullMessageRequest, commit_offset=header.commit_offset)


def pull_request_from_proto(msg: broker_pb2.PullMessageRequest) -> PullMessageRequestHeader:
    """An unset ``commit_offset`` becomes None."""
    commit_offset = msg.commit_offset if msg.HasField("commit_offset") else None
    return _from_proto(msg, PullMessageRequestHeader, commit_offset=commit_offset)


def pull_response_to_proto(header: PullMessageResponseHeader) -> broker_pb2.PullMessageResponse:
    return _to_proto(header, broker_pb2.PullMessageResponse, status=pull_status_to_proto(header.status))


def pull_response_from_proto(msg: broker_pb2.PullMessageResponse) -> PullMessageResponseHeader:
    """PullMessageResponse -> header (PULL_STATUS_UNSPECIFIED -> ``status`` None); see
    :func:`mq_common.protocol.pull.pull_result_of` for the consumer's PullResult."""
    return _from_proto(msg, PullMessageResponseHeader, status=pull_status_from_proto(msg.status))


def send_msg_back_request_to_proto(header: ConsumerSendMsgBackRequestHeader) -> broker_pb2.ConsumerSendMsgBackRequest:
    """``max_reconsume_times`` None travels as 0 (the group's retryMaxTimes)."""
    times = header.max_reconsume_times
    return _to_proto(header, broker_pb2.ConsumerSendMsgBackRequest, max_reconsume_times=times or 0)


def send_msg_back_request_from_proto(msg: broker_pb2.ConsumerSendMsgBackRequest) -> ConsumerSendMsgBackRequestHeader:
    """``max_reconsume_times`` 0 becomes None."""
    times = msg.max_reconsume_times or None
    return _from_proto(msg, ConsumerSendMsgBackRequestHeader, max_reconsume_times=times)


# --- query (QUERY_MESSAGE, QUERY_MESSAGE by UNIQ_KEY, VIEW_MESSAGE_BY_ID) -------------------------------------------


def query_request_to_proto(header: QueryMessageRequestHeader) -> broker_pb2.QueryMessageRequest:
    return _to_proto(header, broker_pb2.QueryMessageRequest)


def query_request_from_proto(msg: broker_pb2.QueryMessageRequest) -> QueryMessageRequestHeader:
    return _from_proto(msg, QueryMessageRequestHeader)


def query_response_to_proto(header: QueryMessageResponseHeader) -> broker_pb2.QueryMessageResponse:
    return _to_proto(header, broker_pb2.QueryMessageResponse)


def query_response_from_proto(msg: broker_pb2.QueryMessageResponse) -> QueryMessageResponseHeader:
    """QueryMessageResponse -> header; see :func:`mq_common.protocol.query.query_result_of` for the client's
    QueryResult."""
    return _from_proto(msg, QueryMessageResponseHeader)


def uniq_key_request_to_proto(
    header: QueryMessageByUniqueKeyRequestHeader,
) -> broker_pb2.QueryMessageByUniqueKeyRequest:
    return _to_proto(header, broker_pb2.QueryMessageByUniqueKeyRequest)


def uniq_key_request_from_proto(msg: broker_pb2.QueryMessageByUniqueKeyRequest) -> QueryMessageByUniqueKeyRequestHeader:
    return _from_proto(msg, QueryMessageByUniqueKeyRequestHeader)


def uniq_key_response_to_proto(
    header: QueryMessageByUniqueKeyResponseHeader,
) -> broker_pb2.QueryMessageByUniqueKeyResponse:
    return _to_proto(header, broker_pb2.QueryMessageByUniqueKeyResponse)


def uniq_key_response_from_proto(
    msg: broker_pb2.QueryMessageByUniqueKeyResponse,
) -> QueryMessageByUniqueKeyResponseHeader:
    return _from_proto(msg, QueryMessageByUniqueKeyResponseHeader)


def view_request_to_proto(header: ViewMessageRequestHeader) -> broker_pb2.ViewMessageByIdRequest:
    return _to_proto(header, broker_pb2.ViewMessageByIdRequest)


def view_request_from_proto(msg: broker_pb2.ViewMessageByIdRequest) -> ViewMessageRequestHeader:
    return _from_proto(msg, ViewMessageRequestHeader)


def view_response_to_proto(header: ViewMessageResponseHeader) -> broker_pb2.ViewMessageByIdResponse:
    return _to_proto(header, broker_pb2.ViewMessageByIdResponse)


def view_response_from_proto(msg: broker_pb2.ViewMessageByIdResponse) -> ViewMessageResponseHeader:
    """ViewMessageByIdResponse -> header; see :func:`mq_common.protocol.query.viewed_message_of` for the message."""
    return _from_proto(msg, ViewMessageResponseHeader)


# --- consumer side (subscription groups, offsets, consume stats, heartbeats, connections) ---------------------------

_CONSUME_TYPE_TO_PROTO: Final = {t: broker_pb2.ConsumeType.Value(f"CONSUME_TYPE_{t.value}") for t in ConsumeType}
_CONSUME_TYPE_FROM_PROTO: Final = {v: k for k, v in _CONSUME_TYPE_TO_PROTO.items()}
_MESSAGE_MODEL_TO_PROTO: Final = {m: broker_pb2.MessageModel.Value(f"MESSAGE_MODEL_{m.value}") for m in MessageModel}
_MESSAGE_MODEL_FROM_PROTO: Final = {v: k for k, v in _MESSAGE_MODEL_TO_PROTO.items()}


def consume_type_from_proto(value: broker_pb2.ConsumeType.ValueType) -> ConsumeType:
    """The proto enum -> ConsumeType; UNSPECIFIED (or an unknown number) -> CONSUME_PASSIVELY (a push consumer)."""
    return _CONSUME_TYPE_FROM_PROTO.get(value, ConsumeType.CONSUME_PASSIVELY)


def message_model_from_proto(value: broker_pb2.MessageModel.ValueType) -> MessageModel:
    """The proto enum -> MessageModel; UNSPECIFIED (or an unknown number) -> CLUSTERING."""
    return _MESSAGE_MODEL_FROM_PROTO.get(value, MessageModel.CLUSTERING)


def subscription_group_config_to_proto(config: SubscriptionGroupConfig) -> broker_pb2.SubscriptionGroupConfig:
    return _to_proto(config, broker_pb2.SubscriptionGroupConfig, attributes=dict(config.attributes))


def subscription_group_config_from_proto(msg: broker_pb2.SubscriptionGroupConfig) -> SubscriptionGroupConfig:
    """The message as it is: proto3 has no "unset", so a field left out is 0/false, not RocketMQ's default."""
    return _from_proto(msg, SubscriptionGroupConfig, attributes=dict(msg.attributes))


def consumer_queue_offset_to_proto(offset: ConsumerQueueOffset) -> broker_pb2.ConsumerQueueOffset:
    return _to_proto(offset, broker_pb2.ConsumerQueueOffset)


def consumer_queue_offset_from_proto(msg: broker_pb2.ConsumerQueueOffset) -> ConsumerQueueOffset:
    return _from_proto(msg, ConsumerQueueOffset)


def queue_consume_stats_to_proto(stats: QueueConsumeStats) -> broker_pb2.QueueConsumeStats:
    return _to_proto(stats, broker_pb2.QueueConsumeStats)


def queue_consume_stats_from_proto(msg: broker_pb2.QueueConsumeStats) -> QueueConsumeStats:
    return _from_proto(msg, QueueConsumeStats)


def consume_stats_to_proto(stats: ConsumeStats) -> broker_pb2.GetConsumeStatsResponse:
    """ConsumeStats -> a GetConsumeStatsResponse with code 0 (SUCCESS)."""
    return broker_pb2.GetConsumeStatsResponse(
        queues=[queue_consume_stats_to_proto(q) for q in stats.queues], consume_tps=stats.consume_tps
    )


def consume_stats_from_proto(msg: broker_pb2.GetConsumeStatsResponse) -> ConsumeStats:
    return ConsumeStats(tuple(queue_consume_stats_from_proto(q) for q in msg.queues), msg.consume_tps)


def subscription_data_to_proto(data: SubscriptionData) -> broker_pb2.SubscriptionData:
    return _to_proto(data, broker_pb2.SubscriptionData)


def subscription_data_from_proto(msg: broker_pb2.SubscriptionData) -> SubscriptionData:
    return _from_proto(msg, SubscriptionData)


def heartbeat_to_proto(heartbeat: HeartbeatData) -> broker_pb2.HeartbeatRequest:
    return _to_proto(
        heartbeat,
        broker_pb2.HeartbeatRequest,
        consume_type=_CONSUME_TYPE_TO_PROTO[heartbeat.consume_type],
        message_model=_MESSAGE_MODEL_TO_PROTO[heartbeat.message_model],
        subscriptions=[subscription_data_to_proto(d) for d in heartbeat.subscriptions],
    )


def heartbeat_from_proto(msg: broker_pb2.HeartbeatRequest) -> HeartbeatData:
    """HeartbeatRequest -> HeartbeatData (not validated: the broker does that); UNSPECIFIED enums take the
    defaults of :func:`consume_type_from_proto` / :func:`message_model_from_proto`."""
    return _from_proto(
        msg,
        HeartbeatData,
        consume_type=consume_type_from_proto(msg.consume_type),
        message_model=message_model_from_proto(msg.message_model),
        subscriptions=tuple(subscription_data_from_proto(d) for d in msg.subscriptions),
    )


def consumer_connection_to_proto(connection: ConsumerConnection) -> broker_pb2.ConsumerConnection:
    return _to_proto(connection, broker_pb2.ConsumerConnection)


def consumer_connection_from_proto(msg: broker_pb2.ConsumerConnection) -> ConsumerConnection:
    return _from_proto(msg, ConsumerConnection)


def consumer_connection_info_to_proto(info: ConsumerConnectionInfo) -> broker_pb2.GetConsumerConnectionListResponse:
    """ConsumerConnectionInfo -> a GetConsumerConnectionListResponse with code 0 (SUCCESS)."""
    return broker_pb2.GetConsumerConnectionListResponse(
        connections=[consumer_connection_to_proto(c) for c in info.connections],
        subscriptions=[subscription_data_to_proto(d) for d in info.subscriptions],
        consume_type=_CONSUME_TYPE_TO_PROTO[info.consume_type],
        message_model=_MESSAGE_MODEL_TO_PROTO[info.message_model],
    )


def consumer_connection_info_from_proto(msg: broker_pb2.GetConsumerConnectionListResponse) -> ConsumerConnectionInfo:
    return ConsumerConnectionInfo(
        connections=tuple(consumer_connection_from_proto(c) for c in msg.connections),
        subscriptions=tuple(subscription_data_from_proto(d) for d in msg.subscriptions),
        consume_type=consume_type_from_proto(msg.consume_type),
        message_model=message_model_from_proto(msg.message_model),
    )


def query_consumer_offset_request_to_proto(
    header: QueryConsumerOffsetRequestHeader,
) -> broker_pb2.QueryConsumerOffsetRequest:
    return _to_proto(header, broker_pb2.QueryConsumerOffsetRequest)


def query_consumer_offset_request_from_proto(
    msg: broker_pb2.QueryConsumerOffsetRequest,
) -> QueryConsumerOffsetRequestHeader:
    return _from_proto(msg, QueryConsumerOffsetRequestHeader)


def consume_stats_request_to_proto(header: GetConsumeStatsRequestHeader) -> broker_pb2.GetConsumeStatsRequest:
    return _to_proto(header, broker_pb2.GetConsumeStatsRequest)


def consume_stats_request_from_proto(msg: broker_pb2.GetConsumeStatsRequest) -> GetConsumeStatsRequestHeader:
    return _from_proto(msg, GetConsumeStatsRequestHeader)


def search_offset_request_to_proto(header: SearchOffsetRequestHeader) -> broker_pb2.SearchOffsetByTimestampRequest:
    return _to_proto(header, broker_pb2.SearchOffsetByTimestampRequest)


def search_offset_request_from_proto(msg: broker_pb2.SearchOffsetByTimestampRequest) -> SearchOffsetRequestHeader:
    return _from_proto(msg, SearchOffsetRequestHeader)


def reset_offset_request_to_proto(header: ResetOffsetRequestHeader) -> broker_pb2.ResetOffsetByTimestampRequest:
    return _to_proto(header, broker_pb2.ResetOffsetByTimestampRequest)


def reset_offset_request_from_proto(msg: broker_pb2.ResetOffsetByTimestampRequest) -> ResetOffsetRequestHeader:
    return _from_proto(msg, ResetOffsetRequestHeader)


def delete_group_request_to_proto(
    header: DeleteSubscriptionGroupRequestHeader,
) -> broker_pb2.DeleteSubscriptionGroupRequest:
    return _to_proto(header, broker_pb2.DeleteSubscriptionGroupRequest)


def delete_group_request_from_proto(
    msg: broker_pb2.DeleteSubscriptionGroupRequest,
) -> DeleteSubscriptionGroupRequestHeader:
    return _from_proto(msg, DeleteSubscriptionGroupRequestHeader)


def unregister_client_request_to_proto(header: UnregisterClientRequestHeader) -> broker_pb2.UnregisterClientRequest:
    return _to_proto(header, broker_pb2.UnregisterClientRequest)


def unregister_client_request_from_proto(msg: broker_pb2.UnregisterClientRequest) -> UnregisterClientRequestHeader:
    return _from_proto(msg, UnregisterClientRequestHeader)


# --- POP (POP_MESSAGE, ACK_MESSAGE / BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) ---------------------------------


def message_queue_to_proto(queue: MessageQueue) -> broker_pb2.MessageQueue:
    return broker_pb2.MessageQueue(topic=queue.topic, broker_name=queue.broker_name, queue_id=queue.queue_id)


def message_queue_from_proto(msg: broker_pb2.MessageQueue) -> MessageQueue:
    return MessageQueue(msg.topic, msg.broker_name, msg.queue_id)


def pop_request_to_proto(header: PopMessageRequestHeader) -> broker_pb2.PopMessageRequest:
    return _to_proto(header, broker_pb2.PopMessageRequest)


def pop_request_from_proto(msg: broker_pb2.PopMessageRequest) -> PopMessageRequestHeader:
    return _from_proto(msg, PopMessageRequestHeader, ack_receipt_handles=tuple(msg.ack_receipt_handles))


def pop_response_to_proto(header: PopMessageResponseHeader) -> broker_pb2.PopMessageResponse:
    popped = broker_pb2.PoppedMessage  # per message: built directly, the by-name helper costs a lookup each
    messages = [popped(message=m.message, receipt_handle=m.receipt_handle) for m in header.messages]
    return _to_proto(header, broker_pb2.PopMessageResponse, messages=messages)


def pop_response_from_proto(msg: broker_pb2.PopMessageResponse) -> PopMessageResponseHeader:
    """PopMessageResponse -> header; see :func:`mq_common.protocol.pop.pop_result_of` for the consumer's PopResult."""
    messages = tuple(PoppedMessage(m.message, m.receipt_handle) for m in msg.messages)
    return _from_proto(
        msg, PopMessageResponseHeader, messages=messages, ack_codes=tuple(msg.ack_codes),
        ack_remarks=tuple(msg.ack_remarks),
    )  # fmt: skip


def ack_request_to_proto(header: AckMessageRequestHeader) -> broker_pb2.AckMessageRequest:
    return _to_proto(header, broker_pb2.AckMessageRequest)


def ack_request_from_proto(msg: broker_pb2.AckMessageRequest) -> AckMessageRequestHeader:
    return _from_proto(msg, AckMessageRequestHeader, receipt_handles=tuple(msg.receipt_handles))


def ack_response_to_proto(header: AckMessageResponseHeader) -> broker_pb2.AckMessageResponse:
    return _to_proto(header, broker_pb2.AckMessageResponse)


def ack_response_from_proto(msg: broker_pb2.AckMessageResponse) -> AckMessageResponseHeader:
    return _from_proto(msg, AckMessageResponseHeader, codes=tuple(msg.codes), remarks=tuple(msg.remarks))


def change_invisible_request_to_proto(
    header: ChangeInvisibleTimeRequestHeader,
) -> broker_pb2.ChangeInvisibleTimeRequest:
    return _to_proto(header, broker_pb2.ChangeInvisibleTimeRequest)


def change_invisible_request_from_proto(msg: broker_pb2.ChangeInvisibleTimeRequest) -> ChangeInvisibleTimeRequestHeader:
    return _from_proto(msg, ChangeInvisibleTimeRequestHeader)


def change_invisible_response_to_proto(
    header: ChangeInvisibleTimeResponseHeader,
) -> broker_pb2.ChangeInvisibleTimeResponse:
    return _to_proto(header, broker_pb2.ChangeInvisibleTimeResponse)


def change_invisible_response_from_proto(
    msg: broker_pb2.ChangeInvisibleTimeResponse,
) -> ChangeInvisibleTimeResponseHeader:
    return _from_proto(msg, ChangeInvisibleTimeResponseHeader)
