"""An orderly consumer's broker-side queue locks: take or renew them on the queues' masters, free them.

Mirrors org.apache.rocketmq.client.impl.consumer.RebalanceImpl#lock / #lockAll / #unlock / #unlockAll (the calls
an orderly push consumer makes; lockAll runs every 20 s, the rebalance interval here) over MQClientAPIImpl
#lockBatchMQ / #unlockBatchMQ. Best effort: a broker that cannot be reached holds no lock for this client (its
queues are simply not consumed until a later round locks them). Runs on the consumer's asyncio loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue

from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = ["LOCK_BATCH_MAX_QUEUES", "QueueLocks"]

_log = get_logger("mq_client.consumer.queue_locks")

LOCK_BATCH_MAX_QUEUES: Final = 1_024
"""Queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ names at most (the broker's bound)."""


class QueueLocks:
    """Locks of one client of one group; ``master_addr`` finds a queue's master (raises MQError when it is
    unknown or away)."""

    def __init__(
        self,
        group: str,
        client_id: str,
        calls: ConsumerBrokerCalls,
        master_addr: Callable[[MessageQueue], Awaitable[str]],
    ) -> None:
        self._group = group
        self._client_id = client_id
        self._calls = calls
        self._master_addr = master_addr

    async def lock(self, queues: Iterable[MessageQueue]) -> set[MessageQueue]:
        """Take or renew the locks of ``queues``: the ones this client holds afterwards (RebalanceImpl#lockAll)."""
        locked: set[MessageQueue] = set()
        for addr, batch in await self._by_master(queues):
            try:
                locked |= await self._calls.lock_batch_mq(addr, self._group, self._client_id, batch)
            except MQError as exc:
                _log.warning("lock_batch_mq_failed", broker=addr, group=self._group, error=str(exc))
        return locked

    async def unlock(self, queues: Iterable[MessageQueue]) -> None:
        """Free this client's locks of ``queues`` (RebalanceImpl#unlockAll; failures are logged: the broker frees
        them when they expire)."""
        for addr, batch in await self._by_master(queues):
            try:
                await self._calls.unlock_batch_mq(addr, self._group, self._client_id, batch)
            except MQError as exc:
                _log.warning("unlock_batch_mq_failed", broker=addr, group=self._group, error=str(exc))

    async def _by_master(self, queues: Iterable[MessageQueue]) -> list[tuple[str, list[MessageQueue]]]:
        """(master address, at most LOCK_BATCH_MAX_QUEUES queues) batches; queues without a known master are left
        out (logged)."""
        by_addr: dict[str, list[MessageQueue]] = {}
        for mq in sorted(queues):
            try:
                addr = await self._master_addr(mq)
            except MQError as exc:
                _log.info("queue_lock_no_master", mq=str(mq), error=str(exc))
                continue
            by_addr.setdefault(addr, []).append(mq)
        return [
            (addr, mqs[i : i + LOCK_BATCH_MAX_QUEUES])
            for addr, mqs in by_addr.items()
            for i in range(0, len(mqs), LOCK_BATCH_MAX_QUEUES)
        ]
