"""The one small interface between the controller's logic and where its state lives.

RocketMQ keeps this state in its own Raft log (DLedger or JRaft, RaftReplicasInfoManager); here etcd holds it
(:class:`mq_controller.etcd_store.EtcdReplicaStateStore`), so any number of controller processes share one truth
and a change is safe under compare-and-set. Implementations run on the controller's asyncio loop and raise
:class:`StateStoreUnavailableError` when the store cannot answer (the RPC answers SYSTEM_BUSY; nothing changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mq_controller.model import BrokerLiveInfo, GroupState


class StateStoreUnavailableError(Exception):
    """The store did not answer in time (no etcd quorum, every endpoint down)."""


@dataclass(frozen=True, slots=True)
class Versioned:
    """A group's state with the store revision it was read at (etcd mod_revision; 0 = absent)."""

    state: GroupState
    revision: int


class ReplicaStateStore(Protocol):
    """Groups with revisions, compare-and-set, and broker liveness under expiring leases."""

    async def load_group(self, broker_name: str) -> Versioned | None:
        """The group's state, or None when no broker of it ever registered."""
        ...

    async def compare_and_set(self, state: GroupState, revision: int) -> bool:
        """Write ``state`` only if the group is still at ``revision`` (0: only if absent). True when written."""
        ...

    async def record_heartbeat(self, live: BrokerLiveInfo, ttl_s: int) -> None:
        """Mark the broker live for ``ttl_s`` more seconds with these offsets (a lease kept alive by heartbeats)."""
        ...

    async def live_brokers(self, broker_name: str) -> dict[int, BrokerLiveInfo]:
        """The group's brokers whose lease has not expired, by broker id."""
        ...

    async def list_groups(self) -> list[Versioned]:
        """Every group's state, sorted by broker name."""
        ...

    async def leader_id(self) -> str:
        """An id of the store's current leader (etcd: the Raft leader member id, hex) for GetControllerMetaData."""
        ...

    async def close(self) -> None: ...
