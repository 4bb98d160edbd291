"""ReplicasManager: the broker side of controller mode (RocketMQ 5, RIP-44): heartbeat the controller, take the role
it gives, keep the master's lease and SyncStateSet.

Mirrors org.apache.rocketmq.broker.controller.ReplicasManager (sendHeartbeatToController, changeToMaster,
changeToSlave, the role-change checks) with AutoSwitchHAService#changeToMaster / #changeToSlave. The broker starts
read-only (SLAVE, no client writes) and heartbeats every ``controller_heartbeat_interval_ms`` with its id (> 0),
addresses, CommitLog max offset and last epoch. Each answer:

- MASTER at epoch E, and not master at E already: stop the HAClient, dispatch what it received (a partial record at
  the tail is cut off), append (E, max offset) to the epoch file (worker thread), start the SyncStateSet of the term,
  make the store the settings' master role (SYNC_MASTER or ASYNC_MASTER), then ``hooks.on_master`` (register as
  broker id 0 with state_version E, POP, read suggestions...). Every MASTER answer renews the lease
  (mq_broker.ha.lease: measured from when the heartbeat was *sent*).
- SLAVE with a master at E: follow it (HAClient with the handshake of mq_broker.ha.protocol, ``hooks.on_slave``);
  a master older than this broker's last epoch is not followed.
- no master (CONTROLLER_MASTER_NOT_AVAILABLE 2004) or no answer: nothing changes, but a master's lease runs out, so
  it stops acknowledging writes.

A refused SyncStateSet change with a fencing code revokes the lease and heartbeats at once. Event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol.controller import BrokerHeartbeat, ControllerRole, HeartbeatResult, ReplicaInfo
from mq_common.tasks import cancel_and_wait, wait_event

from mq_broker.ha.ha_service import HAService
from mq_broker.ha.lease import MasterLease
from mq_broker.ha.sync_state_set import GroupIdentity, SyncStateSetKeeper
from mq_broker.store.config import BrokerRole
from mq_broker.store.epoch_file import EpochFileError
from mq_broker.store.truncation import TruncateRefusedError

log = get_logger("mq_broker.ha.replicas_manager")

# Rounds of DefaultMessageStore#reput a new master runs to dispatch what it received (each is bounded in bytes).
MAX_DRAIN_ROUNDS: Final = 10_000


class RoleHooks(Protocol):
    """What the broker does around a role change (BrokerController implements it). Event loop."""

    async def on_master(self, epoch: int) -> None: ...

    async def on_slave(self, master_addr: str, epoch: int) -> None: ...


@dataclass(frozen=True, slots=True)
class ControllerModeConfig:
    """The settings ReplicasManager reads (BrokerSettings fields of the same names)."""

    identity: GroupIdentity
    master_role: BrokerRole
    heartbeat_interval_ms: int
    lease_ms: int
    not_catchup_ms: int

    def __post_init__(self) -> None:
        assert self.identity.broker_id > 0
        assert self.master_role is not BrokerRole.SLAVE
        assert 0 < self.heartbeat_interval_ms < self.lease_ms


class ReplicasManager:
    """Controller mode for one broker. ``addresses`` gives (broker address, HA address) now."""

    def __init__(
        self,
        config: ControllerModeConfig,
        ha: HAService,
        client: ControllerClient,
        hooks: RoleHooks,
        addresses: Callable[[], tuple[str, str]],
        lease: MasterLease | None = None,
    ) -> None:
        self.config = config
        self.ha = ha
        self.store = ha.store
        self.client = client
        self.hooks = hooks
        self.addresses = addresses
        self.lease = lease if lease is not None else MasterLease(config.lease_ms)
        self.keeper = SyncStateSetKeeper(
            ha, client, config.identity, not_catchup_ms=config.not_catchup_ms, on_fenced=self._on_fenced
        )
        self.role: ControllerRole | None = None
        self.master_epoch = -1
        self.master_broker_id = 0
        self.master_addr = ""
        self.heartbeats = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def is_master(self) -> bool:
        return self.role is ControllerRole.MASTER

    @property
    def registered_broker_id(self) -> int:
        """The id to register with the name servers: 0 (MixAll.MASTER_ID) while master, else this broker's."""
        return 0 if self.is_master else self.config.identity.broker_id

    async def start(self) -> None:
        """Read-only until the controller answers; hook the fence and the SyncStateSet keeper in; heartbeat."""
        self.store.broker_role = BrokerRole.SLAVE
        self.store.write_fence = self.lease.refusal
        self.ha.controller_broker_id = self.config.identity.broker_id
        self.ha.client.handshake_broker_id = self.config.identity.broker_id
        self.ha.on_caught_up = self.keeper.on_caught_up
        self.ha.on_slave_closed = self.keeper.on_slave_closed
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="replicas-manager")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.keeper.shutdown()
        self.lease.revoke()

    async def _run(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while True:
            try:
                await self.heartbeat_once()
            except Exception as exc:  # never let the loop die
                log.error("controller_heartbeat_round_failed", error=repr(exc))
            self._wake.clear()
            await wait_event(self._wake, interval_s)

    def _on_fenced(self) -> None:
        log.warning("master_fenced", epoch=self.master_epoch)
        self.lease.revoke()
        self._wake.set()

    def _heartbeat(self) -> BrokerHeartbeat:
        i = self.config.identity
        broker_addr, ha_addr = self.addresses()
        max_offset = self.store.commit_log.max_offset
        return BrokerHeartbeat(
            cluster_name=i.cluster_name,
            broker_name=i.broker_name,
            broker_id=i.broker_id,
            broker_addr=broker_addr,
            ha_server_addr=ha_addr,
            max_offset=max_offset,
            confirm_offset=max_offset,
            epoch=max(0, self.store.epoch_file.last_epoch()),
        )

    async def heartbeat_once(self) -> HeartbeatResult | None:
        """One heartbeat and its consequences; None when the controller did not answer (or had no master)."""
        sent_at_s = self.lease.now_s()
        try:
            result = await self.client.broker_heartbeat(self._heartbeat(), self.config.lease_ms)
        except MQError as exc:
            log.warning("controller_heartbeat_failed", code=exc.code, error=str(exc), master=self.is_master)
            return None
        self.heartbeats += 1
        info = result.replica_info
        if result.role is ControllerRole.MASTER and info.master_broker_id == self.config.identity.broker_id:
            switching = not (self.is_master and self.master_epoch == info.master_epoch)
            if switching and not await self._change_to_master(info):
                return result
            self.lease.renew(info.master_epoch, sent_at_s)
            self.keeper.on_controller_view(info)
            self.keeper.schedule()
        elif info.has_master:
            await self._follow(info)
        return result

    async def _change_to_master(self, info: ReplicaInfo) -> bool:
        """Become master at info.master_epoch; False (still read-only) when the store cannot be made ready."""
        epoch = info.master_epoch
        log.info("changing_to_master", epoch=epoch, max_offset=self.store.commit_log.max_offset)
        self.lease.revoke()
        self.ha.client.change_master(None)
        await self.ha.client.wait_idle()
        try:
            await self._drain_and_cut()
            await asyncio.to_thread(self.store.epoch_file.append, epoch, self.store.commit_log.max_offset)
        except (OSError, EpochFileError, TruncateRefusedError) as exc:
            log.error("change_to_master_failed", epoch=epoch, error=str(exc))
            return False
        self.keeper.begin_term(info)
        await self.ha.change_to_master(self.config.master_role)
        self.role, self.master_epoch = ControllerRole.MASTER, epoch
        self.master_broker_id, self.master_addr = info.master_broker_id, info.master_addr
        await self.hooks.on_master(epoch)
        log.info("changed_to_master", epoch=epoch, role=str(self.config.master_role),
                 sync_state_set=sorted(info.sync_state_set))  # fmt: skip
        return True

    async def _drain_and_cut(self) -> None:
        """Dispatch every replicated record; cut a partial record at the tail (the next put starts at a record)."""
        store = self.store
        for _ in range(MAX_DRAIN_ROUNDS):
            before = store.dispatched_offset
            if store.reput() == before:
                break
        if store.dispatched_offset < store.commit_log.max_offset:
            await asyncio.to_thread(store.truncate_files, store.dispatched_offset)

    async def _follow(self, info: ReplicaInfo) -> None:
        """Be a slave of info's master (unless it is older than this broker's last epoch, or followed already)."""
        last_epoch = self.store.epoch_file.last_epoch()
        if info.master_epoch < last_epoch:
            log.warning("master_epoch_older_than_ours", master_epoch=info.master_epoch, epoch=last_epoch)
            return
        if (
            self.role is ControllerRole.SLAVE
            and self.master_epoch == info.master_epoch
            and self.master_broker_id == info.master_broker_id
        ):
            return
        log.info("changing_to_slave", master_broker_id=info.master_broker_id, master_addr=info.master_addr,
                 epoch=info.master_epoch)  # fmt: skip
        self.lease.revoke()
        self.keeper.end_term()
        self.role, self.master_epoch = ControllerRole.SLAVE, info.master_epoch
        self.master_broker_id, self.master_addr = info.master_broker_id, info.master_addr
        await self.ha.change_to_slave(info.master_ha_addr or None)
        await self.hooks.on_slave(info.master_addr, info.master_epoch)
