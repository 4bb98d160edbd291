"""Controller-mode values (RocketMQ 5, RIP-44): a broker group's replica state and what brokers report.

Mirrors org.apache.rocketmq.remoting.protocol.header.controller (GetReplicaInfoResponseHeader,
AlterSyncStateSetRequestHeader, ElectMasterResponseHeader), remoting.protocol.body.SyncStateSet and
BrokerReplicasInfo, and controller.BrokerHeartbeatManager's BrokerLiveInfo. Broker ids in controller mode start at 1
(RocketMQ's controller hands them out from 1); :data:`NO_MASTER_ID` (0) in ``master_broker_id`` means the group has
no master now. Epochs are int32 counters that only grow. Plain values, no I/O; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

NO_MASTER_ID: Final = 0
"""``ReplicaInfo.master_broker_id`` of a group without a master (controller-mode broker ids are > 0)."""


class ControllerRole(Enum):
    """The role the controller gives a broker (BrokerRole SYNC/ASYNC master vs SLAVE, as ReplicasManager sees it)."""

    MASTER = "MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """Who is master of a group and which replicas are in sync (GetReplicaInfoResponseHeader + SyncStateSet).

    ``sync_state_set`` holds broker ids; ``master_epoch`` grows by one per elected master, ``sync_state_set_epoch``
    by one per change of the set (an election included)."""

    master_broker_id: int
    master_addr: str
    master_ha_addr: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    @property
    def has_master(self) -> bool:
        return self.master_broker_id != NO_MASTER_ID


@dataclass(frozen=True, slots=True)
class BrokerHeartbeat:
    """What a broker reports to the controller every heartbeat (BrokerHeartbeatRequestHeader plus the
    registration's addresses). ``max_offset`` / ``confirm_offset``: CommitLog offsets in bytes; ``epoch``: the last
    master epoch of the broker's epoch file; ``election_priority``: smaller wins, 0 = unset (lowest)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""
    max_offset: int = 0
    confirm_offset: int = 0
    epoch: int = 0
    election_priority: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The controller's answer to a heartbeat: the group's replica state and the caller's role in it."""

    replica_info: ReplicaInfo
    role: ControllerRole


@dataclass(frozen=True, slots=True)
class SyncStateSetResult:
    """The SyncStateSet after an AlterSyncStateSet, with its (new) epoch."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """One replica of a group (BrokerReplicasInfo.ReplicaIdentity): ``alive`` while its heartbeat lease holds."""

    broker_name: str
    broker_id: int
    broker_addr: str
    alive: bool


@dataclass(frozen=True, slots=True)
class GroupReplicas:
    """One group as getSyncStateSet shows it (BrokerReplicasInfo.ReplicasInfo), replicas sorted by id."""

    cluster_name: str
    broker_name: str
    replica_info: ReplicaInfo
    in_sync_replicas: tuple[ReplicaIdentity, ...]
    not_in_sync_replicas: tuple[ReplicaIdentity, ...]


@dataclass(frozen=True, slots=True)
class ControllerMetaData:
    """GetControllerMetaData: the controller that answered, and the etcd cluster it keeps its state in."""

    controller_addr: str
    is_leader: bool
    etcd_endpoints: tuple[str, ...]
    etcd_leader_id: str
