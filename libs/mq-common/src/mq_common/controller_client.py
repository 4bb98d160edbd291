"""The one controller client: heartbeats, SyncStateSet changes, elections and queries (an edge module).

Mirrors org.apache.rocketmq.broker.out.BrokerOuterAPI's controller calls (sendHeartbeatToController,
alterSyncStateSet, getReplicaInfo) and DefaultMQAdminExt's (electMaster, getInSyncStateData,
getControllerMetaData). The broker's ReplicasManager and mqadmin both use it. Each call tries the controllers in
turn, starting from the last one that answered; a transport failure moves on to the next (every controller serves:
they share their state in etcd). Runs on the caller's asyncio loop.

Errors: a gRPC status -> mq_common.grpc_errors.transport_error (RemotingError); a non-zero ``code`` ->
mq_common.errors.error_for_code (MQBrokerError with RocketMQ's code: CONTROLLER_FENCED_MASTER_EPOCH 2000,
CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH 2001, CONTROLLER_INVALID_MASTER 2002, CONTROLLER_INVALID_REPLICAS 2003,
CONTROLLER_MASTER_NOT_AVAILABLE 2004, CONTROLLER_INVALID_REQUEST 2005, CONTROLLER_BROKER_METADATA_NOT_EXIST 2008,
CONTROLLER_MASTER_STILL_EXIST 2011, CONTROLLER_ELECT_MASTER_FAILED 2012, CONTROLLER_BROKER_ID_INVALID 2014,
NO_PERMISSION 16).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from mq.controller.v1 import controller_pb2, controller_pb2_grpc

from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool, seconds
from mq_common.failover import Failover
from mq_common.grpc_errors import invoke
from mq_common.namesrv_client import check_code
from mq_common.protocol.controller import (
    BrokerHeartbeat,
    ControllerMetaData,
    GroupReplicas,
    HeartbeatResult,
    ReplicaInfo,
    SyncStateSetResult,
)
from mq_common.protocol.controller_convert import (
    group_replicas_from_proto,
    heartbeat_to_proto,
    metadata_from_proto,
    replica_info_from_proto,
    role_from_proto,
)

_R = TypeVar("_R")
if TYPE_CHECKING:
    _Stub = controller_pb2_grpc.ControllerAsyncStub


class ControllerClient:
    """Calls to a list of controllers (RocketMQ controllerAddr ``"a:1;b:2"`` split). Raises MQClientError
    (RPC_ADDR_IS_NULL, -1002) when ``controller_addrs`` has no address."""

    def __init__(self, controller_addrs: Sequence[str], pool: ChannelPool) -> None:
        self._failover = Failover(controller_addrs, "controller")
        self._pool = pool

    @property
    def controller_addrs(self) -> tuple[str, ...]:
        return self._failover.addrs

    async def _call(self, attempt: Callable[[_Stub, str, float], Awaitable[_R]], timeout_ms: int) -> _R:
        def stub(addr: str) -> _Stub:
            return controller_pb2_grpc.ControllerStub(self._pool.get(addr))

        return await self._failover.call(lambda addr: attempt(stub(addr), addr, seconds(timeout_ms)))

    async def broker_heartbeat(
        self, heartbeat: BrokerHeartbeat, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> HeartbeatResult:
        """Report liveness and offsets; the group's replica state and the caller's role. A group without a live
        master elects one first. Raises CONTROLLER_MASTER_NOT_AVAILABLE (2004) when no replica can be master."""

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> HeartbeatResult:
            resp = await invoke(stub.BrokerHeartbeat(heartbeat_to_proto(heartbeat), timeout=timeout_s), addr)
            check_code(resp.code, resp.remark, heartbeat.broker_name)
            return HeartbeatResult(replica_info_from_proto(resp.replica_info), role_from_proto(resp.role_for_caller))

        return await self._call(attempt, timeout_ms)

    async def alter_sync_state_set(
        self,
        cluster_name: str,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new_sync_state_set: frozenset[int],
        sync_state_set_epoch: int,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> SyncStateSetResult:
        """The master's change of its SyncStateSet; the new set and epoch. Raises the fencing codes (2000, 2001),
        CONTROLLER_INVALID_MASTER (2002) or CONTROLLER_INVALID_REPLICAS (2003)."""
        request = controller_pb2.AlterSyncStateSetRequest(
            cluster_name=cluster_name,
            broker_name=broker_name,
            master_broker_id=master_broker_id,
            master_epoch=master_epoch,
            new_sync_state_set=sorted(new_sync_state_set),
            sync_state_set_epoch=sync_state_set_epoch,
        )

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> SyncStateSetResult:
            resp = await invoke(stub.AlterSyncStateSet(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark, broker_name)
            return SyncStateSetResult(frozenset(resp.sync_state_set), resp.sync_state_set_epoch)

        return await self._call(attempt, timeout_ms)

    async def elect_master(
        self,
        cluster_name: str,
        broker_name: str,
        designated_broker_id: int | None = None,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> ReplicaInfo:
        """Manual election; the new replica state. Raises CONTROLLER_ELECT_MASTER_FAILED (2012) when the designated
        broker is not alive and in sync, CONTROLLER_MASTER_STILL_EXIST (2011) when it already is master."""
        request = controller_pb2.ElectMasterRequest(
            cluster_name=cluster_name, broker_name=broker_name, designated_broker_id=designated_broker_id
        )

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> ReplicaInfo:
            resp = await invoke(stub.ElectMaster(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark, broker_name)
            return replica_info_from_proto(resp.replica_info)

        return await self._call(attempt, timeout_ms)

    async def get_replica_info(self, broker_name: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> ReplicaInfo:
        """The group's replica state. Raises CONTROLLER_BROKER_METADATA_NOT_EXIST (2008) for an unknown group."""

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> ReplicaInfo:
            request = controller_pb2.GetReplicaInfoRequest(broker_name=broker_name)
            resp = await invoke(stub.GetReplicaInfo(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark, broker_name)
            return replica_info_from_proto(resp.replica_info)

        return await self._call(attempt, timeout_ms)

    async def get_sync_state_data(
        self, broker_names: Sequence[str], timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> tuple[GroupReplicas, ...]:
        """The known groups among ``broker_names`` with their in-sync and other replicas."""

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> tuple[GroupReplicas, ...]:
            request = controller_pb2.GetSyncStateDataRequest(broker_names=list(broker_names))
            resp = await invoke(stub.GetSyncStateData(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark)
            return tuple(group_replicas_from_proto(g) for g in resp.groups)

        return await self._call(attempt, timeout_ms)

    async def get_controller_meta_data(self, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> ControllerMetaData:
        """The answering controller's address and its etcd cluster."""

        async def attempt(stub: _Stub, addr: str, timeout_s: float) -> ControllerMetaData:
            resp = await invoke(
                stub.GetControllerMetaData(controller_pb2.GetControllerMetaDataRequest(), timeout=timeout_s), addr
            )
            check_code(resp.code, resp.remark)
            return metadata_from_proto(resp)

        return await self._call(attempt, timeout_ms)
