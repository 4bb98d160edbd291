"""Broker-side queue locks of orderly consumers: per consumer group, which client owns which queue.

Mirrors org.apache.rocketmq.broker.client.rebalance.RebalanceLockManager (#tryLockBatch, #unlockBatch, LockEntry):
a lock is the client id and the time it was last taken or renewed; it expires REBALANCE_LOCK_MAX_LIVE_TIME_MS (60 s,
rocketmq.broker.rebalance.lockMaxLiveTime) after that, and then any client of the group may take it. An orderly
consumer renews its locks every 20 s (RebalanceImpl#lockAll) and consumes only queues it holds, so a queue is
consumed by one client at a time even while a rebalance moves it. In memory only (a restarted broker starts
empty; the clients take their queues again within one renewal). Event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue

log = get_logger("mq_broker.consumer.rebalance_lock")

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 60_000
"""RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME: a lock not renewed this long is free."""


@dataclass(slots=True)
class LockEntry:
    """RebalanceLockManager.LockEntry: the owner and when it last took or renewed the lock (ms since the epoch)."""

    client_id: str
    last_update_ms: int

    def is_expired(self, now_ms: int, max_live_ms: int) -> bool:
        return now_ms - self.last_update_ms > max_live_ms


class RebalanceLockManager:
    """``group -> {queue: LockEntry}`` (see the module docstring). ``clock_ms`` gives ms since the epoch."""

    def __init__(
        self,
        max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        assert max_live_ms > 0
        self.max_live_ms = max_live_ms
        self._clock_ms = clock_ms
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def try_lock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """RebalanceLockManager#tryLockBatch: the queues of ``queues`` that ``client_id`` holds afterwards: those it
        held (renewed), those nobody held, and those whose holder's lock expired (taken over, logged)."""
        now = self._clock_ms()
        locks = self._table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for queue in queues:
            entry = locks.get(queue)
            if entry is None:
                locks[queue] = LockEntry(client_id, now)
            elif entry.client_id == client_id or entry.is_expired(now, self.max_live_ms):
                if entry.client_id != client_id:
                    log.warning("rebalance_lock_taken_over", group=group, queue=str(queue),
                                old_client_id=entry.client_id, client_id=client_id)  # fmt: skip
                entry.client_id, entry.last_update_ms = client_id, now
            else:
                continue
            locked.add(queue)
        return locked

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        """RebalanceLockManager#unlockBatch: free the queues of ``queues`` that ``client_id`` holds; the others
        (held by another client, or by nobody) are left as they are."""
        locks = self._table.get(group)
        if locks is None:
            return
        for queue in queues:
            entry = locks.get(queue)
            if entry is not None and entry.client_id == client_id:
                del locks[queue]
        if not locks:
            del self._table[group]

    def holder(self, group: str, queue: MessageQueue) -> str:
        """The client id holding ``queue``'s live lock in ``group``, empty when nobody does."""
        entry = self._table.get(group, {}).get(queue)
        if entry is None or entry.is_expired(self._clock_ms(), self.max_live_ms):
            return ""
        return entry.client_id

    def locked_queues(self, group: str) -> dict[MessageQueue, str]:
        """The group's queues under a live lock -> their holder's client id (consumerProgress's locked queues)."""
        now = self._clock_ms()
        return {
            queue: entry.client_id
            for queue, entry in self._table.get(group, {}).items()
            if not entry.is_expired(now, self.max_live_ms)
        }
