"""GroupTransferService: a SYNC_MASTER put waits until ``in_sync_replicas`` copies hold it.

Mirrors org.apache.rocketmq.store.ha.GroupTransferService (with DefaultHAService#isSlaveOK and RocketMQ 5's
inSyncReplicas). The waiters share the group commit's structure: a put registers ``(next offset, future)`` and
the deadline goes to the loop's one sweeper (mq_broker.store.flush.loop_expiry), which answers an overdue waiter
FLUSH_SLAVE_TIMEOUT; there is no timer or sweep of its own. Unlike the group commit nothing here runs on a
thread: the slaves' acknowledged offsets arrive on the event loop (mq_broker.ha.HAConnection), so the waiters are
completed there, in offset order, as soon as enough slaves passed them.

Counting copies: the master's own copy counts one. A slave is *in sync* while it is connected and its acknowledged
offset is within ``ha_max_gap_not_in_sync_bytes`` of the master's max offset. With fewer in-sync copies than
``in_sync_replicas`` a put is answered SLAVE_NOT_AVAILABLE at once (the record stays stored on the master).

Controller mode (:meth:`GroupTransferService.set_sync_state_set`, RocketMQ's enableAutoInSyncReplicas): only the
slaves of the SyncStateSet count, and a put needs max(min_in_sync_replicas, min(in_sync_replicas, set size))
copies: a slave dropped from the set no longer holds the master back, and the controller only ever elects a member
of the set, which holds every acknowledged put. Event loop only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Final

from mq_broker.store.flush import loop_expiry
from mq_broker.store.message import PutMessageStatus

# Slaves one master tracks at most (HAService refuses more connections): bounds the table and the sort per ack.
MAX_SLAVES: Final = 16


class GroupTransferService:
    """Waiters for slave acknowledgements. ``in_sync_replicas`` counts the master; ``timeout_ms`` is
    sync_flush_timeout_ms (the same budget as the group commit)."""

    def __init__(
        self, in_sync_replicas: int, max_gap_bytes: int, timeout_ms: int, min_in_sync_replicas: int = 1
    ) -> None:
        assert 1 <= min_in_sync_replicas <= in_sync_replicas
        assert max_gap_bytes > 0
        assert timeout_ms > 0
        self.in_sync_replicas = in_sync_replicas
        self.max_gap_bytes = max_gap_bytes
        self.timeout_ms = timeout_ms
        self.min_in_sync_replicas = min_in_sync_replicas
        # Controller mode: the keys of the connected slaves in the SyncStateSet, and the set's size (the master and
        # members not connected included); None: static roles, every connected slave counts.
        self.sync_state_slaves: frozenset[str] | None = None
        self.sync_state_set_size = 1
        # slave key ("host:port" of its HA connection) -> acknowledged CommitLog offset
        self.acked_offsets: dict[str, int] = {}
        self._waiting: deque[tuple[int, asyncio.Future[PutMessageStatus]]] = deque()
        self._confirmed = 0

    # --- the slaves (HAConnection, event loop) -------------------------------------------------------------------

    def on_slave_ack(self, slave: str, acked_offset: int) -> None:
        """``slave`` holds the CommitLog up to ``acked_offset``: complete every waiter the copies now cover."""
        if slave not in self.acked_offsets and len(self.acked_offsets) >= MAX_SLAVES:
            return
        self.acked_offsets[slave] = acked_offset
        self._complete_covered()

    def set_sync_state_set(self, slaves: frozenset[str] | None, set_size: int = 1) -> None:
        """Controller mode: count only ``slaves`` (HA connection keys of SyncStateSet members) and need copies as
        the module docstring says for a set of ``set_size`` replicas (the master included); None goes back to
        static counting. Waiters the new rule covers are completed at once."""
        assert set_size >= 1
        self.sync_state_slaves = slaves
        self.sync_state_set_size = set_size
        self._complete_covered()

    def _complete_covered(self) -> None:
        self._confirmed = self._confirmed_offset()
        waiting = self._waiting
        while waiting and waiting[0][0] <= self._confirmed:
            _offset, future = waiting.popleft()
            if not future.done():
                future.set_result(PutMessageStatus.PUT_OK)

    def on_slave_gone(self, slave: str) -> None:
        """``slave``'s connection closed: it counts no more (its waiters wait for others, or time out)."""
        self.acked_offsets.pop(slave, None)
        self._complete_covered()

    def in_sync_slaves(self, master_max_offset: int) -> int:
        """Connected slaves within ha_max_gap_not_in_sync_bytes of ``master_max_offset``."""
        gap = self.max_gap_bytes
        return sum(1 for acked in self._counted_acks() if master_max_offset - acked < gap)

    def _counted_acks(self) -> list[int]:
        members = self.sync_state_slaves
        if members is None:
            return list(self.acked_offsets.values())
        return [acked for slave, acked in self.acked_offsets.items() if slave in members]

    def needed_copies(self) -> int:
        """Copies (the master's counted) a put needs now: in_sync_replicas, or in controller mode the rule of the
        module docstring."""
        if self.sync_state_slaves is None:
            return self.in_sync_replicas
        return max(self.min_in_sync_replicas, min(self.in_sync_replicas, self.sync_state_set_size))

    def _confirmed_offset(self) -> int:
        """The offset held by the needed copies: the (needed - 1)-th highest counted slave ack."""
        needed = self.needed_copies() - 1
        if needed == 0:
            return 1 << 62
        acked = sorted(self._counted_acks(), reverse=True)
        return acked[needed - 1] if len(acked) >= needed else -1

    # --- the puts (DefaultMessageStore, event loop) -----------------------------------------------------------------

    def put_request(self, next_offset: int, master_max_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future answered PUT_OK once in_sync_replicas copies hold the CommitLog up to ``next_offset``;
        SLAVE_NOT_AVAILABLE at once when too few slaves are in sync; FLUSH_SLAVE_TIMEOUT after timeout_ms."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        if 1 + self.in_sync_slaves(master_max_offset) < self.needed_copies():
            future.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)
        elif self._confirmed >= next_offset:
            future.set_result(PutMessageStatus.PUT_OK)
        else:
            self._drop_answered_head()
            self._waiting.append((next_offset, future))
            deadline = time.monotonic() + self.timeout_ms / 1000
            loop_expiry(loop).add(deadline, future, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
        return future

    def _drop_answered_head(self) -> None:
        """Forget waiters the sweeper already answered (timed out), so the deque stays bounded by live puts."""
        waiting = self._waiting
        while waiting and waiting[0][1].done():
            waiting.popleft()
