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
Event loop only.
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

    def __init__(self, in_sync_replicas: int, max_gap_bytes: int, timeout_ms: int) -> None:
        assert in_sync_replicas >= 1
        assert max_gap_bytes > 0
        assert timeout_ms > 0
        self.in_sync_replicas = in_sync_replicas
        self.max_gap_bytes = max_gap_bytes
        self.timeout_ms = timeout_ms
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
        self._confirmed = self._confirmed_offset()
        waiting = self._waiting
        while waiting and waiting[0][0] <= self._confirmed:
            _offset, future = waiting.popleft()
            if not future.done():
                future.set_result(PutMessageStatus.PUT_OK)

    def on_slave_gone(self, slave: str) -> None:
        """``slave``'s connection closed: it counts no more (its waiters wait for others, or time out)."""
        self.acked_offsets.pop(slave, None)
        self._confirmed = self._confirmed_offset()

    def in_sync_slaves(self, master_max_offset: int) -> int:
        """Connected slaves within ha_max_gap_not_in_sync_bytes of ``master_max_offset``."""
        gap = self.max_gap_bytes
        return sum(1 for acked in self.acked_offsets.values() if master_max_offset - acked < gap)

    def _confirmed_offset(self) -> int:
        """The offset held by in_sync_replicas copies: the (in_sync_replicas - 1)-th highest slave ack."""
        needed = self.in_sync_replicas - 1
        if needed == 0:
            return 1 << 62
        acked = sorted(self.acked_offsets.values(), reverse=True)
        return acked[needed - 1] if len(acked) >= needed else -1

    # --- the puts (DefaultMessageStore, event loop) -----------------------------------------------------------------

    def put_request(self, next_offset: int, master_max_offset: int) -> asyncio.Future[PutMessageStatus]:
        """A future answered PUT_OK once in_sync_replicas copies hold the CommitLog up to ``next_offset``;
        SLAVE_NOT_AVAILABLE at once when too few slaves are in sync; FLUSH_SLAVE_TIMEOUT after timeout_ms."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        if 1 + self.in_sync_slaves(master_max_offset) < self.in_sync_replicas:
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
