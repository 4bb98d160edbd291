"""Merges concurrent sends bound for one broker into one broker SendBatch call (request coalescing).

A :class:`CoalescingBrokerTransport` wraps the gateway's real BrokerTransport (mq_client.broker_client.BrokerClient)
and satisfies the same protocol, so the producer core (selection, fault isolation, retries, hooks — all per
message) does not change. Per broker address it keeps one open batch:

- ``send_message`` and a small ``send_batch`` (fewer than ``max_batch_messages`` requests and fewer than
  ``max_batch_bytes`` bytes) join the open batch as one unit; a unit is never split, so the messages of one
  core batch keep their order inside one broker call. A larger ``send_batch`` goes to the broker as it is.
- The open batch goes out at the end of the current loop iteration when no call to that broker is in flight
  (an idle broker gets a lone message without delay; sends arriving together still merge); otherwise when
  the in-flight call returns, ``linger_ms`` after its first unit arrived at the latest, or at once when it
  reaches ``max_batch_messages`` / ``max_batch_bytes`` (a unit that would overflow it closes it first).
- The broker's answers are split back per unit in request order; a transport failure (or a wrong number of
  answers) is raised to every unit of the call. A unit whose caller gave up (its future was cancelled by
  the core's deadline) before the batch went out is dropped, so it is not stored behind the caller's back.
- The broker call's timeout is the latest deadline of its units (enforced here too, RPC_TIME_OUT to every
  unit); each caller keeps its own deadline.

MessageBatches (send_message_batch) are merged by their own rules: :mod:`mq_gateway.batch_merger`.

Bytes of a request = body + properties + topic. Runs on the gateway's one asyncio loop (no locking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mq_client.producer.config import MAX_BROKER_BATCH_MESSAGES
from mq_client.producer.kernel import BrokerTransport
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES
from mq_common.errors import RemotingError, RemotingTimeoutError
from mq_common.protocol import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

from mq_gateway.batch_gate import BatchGate
from mq_gateway.batch_merger import MessageBatchMerger

MAX_LINGER_MS: Final = 2.0


def request_size_bytes(request: SendMessageRequestHeader) -> int:
    """What one request counts against ``max_batch_bytes``."""
    return len(request.body) + len(request.properties) + len(request.topic)


@dataclass(slots=True)
class _Unit:
    requests: Sequence[SendMessageRequestHeader]
    size_bytes: int
    deadline_s: float
    future: asyncio.Future[list[SendMessageResponseHeader]]


@dataclass(frozen=True, slots=True)
class CoalescerStats:
    """Counters since start: ``units`` submitted, ``broker_calls`` made, ``messages`` carried by them."""

    units: int
    broker_calls: int
    messages: int


def _gave_up(unit: _Unit) -> bool:
    return unit.future.done()


class CoalescingBrokerTransport:
    """A BrokerTransport that coalesces per broker address (see the module docstring).

    Raises ValueError for ``linger_ms`` outside [0, 2] or non-positive bounds.
    """

    def __init__(
        self,
        inner: BrokerTransport,
        *,
        linger_ms: float,
        max_batch_bytes: int,
        max_batch_messages: int,
        max_message_batch_bytes: int = MAX_MESSAGE_SIZE_BYTES,
        max_message_batch_messages: int = MAX_BROKER_BATCH_MESSAGES,
    ) -> None:
        if not 0 <= linger_ms <= MAX_LINGER_MS:
            raise ValueError(f"linger_ms must be in [0, {MAX_LINGER_MS}], got {linger_ms}")
        if max_batch_bytes < 1 or max_batch_messages < 1:
            raise ValueError("max_batch_bytes and max_batch_messages must be at least 1")
        self.inner = inner
        self.linger_s = linger_ms / 1000.0
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_messages = max_batch_messages
        self._gate: BatchGate[str, _Unit] = BatchGate(
            self._call,
            _gave_up,
            max_count=max_batch_messages,
            max_bytes=max_batch_bytes,
            linger_s=self.linger_s,
        )
        self._units = 0
        self._broker_calls = 0
        self._messages = 0
        self.merger = MessageBatchMerger(
            inner.send_message_batch,
            linger_s=self.linger_s,
            max_bytes=max_message_batch_bytes,
            max_messages=max_message_batch_messages,
        )

    @property
    def stats(self) -> CoalescerStats:
        return CoalescerStats(self._units, self._broker_calls, self._messages)

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        """One message; joins ``addr``'s open batch. Raises the broker call's transport error."""
        return (await self._submit(addr, (request,), request_size_bytes(request), timeout_ms))[0]

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        """Many messages, one answer each in order; joins the open batch when small, else goes straight out."""
        size = sum(request_size_bytes(r) for r in requests)
        if len(requests) >= self.max_batch_messages or size >= self.max_batch_bytes:
            self._broker_calls += 1
            self._messages += len(requests)
            return await self.inner.send_batch(addr, requests, timeout_ms)
        return await self._submit(addr, requests, size, timeout_ms)

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """A MessageBatch: merged with concurrent ones for the same broker and topic (mq_gateway.batch_merger).
        Not counted in :attr:`stats` (see ``merger.stats``)."""
        return await self.merger.send_message_batch(addr, request, timeout_ms)

    def _submit(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], size: int, timeout_ms: int
    ) -> asyncio.Future[list[SendMessageResponseHeader]]:
        loop = asyncio.get_running_loop()
        unit = _Unit(requests, size, loop.time() + max(timeout_ms, 1) / 1000.0, loop.create_future())
        self._units += 1
        self._gate.add(addr, unit, len(requests), size)
        return unit.future

    async def _call(self, addr: str, units: list[_Unit]) -> None:
        requests = [r for u in units for r in u.requests]
        timeout_ms = max(1, int((max(u.deadline_s for u in units) - asyncio.get_running_loop().time()) * 1000))
        self._broker_calls += 1
        self._messages += len(requests)
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                if len(requests) == 1:
                    responses = [await self.inner.send_message(addr, requests[0], timeout_ms)]
                else:
                    responses = await self.inner.send_batch(addr, requests, timeout_ms)
            if len(responses) != len(requests):
                raise RemotingError(f"{addr}: {len(responses)} responses for {len(requests)} sends")
        except TimeoutError:
            self._fan_out(
                units, RemotingTimeoutError(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)")
            )
            return
        except Exception as exc:
            self._fan_out(units, exc)
            return
        start = 0
        for u in units:
            end = start + len(u.requests)
            if not u.future.done():
                u.future.set_result(responses[start:end])
            start = end

    @staticmethod
    def _fan_out(units: list[_Unit], exc: Exception) -> None:
        for u in units:
            if not u.future.done():
                u.future.set_exception(exc)

    async def close(self) -> None:
        """Send every open batch now and wait for all broker calls to finish."""
        await self._gate.close()
        await self.merger.close()
