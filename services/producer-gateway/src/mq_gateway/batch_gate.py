"""The request-coalescing rule of the gateway (batch on every hop, DESIGN.md), for any kind of item and key.

A :class:`BatchGate` keeps one open batch per key (e.g. a broker and what one broker request names):

- the open batch of an idle key goes out at the end of the current loop iteration (items arriving together
  merge, a lone item is not delayed);
- while a call for the key is in flight, new items wait and go out together when it returns, or ``linger_s``
  after the first of them arrived when that comes first (``linger_s`` None: no limit but the call's own
  deadline; 0: never wait for a call in flight);
- a batch goes out at once when its item count reaches ``max_count`` or its bytes ``max_bytes``; an item that
  would overflow the open batch sends it first (an item is never split; a larger one goes alone).

The gate only decides when; ``send(key, items)`` makes the call and answers each item's caller. Items whose caller
gave up (``gave_up(item)``) before their batch went out are left out. Used by mq_gateway.coalescer (the
send path's one batching stage) and mq_gateway.v2.consumer.ack_batcher. Runs on one asyncio loop (no locking).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass(slots=True)
class _Open(Generic[T]):
    items: list[T] = field(default_factory=list)
    count: int = 0
    size_bytes: int = 0
    scheduled: asyncio.Handle | None = None


class BatchGate(Generic[K, T]):
    """Open batches per key over ``send`` (see the module docstring). Raises ValueError for a bound < 1 or a
    negative ``linger_s``."""

    def __init__(
        self,
        send: Callable[[K, list[T]], Coroutine[object, object, None]],
        gave_up: Callable[[T], bool],
        *,
        max_count: int,
        max_bytes: int = sys.maxsize,
        linger_s: float | None = None,
    ) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError(f"max_count and max_bytes must be at least 1, got {max_count} and {max_bytes}")
        if linger_s is not None and linger_s < 0:
            raise ValueError(f"linger_s must not be negative, got {linger_s}")
        self._send = send
        self._gave_up = gave_up
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.linger_s = linger_s
        self._open: dict[K, _Open[T]] = {}
        self._busy: dict[K, int] = {}  # key -> calls in flight
        self._running: set[asyncio.Task[None]] = set()

    def busy(self, key: K) -> bool:
        """Whether a call for ``key`` is in flight."""
        return key in self._busy

    def add(
        self,
        key: K,
        item: T,
        count: int = 1,
        size_bytes: int = 0,
        *,
        max_count: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """Put ``item`` (``count`` entries, ``size_bytes``) in ``key``'s open batch; it goes out by the rule.
        ``max_count`` / ``max_bytes`` replace the gate's bounds for this key's kind (give the same ones for every
        item of a key)."""
        most = self.max_count if max_count is None else max_count
        most_bytes = self.max_bytes if max_bytes is None else max_bytes
        batch = self._open.get(key)
        if batch is not None and (batch.count + count > most or batch.size_bytes + size_bytes > most_bytes):
            self.release(key)
            batch = None
        if batch is None:
            batch = self._open[key] = _Open()
        batch.items.append(item)
        batch.count += count
        batch.size_bytes += size_bytes
        if batch.count >= most or batch.size_bytes >= most_bytes:
            self.release(key)
        elif batch.scheduled is None:
            loop = asyncio.get_running_loop()
            if key not in self._busy or self.linger_s == 0:
                batch.scheduled = loop.call_soon(self.release, key)
            elif self.linger_s is not None:
                batch.scheduled = loop.call_later(self.linger_s, self.release, key)

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
