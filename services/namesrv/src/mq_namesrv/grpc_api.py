"""gRPC face of the name server: translates mq.namesrv.v1 messages <-> domain values, nothing else.

Mirrors org.apache.rocketmq.namesrv.processor.{DefaultRequestProcessor, ClientRequestProcessor}. Handlers run
on the service's asyncio loop and never await inside a route table operation. Business outcomes travel as
``code`` + ``remark``: a malformed request gets INVALID_PARAMETER (29), a topic without route TOPIC_NOT_EXIST
(17), an unexpected failure SYSTEM_ERROR (1) — a handler never raises into gRPC.

Who may change routes (mq_common.auth.admin_access): RegisterBroker and UnregisterBroker need, with authentication
on, a component certificate or a call signed by a super user of the settings, and with it off (as before), a
component certificate when mutual TLS is enforced; DeleteTopicInNamesrv needs, with authentication on, a component
certificate or a super user's signature (off: open). A refused call gets NO_PERMISSION (16) with a remark naming
the RPC and changes nothing. The reads (GetRouteInfoByTopic, GetBrokerClusterInfo, GetAllTopicList) stay open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.auth.admin_access import AdminAccess
from mq_common.errors import MQError, internal_error_remark
from mq_common.grpc_guard import RequestLimits
from mq_common.logging import get_logger
from mq_common.protocol.convert import cluster_info_to_proto, registration_from_proto, route_to_proto
from mq_common.response_code import ResponseCode
from mq_common.tls import ComponentGuard
from mq_common.wire_bounds import method_bounds

from mq_namesrv.route_info_manager import RouteInfoManager

log = get_logger("mq_namesrv.grpc_api")

SERVICE_NAME = namesrv_pb2.DESCRIPTOR.services_by_name["NameServer"].full_name
_Resp = TypeVar("_Resp")


def _guard(rpc: str, make_error: Callable[[int, str], _Resp], handler: Callable[[], _Resp]) -> _Resp:
    """Run ``handler``; an MQError becomes its code + remark, any other exception SYSTEM_ERROR."""
    try:
        return handler()
    except MQError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            log.info("request_refused", rpc=rpc, code=ResponseCode.name_of(exc.code), remark=exc.remark)
        return make_error(exc.code, exc.remark)
    except Exception:
        log.exception("request_failed", rpc=rpc)
        return make_error(ResponseCode.SYSTEM_ERROR, internal_error_remark(rpc))


class NameServerServicer(namesrv_pb2_grpc.NameServerServicer):
    """mq.namesrv.v1.NameServer over a RouteInfoManager. Runs on the service's asyncio loop."""

    def __init__(self, manager: RouteInfoManager, access: AdminAccess | None = None) -> None:
        self._manager = manager
        self._access = access or AdminAccess(ComponentGuard(), None)

    async def _refused(
        self,
        rpc: str,
        context: grpc.aio.ServicerContext[object, object],
        make_error: Callable[[int, str], _Resp],
        check: Callable[[grpc.aio.ServicerContext[object, object], str], Awaitable[None]],
    ) -> _Resp | None:
        """NO_PERMISSION (16) when ``check`` (an AdminAccess check) refuses the caller, else None."""
        try:
            await check(context, rpc)
        except MQError as exc:
            log.warning("admin_call_refused", rpc=rpc, remark=exc.remark, peer=context.peer())
            return make_error(exc.code, exc.remark)
        return None

    async def RegisterBroker(
        self, request: namesrv_pb2.RegisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.RegisterBrokerResponse:
        refused = await self._refused("RegisterBroker", context, _register_error, self._access.check_component_or_admin)
        if refused is not None:
            return refused

        def handle() -> namesrv_pb2.RegisterBrokerResponse:
            result = self._manager.register_broker(registration_from_proto(request))
            return namesrv_pb2.RegisterBrokerResponse(
                code=ResponseCode.SUCCESS, ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
            )

        return _guard("RegisterBroker", _register_error, handle)

    async def UnregisterBroker(
        self, request: namesrv_pb2.UnregisterBrokerRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.UnregisterBrokerResponse:
        refused = await self._refused(
            "UnregisterBroker", context, _unregister_error, self._access.check_component_or_admin
        )
        if refused is not None:
            return refused

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
            response = cluster_info_to_proto(self._manager.get_all_cluster_info())
            response.code = ResponseCode.SUCCESS
            return response

        return _guard("GetBrokerClusterInfo", _cluster_error, handle)

    async def GetAllTopicList(
        self, request: namesrv_pb2.GetAllTopicListRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.GetAllTopicListResponse:
        def handle() -> namesrv_pb2.GetAllTopicListResponse:
            topics = self._manager.get_all_topic_list()
            return namesrv_pb2.GetAllTopicListResponse(code=ResponseCode.SUCCESS, topic_list=topics)

        return _guard("GetAllTopicList", _topic_list_error, handle)

    async def DeleteTopicInNamesrv(
        self, request: namesrv_pb2.DeleteTopicInNamesrvRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> namesrv_pb2.DeleteTopicInNamesrvResponse:
        refused = await self._refused("DeleteTopicInNamesrv", context, _delete_topic_error, self._access.check_admin)
        if refused is not None:
            return refused

        def handle() -> namesrv_pb2.DeleteTopicInNamesrvResponse:
            self._manager.delete_topic(request.topic, request.cluster_name or None)
            return namesrv_pb2.DeleteTopicInNamesrvResponse(code=ResponseCode.SUCCESS)

        return _guard("DeleteTopicInNamesrv", _delete_topic_error, handle)


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


def _delete_topic_error(code: int, remark: str) -> namesrv_pb2.DeleteTopicInNamesrvResponse:
    return namesrv_pb2.DeleteTopicInNamesrvResponse(code=code, remark=remark)


def add_to_server(servicer: NameServerServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``."""
    namesrv_pb2_grpc.add_NameServerServicer_to_server(servicer, server)


def request_limits(max_topics_per_registration: int, max_concurrent_streams: int) -> RequestLimits:
    """The request guard's limits of mq.namesrv.v1.NameServer: RegisterBroker's topic_config_table entries."""
    service = namesrv_pb2.DESCRIPTOR.services_by_name["NameServer"]
    topics = ("topic_config_table", max_topics_per_registration, "max_topics_per_registration", None)
    return RequestLimits(
        dict([method_bounds(service, "RegisterBroker", topics)]), max_concurrent_streams=max_concurrent_streams
    )
