"""A consumer group's offsets kept in memory and persisted on the brokers. Mirrors
org.apache.rocketmq.client.consumer.store.{RemoteBrokerOffsetStore, ReadOffsetType, ControllableOffset}.

An offset is the next queue offset to consume (what the broker's ConsumerOffsetManager stores). Runs on the
consumer's asyncio loop; not shared between loops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from enum import Enum
from typing import Final

from mq_common.errors import MQClientError, MQError
from mq_common.logging import get_logger
from mq_common.protocol import ConsumerQueueOffset, MessageQueue
from mq_common.response_code import ResponseCode

from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = [
    "MAX_OFFSET_TABLE_QUEUES",
    "OFFSET_NOT_FOUND",
    "OFFSET_STORE_ERROR",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]

_log = get_logger("mq_client.consumer.offset_store")

OFFSET_NOT_FOUND: Final = -1
"""read_offset's answer when neither memory nor the broker has an offset (a group never seen on that queue)."""
OFFSET_STORE_ERROR: Final = -2
"""read_offset's answer when the broker could not be asked (transport error, unknown broker, other codes)."""
MAX_OFFSET_TABLE_QUEUES: Final = 65_536
"""Bound of the in-memory table: queues a consumer holds offsets for at once (RocketMQ has no bound)."""
OFFSET_RPC_TIMEOUT_MS: Final = 5_000
"""RemoteBrokerOffsetStore's 1000 * 5 for updateConsumerOffset / queryConsumerOffset."""

BrokerAddrFinder = Callable[[MessageQueue], Awaitable[str]]
"""An address of ``mq``'s broker group (route lookup); raises MQError when there is none."""


class ReadOffsetType(Enum):
    """Where :meth:`RemoteBrokerOffsetStore.read_offset` looks. Mirrors ReadOffsetType."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class RemoteBrokerOffsetStore:
    """Offsets per MessageQueue in memory, read from and persisted to the queue's broker.

    ``find_broker_addr`` gives the master's address (offsets are committed to masters only: while a group's master
    is away it raises, the offsets stay in memory and go out with the first persist after it returns);
    ``find_read_addr`` (default: the same) where offsets are read, e.g. master first, else a slave, which has
    its master's offsets from SlaveSynchronize (RemoteBrokerOffsetStore#fetchConsumeOffsetFromBroker's fallback).
    Mirrors RemoteBrokerOffsetStore; persisting is batched: one UpdateConsumerOffsets RPC per broker per call.
    """

    def __init__(
        self,
        calls: ConsumerBrokerCalls,
        consumer_group: str,
        find_broker_addr: BrokerAddrFinder,
        *,
        rpc_timeout_ms: int = OFFSET_RPC_TIMEOUT_MS,
        find_read_addr: BrokerAddrFinder | None = None,
    ) -> None:
        self._calls = calls
        self.consumer_group = consumer_group
        self._find_broker_addr = find_broker_addr
        self._find_read_addr = find_read_addr or find_broker_addr
        self._rpc_timeout_ms = rpc_timeout_ms
        self._offsets: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set ``mq``'s offset in memory; with ``increase_only`` a smaller offset is ignored.

        Raises MQClientError (SYSTEM_ERROR) past MAX_OFFSET_TABLE_QUEUES queues."""
        old = self._offsets.get(mq)
        if old is None and len(self._offsets) >= MAX_OFFSET_TABLE_QUEUES:
            raise MQClientError(f"offset table full: {MAX_OFFSET_TABLE_QUEUES} queues", ResponseCode.SYSTEM_ERROR)
        if old is None or not increase_only or offset > old:
            self._offsets[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq``'s offset (the queue went to another consumer). Mirrors RemoteBrokerOffsetStore#removeOffset."""
        self._offsets.pop(mq, None)

    def offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the in-memory offsets, only ``topic``'s when given. Mirrors #cloneOffsetTable."""
        return {mq: o for mq, o in self._offsets.items() if topic is None or mq.topic == topic}

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """``mq``'s offset: from memory, from the broker (QueryConsumerOffset; the answer is kept in memory), or
        memory first then the broker. OFFSET_NOT_FOUND (-1) when there is none, OFFSET_STORE_ERROR (-2) when
        the broker could not answer. Never raises MQError. Mirrors RemoteBrokerOffsetStore#readOffset."""
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self._offsets.get(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return OFFSET_NOT_FOUND
        try:
            addr = await self._find_read_addr(mq)
            offset = await self._calls.query_consumer_offset(
                addr, self.consumer_group, mq.topic, mq.queue_id, timeout_ms=self._rpc_timeout_ms
            )
        except MQError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return OFFSET_NOT_FOUND
            _log.warning("fetch_consume_offset_failed", mq=str(mq), error=str(exc))
            return OFFSET_STORE_ERROR
        self.update_offset(mq, offset, increase_only=False)
        return offset

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None:
        """Send the offsets of ``mqs`` to their brokers (one RPC per broker) and forget the offsets of every
        other queue, as RocketMQ's persistAll does. Failures are logged, not raised (the next persist sends
        the offsets again). Mirrors RemoteBrokerOffsetStore#persistAll."""
        if not mqs:
            return
        keep = set(mqs)
        await self._persist({mq: o for mq, o in self._offsets.items() if mq in keep})
        for mq in [mq for mq in self._offsets if mq not in keep]:
            del self._offsets[mq]

    async def persist(self, mqs: Collection[MessageQueue]) -> None:
        """Send the offsets (if any) of ``mqs`` to their brokers, one RPC per broker, keeping every other offset;
        failures are logged. Mirrors RemoteBrokerOffsetStore#persist, for several queues at once."""
        await self._persist({mq: self._offsets[mq] for mq in mqs if mq in self._offsets})

    async def _persist(self, offsets: Mapping[MessageQueue, int]) -> None:
        by_broker: dict[str, list[tuple[MessageQueue, int]]] = {}
        for mq, offset in offsets.items():
            try:
                addr = await self._find_broker_addr(mq)
            except MQError as exc:
                _log.error("update_consume_offset_failed", mq=str(mq), error=str(exc))
                continue
            by_broker.setdefault(addr, []).append((mq, offset))
        for addr, entries in by_broker.items():
            await self._update_on_broker(addr, entries)

    async def _update_on_broker(self, addr: str, entries: list[tuple[MessageQueue, int]]) -> None:
        offsets = [ConsumerQueueOffset(self.consumer_group, mq.topic, mq.queue_id, o) for mq, o in entries]
        try:
            outcomes = await self._calls.update_consumer_offsets(addr, offsets, self._rpc_timeout_ms)
        except MQError as exc:
            _log.error("update_consume_offset_failed", broker=addr, queues=len(offsets), error=str(exc))
            return
        for (mq, offset), outcome in zip(entries, outcomes, strict=True):
            if outcome is not None:
                _log.error("update_consume_offset_refused", mq=str(mq), offset=offset, error=str(outcome))
