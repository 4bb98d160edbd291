"""SyncStateSetKeeper: a master's SyncStateSet in controller mode (who may be elected after it, so who must hold
every acknowledged put).

Mirrors the SyncStateSet half of org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAService (maybeExpandInSyncStateSet,
maybeShrinkSyncStateSet, setSyncStateSet) and ReplicasManager#doReportSyncStateSetChanged:

- expand: a slave (known by the broker id of its HA handshake) whose report reached the master's max offset joins
  the set *locally at once* (the GroupTransferService then waits for its acks too: nothing acknowledged from here on
  is missing on it, and everything before it already holds), then the controller is asked (AlterSyncStateSet);
- shrink: a member whose HA connection closed, or that has not held the master's max offset for
  ``ha_max_time_slave_not_catchup_ms``, leaves the set, locally only once the controller accepted (until then it may
  still be elected, so puts keep waiting for it);
- a refused change with a fencing code (CONTROLLER_FENCED_MASTER_EPOCH 2000, CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
  2001, CONTROLLER_INVALID_MASTER 2002) means this broker is no master any more: ``on_fenced`` runs.

One change is in flight at a time. Event loop only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol.controller import ReplicaInfo
from mq_common.response_code import ResponseCode
from mq_common.tasks import cancel_and_wait

from mq_broker.ha.ha_connection import HAConnection
from mq_broker.ha.ha_service import HAService

log = get_logger("mq_broker.ha.sync_state_set")

FENCING_CODES: Final = frozenset(
    {
        ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
        ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        ResponseCode.CONTROLLER_INVALID_MASTER,
    }
)
ALTER_TIMEOUT_MS: Final = 3_000


@dataclass(frozen=True, slots=True)
class GroupIdentity:
    """This broker in its group: the names AlterSyncStateSet needs and its controller-mode id (> 0)."""

    cluster_name: str
    broker_name: str
    broker_id: int


class SyncStateSetKeeper:
    """The set of one master term. ``not_catchup_ms``: ha_max_time_slave_not_catchup_ms; ``on_fenced`` runs
    (event loop) when the controller refuses a change with a fencing code."""

    def __init__(
        self,
        ha: HAService,
        client: ControllerClient,
        identity: GroupIdentity,
        *,
        not_catchup_ms: int,
        on_fenced: Callable[[], None],
    ) -> None:
        self.ha = ha
        self.client = client
        self.identity = identity
        self.not_catchup_ms = not_catchup_ms
        self.on_fenced = on_fenced
        self.master_epoch = -1
        self.confirmed: frozenset[int] = frozenset({identity.broker_id})
        self.set_epoch = 0
        self.pending_adds: set[int] = set()
        self._active = False
        self._task: asyncio.Task[None] | None = None
        self._again = False

    # --- term life ----------------------------------------------------------------------------------------------

    def begin_term(self, info: ReplicaInfo) -> None:
        """This broker became master with ``info`` (the controller's view at the election)."""
        self.master_epoch = info.master_epoch
        self.confirmed = info.sync_state_set | {self.identity.broker_id}
        self.set_epoch = info.sync_state_set_epoch
        self.pending_adds.clear()
        self._active = True
        self._apply_local()
        self.schedule()

    def end_term(self) -> None:
        """No master any more: forget the set (the GroupTransferService goes back to static counting)."""
        self._active = False
        self.pending_adds.clear()
        self.ha.store.group_transfer.set_sync_state_set(None)

    async def shutdown(self) -> None:
        self._active = False
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def on_controller_view(self, info: ReplicaInfo) -> None:
        """A heartbeat answer of the current term: adopt a newer set (e.g. after a change whose answer was lost)."""
        if not self._active or info.master_epoch != self.master_epoch or info.sync_state_set_epoch <= self.set_epoch:
            return
        self.confirmed = info.sync_state_set | {self.identity.broker_id}
        self.set_epoch = info.sync_state_set_epoch
        self.pending_adds -= self.confirmed
        self._apply_local()

    # --- HA connection events (HAService hooks) ---------------------------------------------------------------------

    def on_caught_up(self, connection: HAConnection) -> None:
        """A slave's report reached the master's max offset: it joins the set now (locally) and at the controller."""
        broker_id = connection.broker_id
        if not self._active or broker_id is None or broker_id in self.confirmed or broker_id in self.pending_adds:
            return
        self.pending_adds.add(broker_id)
        self._apply_local()
        log.info("sync_state_set_expanding", broker_id=broker_id, slave=connection.slave)
        self.schedule()

    def on_slave_closed(self, connection: HAConnection) -> None:
        if self._active and connection.broker_id is not None:
            self.pending_adds.discard(connection.broker_id)
            self._apply_local()
            self.schedule()

    # --- the set ----------------------------------------------------------------------------------------------------

    def effective(self) -> frozenset[int]:
        """The members puts wait for: the confirmed set plus the slaves joining it."""
        return self.confirmed | self.pending_adds

    def _connections_by_id(self) -> dict[int, HAConnection]:
        return {c.broker_id: c for c in list(self.ha.connections.values()) if c.broker_id is not None}

    def _apply_local(self) -> None:
        members = self.effective()
        keys = frozenset(c.slave for broker_id, c in self._connections_by_id().items() if broker_id in members)
        self.ha.store.group_transfer.set_sync_state_set(keys, len(members))

    def desired(self) -> frozenset[int]:
        """The set to ask for now: members stay while connected and caught up within not_catchup_ms."""
        now = time.monotonic()
        connections = self._connections_by_id()
        me = self.identity.broker_id
        keep = {me}
        for broker_id in self.effective() - {me}:
            connection = connections.get(broker_id)
            if connection is None:
                continue
            lagging_ms = (now - connection.last_caught_up_monotonic_s) * 1000
            if broker_id in self.pending_adds or lagging_ms < self.not_catchup_ms:
                keep.add(broker_id)
        return frozenset(keep)

    def schedule(self) -> None:
        """Check the set soon (one change in flight; a request meanwhile runs another round). Event loop."""
        if not self._active:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._sync_rounds(), name="sync-state-set")

    async def _sync_rounds(self) -> None:
        self._again = True
        while self._again and self._active:
            self._again = False
            try:
                await self._sync_once()
            except Exception as exc:  # never let the task die silently
                log.error("sync_state_set_round_failed", error=repr(exc))

    async def _sync_once(self) -> None:
        wanted = self.desired()
        if wanted == self.confirmed:
            return
        i = self.identity
        epoch = self.master_epoch
        try:
            result = await self.client.alter_sync_state_set(
                i.cluster_name, i.broker_name, i.broker_id, epoch, wanted, self.set_epoch, ALTER_TIMEOUT_MS
            )
        except MQError as exc:
            log.warning("sync_state_set_change_refused", wanted=sorted(wanted), code=exc.code, error=str(exc))
            if exc.code in FENCING_CODES and self._active and epoch == self.master_epoch:
                self.on_fenced()
            return
        if not self._active or epoch != self.master_epoch:
            return
        log.info("sync_state_set_changed", old=sorted(self.confirmed), new=sorted(result.sync_state_set),
                 sync_state_set_epoch=result.sync_state_set_epoch)  # fmt: skip
        self.confirmed = result.sync_state_set | {i.broker_id}
        self.set_epoch = result.sync_state_set_epoch
        self.pending_adds -= self.confirmed
        self.pending_adds &= wanted
        self._apply_local()
