"""The request-coalescing rule of the gateway (batch on every hop, DESIGN.md), for any kind of item and key.

A :class:`BatchGate` keeps one open batch per key (e.g. a broker and what one broker request names):

- the open batch of an idle key goes out at the end of the current loop iteration (items arriving together
  merge, a lone item is not delayed);
- while a call for the key is in flight, new items wait and go out together when it returns;
- a batch goes out at once when its weight reaches ``max_weight``; an item that would overflow it sends it first
  (an item is never split; an item heavier than ``max_weight`` goes alone).

The gate only decides when; ``send(key, items)`` makes the call and answers each item's caller. Items whose caller
gave up (``gave_up(item)``) before their batch went out are left out. Runs on one asyncio loop (no locking).
mq_gateway.coalescer and mq_gateway.batch_merger follow the same rule with a linger of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(slots=True)
class _Open(Generic[T]):
    items: list[T] = field(default_factory=list)
    weight: int = 0
    scheduled: asyncio.Handle | None = None


class BatchGate(Generic[K, T]):
    """Open batches per key over ``send`` (see the module docstring). Raises ValueError for ``max_weight`` < 1."""

    def __init__(
        self,
        send: Callable[[K, list[T]], Coroutine[object, object, None]],
        gave_up: Callable[[T], bool],
        max_weight: int,
    ) -> None:
        if max_weight < 1:
            raise ValueError(f"max_weight must be at least 1, got {max_weight}")
        self._send = send
        self._gave_up = gave_up
        self.max_weight = max_weight
        self._open: dict[K, _Open[T]] = {}
        self._busy: dict[K, int] = {}  # key -> calls in flight
        self._running: set[asyncio.Task[None]] = set()

    def add(self, key: K, item: T, weight: int) -> None:
        """Put ``item`` (of ``weight``) in ``key``'s open batch; the batch goes out by the gate's rule."""
        batch = self._open.get(key)
        if batch is not None and batch.weight + weight > self.max_weight:
            self.release(key)
            batch = None
        if batch is None:
            batch = self._open[key] = _Open()
        batch.items.append(item)
        batch.weight += weight
        if batch.weight >= self.max_weight:
            self.release(key)
        elif batch.scheduled is None and key not in self._busy:
            batch.scheduled = asyncio.get_running_loop().call_soon(self.release, key)

    def release(self, key: K) -> None:
        """Send ``key``'s open batch now (nothing when there is none or every caller gave up)."""
        batch = self._open.pop(key, None)
        if batch is None:
            return
        if batch.scheduled is not None:
            batch.scheduled.cancel()
        items = [i for i in batch.items if not self._gave_up(i)]
        if not items:
            return
        self._busy[key] = self._busy.get(key, 0) + 1
        task = asyncio.get_running_loop().create_task(self._send(key, items))
        self._running.add(task)
        task.add_done_callback(lambda ended: self._returned(key, ended))

    def _returned(self, key: K, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        count = self._busy.pop(key, 1) - 1
        if count > 0:
            self._busy[key] = count
        if key in self._open:
            self.release(key)

    async def close(self) -> None:
        """Send every open batch now and wait for every call in flight."""
        for key in list(self._open):
            self.release(key)
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
