"""gRPC face of the name server: translates mq.namesrv.v1 messages <-> domain values, nothing else.

Mirrors org.apache.rocketmq.namesrv.processor.{DefaultRequestProcessor, ClientRequestProcessor}. Handlers run
on the service's asyncio loop and never await inside a route table operation. Business outcomes travel as
``code`` + ``remark``: a malformed request gets INVALID_PARAMETER (29), a topic without route TOPIC_NOT_EXIST
(17), an unexpected failure SYSTEM_ERROR (1) — a handler never raises into gRPC.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.response_code import ResponseCode

from mq_namesrv.model import (
    BrokerData,
    BrokerLiveInfo,
    BrokerRegistration,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)
from mq_namesrv.route_info_manager import RouteInfoManager

log = get_logger("mq_namesrv.grpc_api")

SERVICE_NAME = namesrv_pb2.DESCRIPTOR.services_by_name["NameServer"].full_name
_Resp = TypeVar("_Resp")


def _topic_config_from_proto(msg: common_pb2.TopicConfig) -> TopicConfig:
    return TopicConfig(
        topic_name=msg.topic_name,
        read_queue_nums=msg.read_queue_nums,
        write_queue_nums=msg.write_queue_nums,
        perm=msg.perm,
        topic_sys_flag=msg.topic_sys_flag,
        order=msg.order,
    )


def _data_version_from_proto(msg: common_pb2.DataVersion) -> DataVersion:
    return DataVersion(state_version=msg.state_version, timestamp_ms=msg.timestamp_ms, counter=msg.counter)


def _data_version_to_proto(version: DataVersion) -> common_pb2.DataVersion:
    return common_pb2.DataVersion(
        state_version=version.state_version, timestamp_ms=version.timestamp_ms, counter=version.counter
    )


def registration_from_proto(msg: namesrv_pb2.RegisterBrokerRequest) -> BrokerRegistration:
    """RegisterBrokerRequest -> BrokerRegistration (not yet validated)."""
    return BrokerRegistration(
        cluster_name=msg.cluster_name,
        broker_name=msg.broker_name,
        broker_id=msg.broker_id,
        broker_addr=msg.broker_addr,
        topic_configs={name: _topic_config_from_proto(tc) for name, tc in msg.topic_config_table.items()},
        data_version=_data_version_from_proto(msg.data_version),
        ha_server_addr=msg.ha_server_addr,
        heartbeat_timeout_ms=msg.heartbeat_timeout_ms,
    )


def _queue_data_to_proto(qd: QueueData) -> namesrv_pb2.QueueData:
    return namesrv_pb2.QueueData(
        broker_name=qd.broker_name,
        read_queue_nums=qd.read_queue_nums,
        write_queue_nums=qd.write_queue_nums,
        perm=qd.perm,
        topic_sys_flag=qd.topic_sys_flag,
    )


def _broker_data_to_proto(bd: BrokerData) -> namesrv_pb2.BrokerData:
    return namesrv_pb2.BrokerData(cluster=bd.cluster, broker_name=bd.broker_name, broker_addrs=dict(bd.broker_addrs))


def route_to_proto(route: TopicRouteData) -> namesrv_pb2.TopicRouteData:
    """TopicRouteData -> mq.namesrv.v1.TopicRouteData (order kept)."""
    return namesrv_pb2.TopicRouteData(
        queue_datas=[_queue_data_to_proto(q) for q in route.queue_datas],
        broker_datas=[_broker_data_to_proto(b) for b in route.broker_datas],
        order_topic_conf=route.order_topic_conf,
    )


def _live_to_proto(live: BrokerLiveInfo) -> namesrv_pb2.BrokerLiveInfo:
    return namesrv_pb2.BrokerLiveInfo(
        broker_addr=live.broker_addr,
        last_update_timestamp_ms=live.last_update_timestamp_ms,
        heartbeat_timeout_ms=live.heartbeat_timeout_ms,
        data_version=_data_version_to_proto(live.data_version),
    )


def _guard(rpc: str, make_error: Callable[[int, str], _Resp], handler: Callable[[], _Resp]) -> _Resp:
    """Run ``handler``; an MQError becomes its code + remark, any other exception SYSTEM_ERROR."""
    try:
        return handler()
    except MQError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            log.info("request_refused", rpc=rpc, code=ResponseCode.name_of(exc.code), remark=exc.remark)
        return make_error(exc.code, exc.remark)
    except Exception as exc:
        log.exception("request_failed", rpc=rpc)
        return make_error(ResponseCode.SYSTEM_ERROR, f"{rpc} failed: {type(exc).__name__}: {exc}")


class NameServerServicer(namesrv_pb2_grpc.NameServerServicer):
    """mq.namesrv.v1.NameServer over a RouteInfoManager. Runs on the service's asyncio loop."""

    def __init__(self, manager: RouteInfoManager) -> None:
        self._manager = manager

    async def RegisterBroker(
        self, request: namesrv_pb2.RegisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.RegisterBrokerResponse:
        def handle() -> namesrv_pb2.RegisterBrokerResponse:
            result = self._manager.register_broker(registration_from_proto(request))
            return namesrv_pb2.RegisterBrokerResponse(
                code=ResponseCode.SUCCESS, ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
            )

        return _guard("RegisterBroker", _register_error, handle)

    async def UnregisterBroker(
        self, request: namesrv_pb2.UnregisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.UnregisterBrokerResponse:
        def handle() -> namesrv_pb2.UnregisterBrokerResponse:
            self._manager.unregister_broker(
                request.cluster_name, request.broker_addr, request.broker_name, request.broker_id
            )
            return namesrv_pb2.UnregisterBrokerResponse(code=ResponseCode.SUCCESS)

        return _guard("UnregisterBroker", _unregister_error, handle)

    async def GetRouteInfoByTopic(
        self, request: namesrv_pb2.GetRouteInfoByTopicRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.GetRouteInfoByTopicResponse:
        def handle() -> namesrv_pb2.GetRouteInfoByTopicResponse:
            if not request.topic.strip():
                return _route_error(ResponseCode.INVALID_PARAMETER, "topic is blank")
            route = self._manager.pickup_topic_route_data(request.topic)
            return namesrv_pb2.GetRouteInfoByTopicResponse(code=ResponseCode.SUCCESS, route=route_to_proto(route))

        return _guard("GetRouteInfoByTopic", _route_error, handle)

    async def GetBrokerClusterInfo(
        self, request: namesrv_pb2.GetBrokerClusterInfoRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.GetBrokerClusterInfoResponse:
        def handle() -> namesrv_pb2.GetBrokerClusterInfoResponse:
            info = self._manager.get_all_cluster_info()
            return namesrv_pb2.GetBrokerClusterInfoResponse(
                code=ResponseCode.SUCCESS,
                broker_addr_table={n: _broker_data_to_proto(b) for n, b in info.broker_addr_table.items()},
                cluster_addr_table={
                    c: namesrv_pb2.BrokerNames(broker_names=list(ns)) for c, ns in info.cluster_addr_table.items()
                },
                broker_live_table={a: _live_to_proto(live) for a, live in info.broker_live_table.items()},
            )

        return _guard("GetBrokerClusterInfo", _cluster_error, handle)

    async def GetAllTopicList(
        self, request: namesrv_pb2.GetAllTopicListRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.GetAllTopicListResponse:
        def handle() -> namesrv_pb2.GetAllTopicListResponse:
            topics = self._manager.get_all_topic_list()
            return namesrv_pb2.GetAllTopicListResponse(code=ResponseCode.SUCCESS, topic_list=topics)

        return _guard("GetAllTopicList", _topic_list_error, handle)


def _register_error(code: int, remark: str) -> namesrv_pb2.RegisterBrokerResponse:
    return namesrv_pb2.RegisterBrokerResponse(code=code, remark=remark)


def _unregister_error(code: int, remark: str) -> namesrv_pb2.UnregisterBrokerResponse:
    return namesrv_pb2.UnregisterBrokerResponse(code=code, remark=remark)


def _route_error(code: int, remark: str) -> namesrv_pb2.GetRouteInfoByTopicResponse:
    return namesrv_pb2.GetRouteInfoByTopicResponse(code=code, remark=remark)


def _cluster_error(code: int, remark: str) -> namesrv_pb2.GetBrokerClusterInfoResponse:
    return namesrv_pb2.GetBrokerClusterInfoResponse(code=code, remark=remark)


def _topic_list_error(code: int, remark: str) -> namesrv_pb2.GetAllTopicListResponse:
    return namesrv_pb2.GetAllTopicListResponse(code=code, remark=remark)


def add_to_server(servicer: NameServerServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``."""
    namesrv_pb2_grpc.add_NameServerServicer_to_server(servicer, server)
