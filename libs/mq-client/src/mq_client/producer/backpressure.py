"""In-flight limits of a producer by message count and body bytes (backpressure).

Mirrors DefaultMQProducerImpl's semaphoreAsyncSendNum / semaphoreAsyncSendSize (backPressureForAsyncSendNum,
backPressureForAsyncSendSize), applied here to every send mode: a send takes (messages, bytes) permits before
it starts and gives them back when it ends. Waiters are served first come, first served, so a large batch is
not starved by a stream of small sends. Runs on the producer's one asyncio loop (no locking).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from mq_client.producer.errors import FlowControlError


@dataclass(slots=True)
class _Waiter:
    messages: int
    size_bytes: int
    future: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass(frozen=True, slots=True)
class Permit:
    """What one admitted send holds until :meth:`InFlightLimiter.release` (amounts after clamping)."""

    messages: int
    size_bytes: int


class InFlightLimiter:
    """``max_messages`` / ``max_bytes`` in flight at once; 0 means that dimension is unlimited.

    A request larger than a limit is clamped to it (it runs once nothing else is in flight) so it can never
    wait forever.
    """

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.in_flight_messages = 0
        self.in_flight_bytes = 0
        self._waiters: deque[_Waiter] = deque()

    def _clamp(self, messages: int, size_bytes: int) -> Permit:
        m = min(messages, self.max_messages) if self.max_messages else 0
        b = min(size_bytes, self.max_bytes) if self.max_bytes else 0
        return Permit(m, b)

    def _fits(self, permit: Permit) -> bool:
        return (not self.max_messages or self.in_flight_messages + permit.messages <= self.max_messages) and (
            not self.max_bytes or self.in_flight_bytes + permit.size_bytes <= self.max_bytes
        )

    def _take(self, permit: Permit) -> None:
        self.in_flight_messages += permit.messages
        self.in_flight_bytes += permit.size_bytes

    async def acquire(self, messages: int, size_bytes: int, wait_ms: int) -> Permit:
        """Take permits for ``messages`` messages of ``size_bytes`` body bytes, waiting at most ``wait_ms``.

        Raises FlowControlError (215) when they did not free up in time (``wait_ms`` <= 0: no wait). A
        cancelled wait takes nothing."""
        permit = self._clamp(messages, size_bytes)
        if not self._waiters and self._fits(permit):
            self._take(permit)
            return permit
        if wait_ms <= 0:
            raise self._refused(permit, 0)
        waiter = _Waiter(permit.messages, permit.size_bytes)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait_ms / 1000.0):
                await waiter.future
        except BaseException as exc:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(permit)  # granted as the wait ended: give it back
            else:
                waiter.future.cancel()
                self._remove(waiter)
            if isinstance(exc, TimeoutError):
                raise self._refused(permit, wait_ms) from None
            raise
        return permit

    def release(self, permit: Permit) -> None:
        """Give ``permit`` back and admit the waiters at the head of the line that now fit."""
        self.in_flight_messages -= permit.messages
        self.in_flight_bytes -= permit.size_bytes
        assert self.in_flight_messages >= 0
        assert self.in_flight_bytes >= 0
        self._wake()

    @asynccontextmanager
    async def admit(self, messages: int, size_bytes: int, wait_ms: int) -> AsyncIterator[Permit]:
        """:meth:`acquire` ... :meth:`release` around a block."""
        permit = await self.acquire(messages, size_bytes, wait_ms)
        try:
            yield permit
        finally:
            self.release(permit)

    def _remove(self, waiter: _Waiter) -> None:
        with suppress(ValueError):
            self._waiters.remove(waiter)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            head = self._waiters[0]
            if head.future.done():
                self._waiters.popleft()
                continue
            permit = Permit(head.messages, head.size_bytes)
            if not self._fits(permit):
                return
            self._waiters.popleft()
            self._take(permit)
            head.future.set_result(None)

    def _refused(self, permit: Permit, wait_ms: int) -> FlowControlError:
        return FlowControlError(
            f"send refused by flow control: in flight {self.in_flight_messages}/{self.max_messages or 'unlimited'} "
            f"messages, {self.in_flight_bytes}/{self.max_bytes or 'unlimited'} bytes; "
            f"{permit.messages} message(s) of {permit.size_bytes} bytes waited {wait_ms} ms"
        )
