"""The controller's requests over a :class:`ReplicaStateStore`: read, transition, compare-and-set, retry.

Mirrors org.apache.rocketmq.controller.ControllerManager (the request side and the inactive-master scan) with
ReplicasInfoManager's transitions from :mod:`mq_controller.replicas_info_manager`. Each write reads the group and
its live brokers, computes the next state and writes it only if the group did not change meanwhile (etcd txn);
a lost race reads again, at most MAX_CAS_ATTEMPTS times (then SYSTEM_BUSY 2). Runs on the controller's asyncio
loop; errors are MQError with RocketMQ's codes (see each method).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol.controller import (
    BrokerHeartbeat,
    ControllerRole,
    GroupReplicas,
    HeartbeatResult,
    ReplicaInfo,
    SyncStateSetResult,
)
from mq_common.response_code import ResponseCode

from mq_controller import replicas_info_manager as rim
from mq_controller.model import BrokerLiveInfo, GroupState
from mq_controller.state_store import ReplicaStateStore, StateStoreUnavailableError, Versioned

log = get_logger("mq_controller.manager")

MAX_CAS_ATTEMPTS: Final = 16
MAX_GROUPS_PER_QUERY: Final = 1_000
_T = TypeVar("_T")
ElectionObserver = Callable[[str, rim.ElectionReason], None]
"""Told (broker name, reason) of each master elected and written (metrics)."""


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    """``lease_ttl_s``: liveness lease of a heartbeat; ``unclean``: enableElectUncleanMaster."""

    lease_ttl_s: int
    unclean: bool = False
    max_groups: int = 10_000


class ControllerManager:
    """Heartbeats, SyncStateSet changes, elections and queries of every broker group. One asyncio loop."""

    def __init__(
        self, store: ReplicaStateStore, config: ManagerConfig, on_election: ElectionObserver | None = None
    ) -> None:
        self._store = store
        self._config = config
        self._on_election = on_election
        self.sync_state_set_sizes: dict[str, int] = {}

    async def _transition(
        self, broker_name: str, step: Callable[[GroupState | None, dict[int, BrokerLiveInfo]], rim.Transition]
    ) -> GroupState:
        """Read, ``step``, compare-and-set until written or unchanged. Raises what ``step`` raises, SYSTEM_BUSY (2)
        after MAX_CAS_ATTEMPTS lost races, SYSTEM_BUSY when the store is unavailable."""
        try:
            for _ in range(MAX_CAS_ATTEMPTS):
                current = await self._store.load_group(broker_name)
                live = await self._store.live_brokers(broker_name)
                before = current.state if current is not None else None
                outcome = step(before, live)
                if outcome.state == before:
                    return outcome.state
                if await self._store.compare_and_set(outcome.state, current.revision if current is not None else 0):
                    self._written(outcome)
                    return outcome.state
        except StateStoreUnavailableError as exc:
            raise _busy(exc) from None
        raise MQError(f"{broker_name}: too many concurrent changes, retry", ResponseCode.SYSTEM_BUSY)

    def _written(self, outcome: rim.Transition) -> None:
        state = outcome.state
        self.sync_state_set_sizes[state.broker_name] = len(state.sync_state_set)
        if outcome.elected is not None:
            log.info(
                "master_elected",
                broker_name=state.broker_name,
                broker_id=state.master_broker_id,
                master_epoch=state.master_epoch,
                reason=outcome.elected.value,
            )
            if self._on_election is not None:
                self._on_election(state.broker_name, outcome.elected)

    async def _ask(self, call: Awaitable[_T]) -> _T:
        """Await a store call; StateStoreUnavailableError becomes SYSTEM_BUSY (2)."""
        try:
            return await call
        except StateStoreUnavailableError as exc:
            raise _busy(exc) from None

    async def broker_heartbeat(self, hb: BrokerHeartbeat) -> HeartbeatResult:
        """Record liveness, register the broker, elect when the group has no live master. Raises
        CONTROLLER_INVALID_REQUEST (2005), CONTROLLER_BROKER_ID_INVALID (2014), CONTROLLER_MASTER_NOT_AVAILABLE
        (2004) when no replica may be master, SYSTEM_BUSY (2)."""
        rim.check_heartbeat(hb)
        await self._ask(self._store.record_heartbeat(BrokerLiveInfo.of(hb), self._config.lease_ttl_s))

        def step(group: GroupState | None, live: dict[int, BrokerLiveInfo]) -> rim.Transition:
            if group is None and len(self.sync_state_set_sizes) >= self._config.max_groups:
                raise MQError("the controller tracks max_groups groups already", ResponseCode.SYSTEM_BUSY)
            registered = rim.register(group, hb)
            return rim.ensure_master(registered, live, self._config.unclean)

        state = await self._transition(hb.broker_name, step)
        info = state.replica_info()
        if not info.has_master:
            raise MQError(
                f"{hb.broker_name}: no replica can be master now", ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
            )
        role = ControllerRole.MASTER if info.master_broker_id == hb.broker_id else ControllerRole.SLAVE
        return HeartbeatResult(info, role)

    async def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new_set: frozenset[int],
        sync_state_set_epoch: int,
    ) -> SyncStateSetResult:
        """Raises CONTROLLER_BROKER_METADATA_NOT_EXIST (2008) for an unknown group and the codes of
        :func:`mq_controller.replicas_info_manager.alter_sync_state_set`."""
        rim.check_broker_name(broker_name)

        def step(group: GroupState | None, live: dict[int, BrokerLiveInfo]) -> rim.Transition:
            known = _known(group, broker_name)
            args = (master_broker_id, master_epoch, new_set, sync_state_set_epoch)
            return rim.Transition(rim.alter_sync_state_set(known, live.keys(), *args))

        state = await self._transition(broker_name, step)
        return SyncStateSetResult(state.sync_state_set, state.sync_state_set_epoch)

    async def elect_master(self, broker_name: str, designated: int | None) -> ReplicaInfo:
        """Manual election. Raises 2008 for an unknown group, CONTROLLER_MASTER_STILL_EXIST (2011),
        CONTROLLER_ELECT_MASTER_FAILED (2012)."""
        rim.check_broker_name(broker_name)

        def step(group: GroupState | None, live: dict[int, BrokerLiveInfo]) -> rim.Transition:
            return rim.manual_elect(_known(group, broker_name), live, designated, self._config.unclean)

        return (await self._transition(broker_name, step)).replica_info()

    async def get_replica_info(self, broker_name: str) -> ReplicaInfo:
        """Raises CONTROLLER_BROKER_METADATA_NOT_EXIST (2008) for an unknown group."""
        rim.check_broker_name(broker_name)
        current = await self._load(broker_name)
        return _known(current.state if current is not None else None, broker_name).replica_info()

    async def get_sync_state_data(self, broker_names: Sequence[str]) -> list[GroupReplicas]:
        """The known groups among ``broker_names`` (all groups when empty), with their replicas' liveness."""
        names = list(dict.fromkeys(broker_names))[:MAX_GROUPS_PER_QUERY]
        if not names:
            groups = await self.list_groups()
        else:
            for name in names:
                rim.check_broker_name(name)
            loaded = [await self._load(name) for name in names]
            groups = [v for v in loaded if v is not None]
        result = []
        for versioned in groups:
            live = await self._live_of(versioned.state.broker_name)
            result.append(rim.group_replicas(versioned.state, live))
        return result

    async def list_groups(self) -> list[Versioned]:
        return await self._ask(self._store.list_groups())

    async def _load(self, broker_name: str) -> Versioned | None:
        return await self._ask(self._store.load_group(broker_name))

    async def _live_of(self, broker_name: str) -> dict[int, BrokerLiveInfo]:
        return await self._ask(self._store.live_brokers(broker_name))

    async def scan_inactive_masters(self) -> int:
        """One pass of the inactive-master scan: elect in every group whose master's lease expired (or that has
        no master while a replica lives). Returns the number of groups whose state changed."""
        changed = 0
        for versioned in await self.list_groups():
            group = versioned.state
            self.sync_state_set_sizes[group.broker_name] = len(group.sync_state_set)
            live = await self._live_of(group.broker_name)
            if group.master_broker_id in live or (not group.master_broker_id and not live):
                continue
            state = await self._transition(
                group.broker_name, lambda g, lv: rim.ensure_master(_known(g, ""), lv, self._config.unclean)
            )
            changed += state != group
        return changed


def _busy(exc: StateStoreUnavailableError) -> MQError:
    return MQError(f"controller state store unavailable: {exc}", ResponseCode.SYSTEM_BUSY)


def _known(group: GroupState | None, broker_name: str) -> GroupState:
    if group is None:
        raise MQError(f"broker group {broker_name!r} is unknown", ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST)
    return group
