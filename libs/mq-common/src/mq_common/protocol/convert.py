"""Proto <-> domain converters of :mod:`mq_common.protocol`: the edge, the one place they are written.

Every ``*_to_proto`` / ``*_from_proto`` pair round-trips (tests/common/test_protocol.py), except
BrokerLiveInfo's ``ha_server_addr`` and SendMessageBatchRequestHeader's ``message_count`` / ``queue_free``, which
the wire does not carry. The send and pull converters run on the send path of both ends (the broker's
SendStream frames, the clients' BrokerClient), the query converters on both ends of the query RPCs: plain field
copies, nothing else. Messages are mq.common.v1 /
mq.namesrv.v1 / mq.broker.v1. ``perm`` is copied as is: 0 stays 0 (see mq_common.protocol.topic). Pure
functions; any thread.
"""

from __future__ import annotations

from typing import Final

from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2

from mq_common.protocol.admin import TopicQueueOffset
from mq_common.protocol.cluster import BrokerLiveInfo, ClusterInfo
from mq_common.protocol.pull import PullMessageRequestHeader, PullMessageResponseHeader, PullStatus
from mq_common.protocol.query import (
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    ViewMessageResponseHeader,
)
from mq_common.protocol.registration import BrokerRegistration, DataVersion
from mq_common.protocol.route import BrokerData, QueueData, TopicRouteData
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


def topic_config_to_proto(config: TopicConfig) -> common_pb2.TopicConfig:
    return common_pb2.TopicConfig(
        topic_name=config.topic_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        topic_sys_flag=config.topic_sys_flag,
        order=config.order,
        attributes=dict(config.attributes),
    )


def topic_config_from_proto(msg: common_pb2.TopicConfig) -> TopicConfig:
    return TopicConfig(
        topic_name=msg.topic_name,
        read_queue_nums=msg.read_queue_nums,
        write_queue_nums=msg.write_queue_nums,
        perm=msg.perm,
        topic_sys_flag=msg.topic_sys_flag,
        order=msg.order,
        attributes=dict(msg.attributes),
    )


def data_version_to_proto(version: DataVersion) -> common_pb2.DataVersion:
    return common_pb2.DataVersion(
        state_version=version.state_version, timestamp_ms=version.timestamp_ms, counter=version.counter
    )


def data_version_from_proto(msg: common_pb2.DataVersion) -> DataVersion:
    return DataVersion(state_version=msg.state_version, timestamp_ms=msg.timestamp_ms, counter=msg.counter)


def registration_to_proto(registration: BrokerRegistration) -> namesrv_pb2.RegisterBrokerRequest:
    return namesrv_pb2.RegisterBrokerRequest(
        cluster_name=registration.cluster_name,
        broker_name=registration.broker_name,
        broker_id=registration.broker_id,
        broker_addr=registration.broker_addr,
        ha_server_addr=registration.ha_server_addr,
        topic_config_table={name: topic_config_to_proto(tc) for name, tc in registration.topic_configs.items()},
        data_version=data_version_to_proto(registration.data_version),
        heartbeat_timeout_ms=registration.heartbeat_timeout_ms,
    )


def registration_from_proto(msg: namesrv_pb2.RegisterBrokerRequest) -> BrokerRegistration:
    """RegisterBrokerRequest -> BrokerRegistration (not validated: the name server does that)."""
    return BrokerRegistration(
        cluster_name=msg.cluster_name,
        broker_name=msg.broker_name,
        broker_id=msg.broker_id,
        broker_addr=msg.broker_addr,
        topic_configs={name: topic_config_from_proto(tc) for name, tc in msg.topic_config_table.items()},
        data_version=data_version_from_proto(msg.data_version),
        ha_server_addr=msg.ha_server_addr,
        heartbeat_timeout_ms=msg.heartbeat_timeout_ms,
    )


def unregister_request_to_proto(registration: BrokerRegistration) -> namesrv_pb2.UnregisterBrokerRequest:
    """UNREGISTER_BROKER carries the broker's identity only (UnRegisterBrokerRequestHeader)."""
    return namesrv_pb2.UnregisterBrokerRequest(
        cluster_name=registration.cluster_name,
        broker_name=registration.broker_name,
        broker_id=registration.broker_id,
        broker_addr=registration.broker_addr,
    )


def queue_data_to_proto(qd: QueueData) -> namesrv_pb2.QueueData:
    return namesrv_pb2.QueueData(
        broker_name=qd.broker_name,
        read_queue_nums=qd.read_queue_nums,
        write_queue_nums=qd.write_queue_nums,
        perm=qd.perm,
        topic_sys_flag=qd.topic_sys_flag,
    )


def queue_data_from_proto(msg: namesrv_pb2.QueueData) -> QueueData:
    return QueueData(
        broker_name=msg.broker_name,
        read_queue_nums=msg.read_queue_nums,
        write_queue_nums=msg.write_queue_nums,
        perm=msg.perm,
        topic_sys_flag=msg.topic_sys_flag,
    )


def broker_data_to_proto(bd: BrokerData) -> namesrv_pb2.BrokerData:
    return namesrv_pb2.BrokerData(cluster=bd.cluster, broker_name=bd.broker_name, broker_addrs=dict(bd.broker_addrs))


def broker_data_from_proto(msg: namesrv_pb2.BrokerData) -> BrokerData:
    """mq.namesrv.v1.BrokerData -> BrokerData (broker_addrs copied into a plain dict)."""
    return BrokerData(cluster=msg.cluster, broker_name=msg.broker_name, broker_addrs=dict(msg.broker_addrs))


def route_to_proto(route: TopicRouteData) -> namesrv_pb2.TopicRouteData:
    """TopicRouteData -> mq.namesrv.v1.TopicRouteData (order kept)."""
    return namesrv_pb2.TopicRouteData(
        queue_datas=[queue_data_to_proto(q) for q in route.queue_datas],
        broker_datas=[broker_data_to_proto(b) for b in route.broker_datas],
        order_topic_conf=route.order_topic_conf,
    )


def route_from_proto(msg: namesrv_pb2.TopicRouteData) -> TopicRouteData:
    """mq.namesrv.v1.TopicRouteData -> TopicRouteData (order kept)."""
    return TopicRouteData(
        queue_datas=tuple(queue_data_from_proto(q) for q in msg.queue_datas),
        broker_datas=tuple(broker_data_from_proto(b) for b in msg.broker_datas),
        order_topic_conf=msg.order_topic_conf,
    )


def broker_live_info_to_proto(live: BrokerLiveInfo) -> namesrv_pb2.BrokerLiveInfo:
    """BrokerLiveInfo -> proto (``ha_server_addr`` is not sent)."""
    return namesrv_pb2.BrokerLiveInfo(
        broker_addr=live.broker_addr,
        last_update_timestamp_ms=live.last_update_timestamp_ms,
        heartbeat_timeout_ms=live.heartbeat_timeout_ms,
        data_version=data_version_to_proto(live.data_version),
    )


def broker_live_info_from_proto(msg: namesrv_pb2.BrokerLiveInfo) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        broker_addr=msg.broker_addr,
        last_update_timestamp_ms=msg.last_update_timestamp_ms,
        heartbeat_timeout_ms=msg.heartbeat_timeout_ms,
        data_version=data_version_from_proto(msg.data_version),
    )


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
    return broker_pb2.TopicQueueOffset(
        broker_name=offset.broker_name,
        queue_id=offset.queue_id,
        min_offset=offset.min_offset,
        max_offset=offset.max_offset,
        last_update_timestamp_ms=offset.last_update_timestamp_ms,
    )


def topic_queue_offset_from_proto(msg: broker_pb2.TopicQueueOffset) -> TopicQueueOffset:
    return TopicQueueOffset(
        broker_name=msg.broker_name,
        queue_id=msg.queue_id,
        min_offset=msg.min_offset,
        max_offset=msg.max_offset,
        last_update_timestamp_ms=msg.last_update_timestamp_ms,
    )


def pull_status_to_proto(status: PullStatus | None) -> broker_pb2.PullStatus.ValueType:
    """PullStatus -> the proto enum; None -> PULL_STATUS_UNSPECIFIED."""
    return broker_pb2.PULL_STATUS_UNSPECIFIED if status is None else _PULL_STATUS_TO_PROTO[status]


def pull_status_from_proto(value: broker_pb2.PullStatus.ValueType) -> PullStatus | None:
    """The proto enum -> PullStatus; PULL_STATUS_UNSPECIFIED (or an unknown number) -> None."""
    return _PULL_STATUS_FROM_PROTO.get(value)


# --- send (SEND_MESSAGE, SEND_BATCH_MESSAGE) ------------------------------------------------------------------------


def send_request_to_proto(header: SendMessageRequestHeader) -> broker_pb2.SendMessageRequest:
    return broker_pb2.SendMessageRequest(
        producer_group=header.producer_group,
        topic=header.topic,
        default_topic=header.default_topic,
        default_topic_queue_nums=header.default_topic_queue_nums,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp_ms=header.born_timestamp_ms,
        flag=header.flag,
        properties=header.properties,
        reconsume_times=header.reconsume_times,
        body=header.body,
        born_host=header.born_host,
    )


def send_request_from_proto(msg: broker_pb2.SendMessageRequest) -> SendMessageRequestHeader:
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
    return broker_pb2.SendMessageResponse(
        code=header.code,
        remark=header.remark,
        msg_id=header.msg_id,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        transaction_id=header.transaction_id,
    )


def send_response_from_proto(msg: broker_pb2.SendMessageResponse) -> SendMessageResponseHeader:
    return SendMessageResponseHeader(
        code=msg.code,
        remark=msg.remark,
        msg_id=msg.msg_id,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        transaction_id=msg.transaction_id,
    )


def batch_request_to_proto(
    header: SendMessageBatchRequestHeader, target: broker_pb2.SendMessageBatchRequest | None = None
) -> broker_pb2.SendMessageBatchRequest:
    """Fill ``target`` (e.g. a SendStreamRequest's ``message_batch``: the body is then copied once, straight into
    the frame) or a new message, and return it. ``message_count`` and ``queue_free`` are not sent."""
    out = broker_pb2.SendMessageBatchRequest() if target is None else target
    out.producer_group = header.producer_group
    out.topic = header.topic
    out.default_topic = header.default_topic
    out.default_topic_queue_nums = header.default_topic_queue_nums
    out.queue_id = header.queue_id
    out.sys_flag = header.sys_flag
    out.born_timestamp_ms = header.born_timestamp_ms
    out.properties = header.properties
    out.born_host = header.born_host
    out.body = header.body
    return out


def batch_request_from_proto(msg: broker_pb2.SendMessageBatchRequest) -> SendMessageBatchRequestHeader:
    """SendMessageBatchRequest -> header; ``message_count`` 0 (not said) and ``queue_free`` False."""
    return SendMessageBatchRequestHeader(
        topic=msg.topic,
        body=msg.body,
        producer_group=msg.producer_group,
        queue_id=msg.queue_id,
        sys_flag=msg.sys_flag,
        born_timestamp_ms=msg.born_timestamp_ms,
        properties=msg.properties,
        default_topic=msg.default_topic,
        default_topic_queue_nums=msg.default_topic_queue_nums,
        born_host=msg.born_host,
    )


def batch_response_to_proto(header: SendMessageBatchResponseHeader) -> broker_pb2.SendMessageBatchResponse:
    return broker_pb2.SendMessageBatchResponse(
        code=header.code,
        remark=header.remark,
        msg_id=header.msg_id,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        message_count=header.message_count,
    )


def batch_response_from_proto(msg: broker_pb2.SendMessageBatchResponse) -> SendMessageBatchResponseHeader:
    return SendMessageBatchResponseHeader(
        code=msg.code,
        remark=msg.remark,
        msg_id=msg.msg_id,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        message_count=msg.message_count,
    )


# --- pull (PULL_MESSAGE) --------------------------------------------------------------------------------------------


def pull_request_to_proto(header: PullMessageRequestHeader) -> broker_pb2.PullMessageRequest:
    return broker_pb2.PullMessageRequest(
        consumer_group=header.consumer_group,
        topic=header.topic,
        queue_id=header.queue_id,
        queue_offset=header.queue_offset,
        max_msg_nums=header.max_msg_nums,
        subscription=header.subscription,
    )


def pull_request_from_proto(msg: broker_pb2.PullMessageRequest) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        topic=msg.topic,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        max_msg_nums=msg.max_msg_nums,
        consumer_group=msg.consumer_group,
        subscription=msg.subscription,
    )


def pull_response_to_proto(header: PullMessageResponseHeader) -> broker_pb2.PullMessageResponse:
    return broker_pb2.PullMessageResponse(
        code=header.code,
        remark=header.remark,
        status=pull_status_to_proto(header.status),
        next_begin_offset=header.next_begin_offset,
        min_offset=header.min_offset,
        max_offset=header.max_offset,
        message_bytes=header.message_bytes,
        message_count=header.message_count,
    )


def pull_response_from_proto(msg: broker_pb2.PullMessageResponse) -> PullMessageResponseHeader:
    """PullMessageResponse -> header (PULL_STATUS_UNSPECIFIED -> ``status`` None); see
    :func:`mq_common.protocol.pull.pull_result_of` for the consumer's PullResult."""
    return PullMessageResponseHeader(
        code=msg.code,
        remark=msg.remark,
        status=pull_status_from_proto(msg.status),
        next_begin_offset=msg.next_begin_offset,
        min_offset=msg.min_offset,
        max_offset=msg.max_offset,
        message_bytes=msg.message_bytes,
        message_count=msg.message_count,
    )


# --- query (QUERY_MESSAGE, QUERY_MESSAGE by UNIQ_KEY, VIEW_MESSAGE_BY_ID) -------------------------------------------


def query_request_to_proto(header: QueryMessageRequestHeader) -> broker_pb2.QueryMessageRequest:
    return broker_pb2.QueryMessageRequest(
        topic=header.topic,
        key=header.key,
        max_num=header.max_num,
        begin_timestamp_ms=header.begin_timestamp_ms,
        end_timestamp_ms=header.end_timestamp_ms,
    )


def query_request_from_proto(msg: broker_pb2.QueryMessageRequest) -> QueryMessageRequestHeader:
    return QueryMessageRequestHeader(
        topic=msg.topic,
        key=msg.key,
        max_num=msg.max_num,
        begin_timestamp_ms=msg.begin_timestamp_ms,
        end_timestamp_ms=msg.end_timestamp_ms,
    )


def query_response_to_proto(header: QueryMessageResponseHeader) -> broker_pb2.QueryMessageResponse:
    return broker_pb2.QueryMessageResponse(
        code=header.code,
        remark=header.remark,
        message_bytes=header.message_bytes,
        message_count=header.message_count,
        index_last_update_timestamp_ms=header.index_last_update_timestamp_ms,
        index_last_update_phy_offset=header.index_last_update_phy_offset,
    )


def query_response_from_proto(msg: broker_pb2.QueryMessageResponse) -> QueryMessageResponseHeader:
    """QueryMessageResponse -> header; see :func:`mq_common.protocol.query.query_result_of` for the client's
    QueryResult."""
    return QueryMessageResponseHeader(
        code=msg.code,
        remark=msg.remark,
        message_bytes=msg.message_bytes,
        message_count=msg.message_count,
        index_last_update_timestamp_ms=msg.index_last_update_timestamp_ms,
        index_last_update_phy_offset=msg.index_last_update_phy_offset,
    )


def uniq_key_request_to_proto(
    header: QueryMessageByUniqueKeyRequestHeader,
) -> broker_pb2.QueryMessageByUniqueKeyRequest:
    return broker_pb2.QueryMessageByUniqueKeyRequest(topic=header.topic, uniq_key=header.uniq_key)


def uniq_key_request_from_proto(msg: broker_pb2.QueryMessageByUniqueKeyRequest) -> QueryMessageByUniqueKeyRequestHeader:
    return QueryMessageByUniqueKeyRequestHeader(topic=msg.topic, uniq_key=msg.uniq_key)


def uniq_key_response_to_proto(
    header: QueryMessageByUniqueKeyResponseHeader,
) -> broker_pb2.QueryMessageByUniqueKeyResponse:
    return broker_pb2.QueryMessageByUniqueKeyResponse(
        code=header.code, remark=header.remark, message_bytes=header.message_bytes, message_count=header.message_count
    )


def uniq_key_response_from_proto(
    msg: broker_pb2.QueryMessageByUniqueKeyResponse,
) -> QueryMessageByUniqueKeyResponseHeader:
    return QueryMessageByUniqueKeyResponseHeader(
        code=msg.code, remark=msg.remark, message_bytes=msg.message_bytes, message_count=msg.message_count
    )


def view_request_to_proto(header: ViewMessageRequestHeader) -> broker_pb2.ViewMessageByIdRequest:
    return broker_pb2.ViewMessageByIdRequest(offset_msg_id=header.offset_msg_id)


def view_request_from_proto(msg: broker_pb2.ViewMessageByIdRequest) -> ViewMessageRequestHeader:
    return ViewMessageRequestHeader(offset_msg_id=msg.offset_msg_id)


def view_response_to_proto(header: ViewMessageResponseHeader) -> broker_pb2.ViewMessageByIdResponse:
    return broker_pb2.ViewMessageByIdResponse(
        code=header.code, remark=header.remark, message_bytes=header.message_bytes
    )


def view_response_from_proto(msg: broker_pb2.ViewMessageByIdResponse) -> ViewMessageResponseHeader:
    """ViewMessageByIdResponse -> header; see :func:`mq_common.protocol.query.viewed_message_of` for the message."""
    return ViewMessageResponseHeader(code=msg.code, remark=msg.remark, message_bytes=msg.message_bytes)
