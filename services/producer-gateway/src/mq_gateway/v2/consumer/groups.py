"""Subscription group configs as the brokers hold them, cached per (broker address, group) with a TTL.

The v2 consumer side reads a group's retryMaxTimes (dead letters past max attempts) and consumeMessageOrderly
(FIFO assignments, the consumer's settings). One miss fetches every group of that broker
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and caches them all, at most ``max_entries`` (least recently used dropped);
concurrent misses of one broker share one fetch. Runs on the gateway's asyncio loop. Mirrors the proxy's
org.apache.rocketmq.proxy.service.metadata.ClusterMetadataService#getSubscriptionGroupConfig (a TTL cache over
the brokers).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_common.protocol import SubscriptionGroupConfig


class SubscriptionGroupCache:
    """``(addr, group) -> SubscriptionGroupConfig | None`` (None: the broker has no such group), ``ttl_ms`` old at
    most."""

    def __init__(self, calls: ConsumerAdminCalls, *, ttl_ms: int, max_entries: int, timeout_ms: int) -> None:
        assert ttl_ms > 0
        assert max_entries > 0
        self._calls = calls
        self._ttl_s = ttl_ms / 1000.0
        self._max_entries = max_entries
        self._timeout_ms = timeout_ms
        self._entries: OrderedDict[tuple[str, str], tuple[float, SubscriptionGroupConfig | None]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[dict[str, SubscriptionGroupConfig]]] = {}

    async def get(self, addr: str, group: str) -> SubscriptionGroupConfig | None:
        """The config of ``group`` on the broker at ``addr`` (None when it has none). Raises what
        ConsumerAdminCalls.get_all_subscription_groups raises (MQError, transport errors)."""
        key = (addr, group)
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry[0] < self._ttl_s:
            self._entries.move_to_end(key)
            return entry[1]
        configs = await self._fetch(addr)
        now = time.monotonic()
        for name, config in configs.items():
            self._store((addr, name), now, config)
        found = configs.get(group)
        if found is None:
            self._store(key, now, None)
        return found

    async def _fetch(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        pending = self._pending.get(addr)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[dict[str, SubscriptionGroupConfig]] = asyncio.get_running_loop().create_future()
        self._pending[addr] = future
        try:
            configs = await self._calls.get_all_subscription_groups(addr, self._timeout_ms)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: waiters re-raise it
            raise
        finally:
            del self._pending[addr]
        result = {c.group_name: c for c in configs}
        future.set_result(result)
        return result

    def _store(self, key: tuple[str, str], now: float, config: SubscriptionGroupConfig | None) -> None:
        self._entries[key] = (now, config)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def peek(self, addr: str, group: str) -> SubscriptionGroupConfig | None:
        """The cached config of ``group`` on ``addr`` while fresh, else None; never fetches (a receive asks it
        before the broker may have auto-created the group, so a fetch would cache a missing group)."""
        entry = self._entries.get((addr, group))
        if entry is None or time.monotonic() - entry[0] >= self._ttl_s:
            return None
        return entry[1]

    def invalidate(self, addr: str, group: str) -> None:
        """Forget ``group``'s entry of ``addr``."""
        self._entries.pop((addr, group), None)
