"""Converters between mq.controller.v1 messages and mq_common.protocol.controller values (an edge module).

The one place both the controller's servicer and :mod:`mq_common.controller_client` translate through. Pure
functions; any thread.
"""

from __future__ import annotations

from mq.controller.v1 import controller_pb2

from mq_common.protocol.controller import (
    BrokerHeartbeat,
    ControllerMetaData,
    ControllerRole,
    GroupReplicas,
    ReplicaIdentity,
    ReplicaInfo,
)

_ROLE_TO_PROTO = {
    ControllerRole.MASTER: controller_pb2.BROKER_ROLE_MASTER,
    ControllerRole.SLAVE: controller_pb2.BROKER_ROLE_SLAVE,
}
_ROLE_FROM_PROTO: dict[int, ControllerRole] = {int(v): k for k, v in _ROLE_TO_PROTO.items()}


def replica_info_to_proto(info: ReplicaInfo) -> controller_pb2.ReplicaInfo:
    return controller_pb2.ReplicaInfo(
        master_broker_id=info.master_broker_id,
        master_addr=info.master_addr,
        master_ha_addr=info.master_ha_addr,
        master_epoch=info.master_epoch,
        sync_state_set=sorted(info.sync_state_set),
        sync_state_set_epoch=info.sync_state_set_epoch,
    )


def replica_info_from_proto(msg: controller_pb2.ReplicaInfo) -> ReplicaInfo:
    return ReplicaInfo(
        msg.master_broker_id,
        msg.master_addr,
        msg.master_ha_addr,
        msg.master_epoch,
        frozenset(msg.sync_state_set),
        msg.sync_state_set_epoch,
    )


def role_to_proto(role: ControllerRole) -> controller_pb2.BrokerRole.ValueType:
    return _ROLE_TO_PROTO[role]


def role_from_proto(value: int) -> ControllerRole:
    """SLAVE for an unknown or unspecified value (a broker that is not told it is master never acts as one)."""
    return _ROLE_FROM_PROTO.get(value, ControllerRole.SLAVE)


def heartbeat_to_proto(hb: BrokerHeartbeat) -> controller_pb2.BrokerHeartbeatRequest:
    return controller_pb2.BrokerHeartbeatRequest(
        cluster_name=hb.cluster_name,
        broker_name=hb.broker_name,
        broker_id=hb.broker_id,
        broker_addr=hb.broker_addr,
        ha_server_addr=hb.ha_server_addr,
        max_offset=hb.max_offset,
        confirm_offset=hb.confirm_offset,
        epoch=hb.epoch,
        election_priority=hb.election_priority,
    )


def heartbeat_from_proto(msg: controller_pb2.BrokerHeartbeatRequest) -> BrokerHeartbeat:
    return BrokerHeartbeat(
        msg.cluster_name,
        msg.broker_name,
        msg.broker_id,
        msg.broker_addr,
        msg.ha_server_addr,
        msg.max_offset,
        msg.confirm_offset,
        msg.epoch,
        msg.election_priority,
    )


def _identity_to_proto(r: ReplicaIdentity) -> controller_pb2.ReplicaIdentity:
    return controller_pb2.ReplicaIdentity(
        broker_name=r.broker_name, broker_id=r.broker_id, broker_addr=r.broker_addr, alive=r.alive
    )


def _identity_from_proto(msg: controller_pb2.ReplicaIdentity) -> ReplicaIdentity:
    return ReplicaIdentity(msg.broker_name, msg.broker_id, msg.broker_addr, msg.alive)


def group_replicas_to_proto(group: GroupReplicas) -> controller_pb2.GroupReplicas:
    return controller_pb2.GroupReplicas(
        cluster_name=group.cluster_name,
        broker_name=group.broker_name,
        replica_info=replica_info_to_proto(group.replica_info),
        in_sync_replicas=[_identity_to_proto(r) for r in group.in_sync_replicas],
        not_in_sync_replicas=[_identity_to_proto(r) for r in group.not_in_sync_replicas],
    )


def group_replicas_from_proto(msg: controller_pb2.GroupReplicas) -> GroupReplicas:
    return GroupReplicas(
        msg.cluster_name,
        msg.broker_name,
        replica_info_from_proto(msg.replica_info),
        tuple(_identity_from_proto(r) for r in msg.in_sync_replicas),
        tuple(_identity_from_proto(r) for r in msg.not_in_sync_replicas),
    )


def metadata_to_proto(meta: ControllerMetaData) -> controller_pb2.GetControllerMetaDataResponse:
    return controller_pb2.GetControllerMetaDataResponse(
        controller_addr=meta.controller_addr,
        is_leader=meta.is_leader,
        etcd_endpoints=list(meta.etcd_endpoints),
        etcd_leader_id=meta.etcd_leader_id,
    )


def metadata_from_proto(msg: controller_pb2.GetControllerMetaDataResponse) -> ControllerMetaData:
    return ControllerMetaData(msg.controller_addr, msg.is_leader, tuple(msg.etcd_endpoints), msg.etcd_leader_id)
