"""gRPC face of the controller: translates mq.controller.v1 messages <-> domain values, nothing else.

Mirrors org.apache.rocketmq.controller.processor.ControllerRequestProcessor. Handlers run on the controller's
asyncio loop. Business outcomes travel as ``code`` + ``remark`` (RocketMQ's CONTROLLER_* codes 2000+, NO_PERMISSION
16 from :mod:`mq_controller.access`, SYSTEM_BUSY 2 while etcd is unreachable); an unexpected failure is
SYSTEM_ERROR (1). A handler never raises into gRPC.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import grpc
from mq.controller.v1 import controller_pb2, controller_pb2_grpc
from mq_common.errors import MQError, internal_error_remark
from mq_common.grpc_guard import RequestLimits
from mq_common.logging import get_logger
from mq_common.protocol.controller import ControllerMetaData
from mq_common.protocol.controller_convert import (
    group_replicas_to_proto,
    heartbeat_from_proto,
    metadata_to_proto,
    replica_info_to_proto,
    role_to_proto,
)
from mq_common.response_code import ResponseCode
from mq_common.wire_bounds import method_bounds

from mq_controller.access import ControllerAccess
from mq_controller.manager import MAX_GROUPS_PER_QUERY, ControllerManager

log = get_logger("mq_controller.grpc_api")

SERVICE_NAME: Final = controller_pb2.DESCRIPTOR.services_by_name["Controller"].full_name
MAX_SYNC_STATE_SET_IDS: Final = 64
_Resp = TypeVar("_Resp")
_Context = grpc.aio.ServicerContext[Any, Any]


async def _answer(rpc: str, response: Callable[..., _Resp], handler: Callable[[], Awaitable[_Resp]]) -> _Resp:
    """Run ``handler``; an MQError becomes its code + remark, any other exception SYSTEM_ERROR."""
    try:
        return await handler()
    except MQError as exc:
        log.info("request_refused", rpc=rpc, code=ResponseCode.name_of(exc.code), remark=exc.remark)
        return response(code=exc.code, remark=exc.remark)
    except Exception:
        log.exception("request_failed", rpc=rpc)
        return response(code=ResponseCode.SYSTEM_ERROR, remark=internal_error_remark(rpc))


class ControllerServicer(controller_pb2_grpc.ControllerServicer):
    """mq.controller.v1.Controller over a ControllerManager. ``metadata`` answers GetControllerMetaData."""

    def __init__(
        self,
        manager: ControllerManager,
        access: ControllerAccess,
        metadata: Callable[[], Awaitable[ControllerMetaData]],
    ) -> None:
        self._manager = manager
        self._access = access
        self._metadata = metadata

    async def BrokerHeartbeat(
        self, request: controller_pb2.BrokerHeartbeatRequest, context: _Context
    ) -> controller_pb2.BrokerHeartbeatResponse:
        async def handle() -> controller_pb2.BrokerHeartbeatResponse:
            self._access.check_component(context, "BrokerHeartbeat")
            result = await self._manager.broker_heartbeat(heartbeat_from_proto(request))
            return controller_pb2.BrokerHeartbeatResponse(
                code=ResponseCode.SUCCESS,
                replica_info=replica_info_to_proto(result.replica_info),
                role_for_caller=role_to_proto(result.role),
            )

        return await _answer("BrokerHeartbeat", controller_pb2.BrokerHeartbeatResponse, handle)

    async def AlterSyncStateSet(
        self, request: controller_pb2.AlterSyncStateSetRequest, context: _Context
    ) -> controller_pb2.AlterSyncStateSetResponse:
        async def handle() -> controller_pb2.AlterSyncStateSetResponse:
            self._access.check_component(context, "AlterSyncStateSet")
            result = await self._manager.alter_sync_state_set(
                request.broker_name,
                request.master_broker_id,
                request.master_epoch,
                frozenset(request.new_sync_state_set),
                request.sync_state_set_epoch,
            )
            return controller_pb2.AlterSyncStateSetResponse(
                code=ResponseCode.SUCCESS,
                sync_state_set=sorted(result.sync_state_set),
                sync_state_set_epoch=result.sync_state_set_epoch,
            )

        return await _answer("AlterSyncStateSet", controller_pb2.AlterSyncStateSetResponse, handle)

    async def ElectMaster(
        self, request: controller_pb2.ElectMasterRequest, context: _Context
    ) -> controller_pb2.ElectMasterResponse:
        async def handle() -> controller_pb2.ElectMasterResponse:
            await self._access.check_admin(context, "ElectMaster")
            designated = request.designated_broker_id if request.HasField("designated_broker_id") else None
            info = await self._manager.elect_master(request.broker_name, designated)
            return controller_pb2.ElectMasterResponse(
                code=ResponseCode.SUCCESS, replica_info=replica_info_to_proto(info)
            )

        return await _answer("ElectMaster", controller_pb2.ElectMasterResponse, handle)

    async def GetReplicaInfo(
        self, request: controller_pb2.GetReplicaInfoRequest, context: _Context
    ) -> controller_pb2.GetReplicaInfoResponse:
        async def handle() -> controller_pb2.GetReplicaInfoResponse:
            await self._access.check_admin(context, "GetReplicaInfo")
            info = await self._manager.get_replica_info(request.broker_name)
            return controller_pb2.GetReplicaInfoResponse(
                code=ResponseCode.SUCCESS, replica_info=replica_info_to_proto(info)
            )

        return await _answer("GetReplicaInfo", controller_pb2.GetReplicaInfoResponse, handle)

    async def GetSyncStateData(
        self, request: controller_pb2.GetSyncStateDataRequest, context: _Context
    ) -> controller_pb2.GetSyncStateDataResponse:
        async def handle() -> controller_pb2.GetSyncStateDataResponse:
            await self._access.check_admin(context, "GetSyncStateData")
            groups = await self._manager.get_sync_state_data(list(request.broker_names))
            return controller_pb2.GetSyncStateDataResponse(
                code=ResponseCode.SUCCESS, groups=[group_replicas_to_proto(g) for g in groups]
            )

        return await _answer("GetSyncStateData", controller_pb2.GetSyncStateDataResponse, handle)

    async def GetControllerMetaData(
        self, request: controller_pb2.GetControllerMetaDataRequest, context: _Context
    ) -> controller_pb2.GetControllerMetaDataResponse:
        async def handle() -> controller_pb2.GetControllerMetaDataResponse:
            await self._access.check_admin(context, "GetControllerMetaData")
            response = metadata_to_proto(await self._metadata())
            response.code = ResponseCode.SUCCESS
            return response

        return await _answer("GetControllerMetaData", controller_pb2.GetControllerMetaDataResponse, handle)


def add_to_server(servicer: ControllerServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``."""
    controller_pb2_grpc.add_ControllerServicer_to_server(servicer, server)


def request_limits(max_concurrent_streams: int) -> RequestLimits:
    """The request guard's limits: SyncStateSet ids of AlterSyncStateSet, broker names of GetSyncStateData."""
    service = controller_pb2.DESCRIPTOR.services_by_name["Controller"]
    ids = ("new_sync_state_set", MAX_SYNC_STATE_SET_IDS, "MAX_SYNC_STATE_SET_IDS", None)
    names = ("broker_names", MAX_GROUPS_PER_QUERY, "MAX_GROUPS_PER_QUERY", None)
    return RequestLimits(
        dict([method_bounds(service, "AlterSyncStateSet", ids), method_bounds(service, "GetSyncStateData", names)]),
        max_concurrent_streams=max_concurrent_streams,
    )
