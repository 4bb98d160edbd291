"""The controller's state transitions on one group, as pure functions over :class:`GroupState`.

Mirrors org.apache.rocketmq.controller.impl.manager.ReplicasInfoManager (registerBroker, electMaster,
alterSyncStateSet, getReplicaInfo, getSyncStateData): each function takes the group's current state and the live
brokers and returns the next state (or raises MQError with RocketMQ's CONTROLLER_* code); the caller writes it with
a compare-and-set, so two controllers cannot both move one group from the same state. Any thread.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from mq_common.errors import MQError
from mq_common.protocol.controller import (
    NO_MASTER_ID,
    BrokerHeartbeat,
    GroupReplicas,
    ReplicaIdentity,
)
from mq_common.response_code import ResponseCode

from mq_controller.elect_policy import elect
from mq_controller.model import BrokerLiveInfo, BrokerReplica, GroupState


class ElectionReason(Enum):
    """Why a master was elected (label ``reason`` of mq_controller_elections_total)."""

    MASTER_DEAD = "master_dead"
    MANUAL = "manual"
    NO_MASTER = "no_master"


@dataclass(frozen=True, slots=True)
class Transition:
    """The next state of a group, and the reason when it elected a new master."""

    state: GroupState
    elected: ElectionReason | None = None


def _error(code: ResponseCode, remark: str) -> MQError:
    return MQError(remark, code)


def check_broker_name(broker_name: str) -> None:
    """Raises CONTROLLER_INVALID_REQUEST (2005) for a blank name or one that cannot be an etcd key segment."""
    if not broker_name.strip() or "/" in broker_name or len(broker_name) > 255:
        raise _error(ResponseCode.CONTROLLER_INVALID_REQUEST, f"invalid broker name {broker_name[:64]!r}")


def check_heartbeat(hb: BrokerHeartbeat) -> None:
    """Raises CONTROLLER_INVALID_REQUEST (2005) for a bad name or address, CONTROLLER_BROKER_ID_INVALID (2014) for
    an id <= 0 (controller-mode ids start at 1)."""
    check_broker_name(hb.broker_name)
    if hb.broker_id <= NO_MASTER_ID:
        raise _error(ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"broker id must be > 0, got {hb.broker_id}")
    if not hb.broker_addr.strip() or not hb.cluster_name.strip():
        raise _error(ResponseCode.CONTROLLER_INVALID_REQUEST, "cluster_name and broker_addr must be set")


def register(group: GroupState | None, hb: BrokerHeartbeat) -> GroupState:
    """The group with the heartbeat's broker recorded (a new group without master for the first one)."""
    state = group if group is not None else GroupState(hb.cluster_name, hb.broker_name)
    replica = BrokerReplica(hb.broker_id, hb.broker_addr, hb.ha_server_addr)
    return state if state.replica(hb.broker_id) == replica else state.with_replica(replica)


def with_master(group: GroupState, master_id: int | None) -> GroupState:
    """A new term: ``master_id`` master with master_epoch + 1 and SyncStateSet {master_id} (epoch + 1); None
    leaves the group without a master (epochs and SyncStateSet kept, so an in-sync replica's return elects it)."""
    if master_id is None:
        return replace(group, master_broker_id=NO_MASTER_ID)
    return replace(
        group,
        master_broker_id=master_id,
        master_epoch=group.master_epoch + 1,
        sync_state_set=frozenset({master_id}),
        sync_state_set_epoch=group.sync_state_set_epoch + 1,
    )


def ensure_master(group: GroupState, live: Mapping[int, BrokerLiveInfo], unclean: bool) -> Transition:
    """Elect when the group's master is missing or not live; else the group unchanged."""
    if group.master_broker_id != NO_MASTER_ID and group.master_broker_id in live:
        return Transition(group)
    reason = ElectionReason.NO_MASTER if group.master_broker_id == NO_MASTER_ID else ElectionReason.MASTER_DEAD
    chosen = elect(group, live, unclean=unclean)
    if chosen is None:
        return Transition(with_master(group, None))
    return Transition(with_master(group, chosen), reason)


def manual_elect(
    group: GroupState, live: Mapping[int, BrokerLiveInfo], designated: int | None, unclean: bool
) -> Transition:
    """ElectMaster: raises CONTROLLER_MASTER_STILL_EXIST (2011) when the policy keeps the live master,
    CONTROLLER_ELECT_MASTER_FAILED (2012) when no candidate qualifies (the designated one must be alive and in the
    SyncStateSet unless ``unclean``)."""
    chosen = elect(group, live, designated, unclean)
    if chosen is None:
        who = f"broker {designated}" if designated is not None else "no replica"
        raise _error(
            ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
            f"{group.broker_name}: {who} cannot be master (it must be alive and in the SyncStateSet)",
        )
    if chosen == group.master_broker_id:
        raise _error(
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST, f"{group.broker_name}: broker {chosen} is master already"
        )
    return Transition(with_master(group, chosen), ElectionReason.MANUAL)


def alter_sync_state_set(
    group: GroupState,
    live: Collection[int],
    master_broker_id: int,
    master_epoch: int,
    new_set: frozenset[int],
    sync_state_set_epoch: int,
) -> GroupState:
    """The group with the master's new SyncStateSet (epoch + 1; an unchanged set keeps the epoch).

    Raises CONTROLLER_INVALID_MASTER (2002) when the caller is not the live current master or drops itself,
    CONTROLLER_FENCED_MASTER_EPOCH (2000) / CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH (2001) for a stale epoch,
    CONTROLLER_INVALID_REPLICAS (2003) when an added broker is unknown or not alive."""
    name = group.broker_name
    if master_broker_id != group.master_broker_id or master_broker_id not in live:
        raise _error(
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"{name}: broker {master_broker_id} is not the live master (master is {group.master_broker_id})",
        )
    if master_epoch != group.master_epoch:
        raise _error(
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"{name}: master epoch {master_epoch} is stale, current is {group.master_epoch}",
        )
    if sync_state_set_epoch != group.sync_state_set_epoch:
        raise _error(
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"{name}: SyncStateSet epoch {sync_state_set_epoch} is stale, current is {group.sync_state_set_epoch}",
        )
    if master_broker_id not in new_set:
        raise _error(ResponseCode.CONTROLLER_INVALID_MASTER, f"{name}: the master must stay in the SyncStateSet")
    bad = sorted(b for b in new_set - group.sync_state_set if b not in live or group.replica(b) is None)
    if bad:
        raise _error(ResponseCode.CONTROLLER_INVALID_REPLICAS, f"{name}: brokers {bad} are unknown or not alive")
    if new_set == group.sync_state_set:
        return group
    return replace(group, sync_state_set=new_set, sync_state_set_epoch=group.sync_state_set_epoch + 1)


def group_replicas(group: GroupState, live: Collection[int]) -> GroupReplicas:
    """getSyncStateSet's view: in-sync replicas and the others, each with its liveness."""

    def identity(r: BrokerReplica) -> ReplicaIdentity:
        return ReplicaIdentity(group.broker_name, r.broker_id, r.broker_addr, r.broker_id in live)

    in_sync = tuple(identity(r) for r in group.replicas if r.broker_id in group.sync_state_set)
    others = tuple(identity(r) for r in group.replicas if r.broker_id not in group.sync_state_set)
    return GroupReplicas(group.cluster_name, group.broker_name, group.replica_info(), in_sync, others)
