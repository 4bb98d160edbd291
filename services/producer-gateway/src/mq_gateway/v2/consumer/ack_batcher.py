"""Merges concurrent v2 acks bound for one broker, group and topic into one broker AckMessage call.

The SDKs ack one message per AckMessage, so a consumer draining a batch of 32 sends 32 acks at once; each would
cost the gateway a broker call of its own. An :class:`AckBatcher` keeps one open batch per
:class:`AckTarget` (broker address, broker name, consumer group, topic: what one broker AckMessageRequestHeader
names) and follows the gateway's coalescing rule (mq_gateway.batch_gate; batch on every hop, DESIGN.md):

- handles of an idle target go out at the end of the current loop iteration (acks arriving together merge, a lone
  ack is not delayed);
- while a call to the target is in flight, new handles wait and go out together when it returns;
- a batch goes out at once when it reaches ``max_handles`` (the broker's MAX_ACK_HANDLES, 1024); one caller's
  handles are never split over two calls;
- waiting is bounded by the in-flight call, itself bounded by ``timeout_ms`` (the broker call's deadline).

Each caller gets the broker's (code, remark) of its own handles, in order; a refused call (a transport error, a
request-level refusal) is raised to every caller of that call. A caller that gave up before its batch went out is
dropped: its handles are not acked behind its back (the messages come back after their invisible time). Runs on
the gateway's one asyncio loop (no locking). Extends org.apache.rocketmq.proxy.processor.ConsumerProcessor
#batchAckMessage (the proxy batches the entries of one AckMessage per broker) to concurrent AckMessages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from mq_common.errors import RemotingError
from mq_common.protocol import AckMessageRequestHeader, AckMessageResponseHeader

from mq_gateway.batch_gate import BatchGate

MAX_ACK_BATCH_HANDLES: Final = 1_024
"""Handles in one broker AckMessage (the broker's MAX_ACK_HANDLES)."""

AckCall = Callable[[str, AckMessageRequestHeader, int, str], Awaitable[AckMessageResponseHeader]]
"""PopBrokerCalls.ack_message's shape: (addr, header, timeout_ms, broker_name) -> the broker's answer."""
HandleResult = tuple[int, str]
"""The broker's (response code, remark) for one receipt handle."""


@dataclass(frozen=True, slots=True)
class AckTarget:
    """What one broker AckMessage names: the broker (address and name), the consumer group and the topic."""

    addr: str
    broker_name: str
    group: str
    topic: str


@dataclass(slots=True)
class _Waiter:
    handles: tuple[str, ...]
    future: asyncio.Future[list[HandleResult]]


def _gave_up(waiter: _Waiter) -> bool:
    return waiter.future.done()


@dataclass(frozen=True, slots=True)
class AckBatcherStats:
    """Counters since start: ``acks`` submitted, ``broker_calls`` made, ``handles`` they carried."""

    acks: int
    broker_calls: int
    handles: int


def split_answer(answer: AckMessageResponseHeader, count: int) -> list[HandleResult]:
    """One (code, remark) per handle of a call of ``count`` handles: the per-handle codes, else the answer's code
    for all. Raises RemotingError when the broker answered another number of codes."""
    if not answer.codes:
        return [(answer.code, answer.remark)] * count
    if len(answer.codes) != count:
        raise RemotingError(f"{len(answer.codes)} ack codes for {count} receipt handles")
    remarks = tuple(answer.remarks) + ("",) * (count - len(answer.remarks))
    return list(zip(answer.codes, remarks, strict=False))


class AckBatcher:
    """Coalesces acks per :class:`AckTarget` over ``call`` (see the module docstring), by the rule of
    mq_gateway.batch_gate. Raises ValueError for ``max_handles`` outside [1, MAX_ACK_BATCH_HANDLES]."""

    def __init__(self, call: AckCall, timeout_ms: int, max_handles: int = MAX_ACK_BATCH_HANDLES) -> None:
        if not 1 <= max_handles <= MAX_ACK_BATCH_HANDLES:
            raise ValueError(f"max_handles must be in [1, {MAX_ACK_BATCH_HANDLES}], got {max_handles}")
        self._call = call
        self._timeout_ms = timeout_ms
        self._gate: BatchGate[AckTarget, _Waiter] = BatchGate(self._run, _gave_up, max_count=max_handles)
        self._acks = 0
        self._broker_calls = 0
        self._handles = 0

    @property
    def stats(self) -> AckBatcherStats:
        return AckBatcherStats(self._acks, self._broker_calls, self._handles)

    def ack(self, target: AckTarget, handles: tuple[str, ...]) -> asyncio.Future[list[HandleResult]]:
        """The broker's (code, remark) per handle of ``handles`` (at most ``max_handles``), in order, once the
        call carrying them returns. The future raises what that call raised (MQError for a request-level refusal,
        transport errors). Raises ValueError for an empty or oversized ``handles``."""
        if not 1 <= len(handles) <= self._gate.max_count:
            raise ValueError(f"an ack carries 1 to {self._gate.max_count} handles, got {len(handles)}")
        waiter = _Waiter(handles, asyncio.get_running_loop().create_future())
        self._acks += 1
        self._gate.add(target, waiter, len(handles))
        return waiter.future

    async def _run(self, target: AckTarget, waiters: list[_Waiter]) -> None:
        handles = tuple(h for w in waiters for h in w.handles)
        header = AckMessageRequestHeader(consumer_group=target.group, topic=target.topic, receipt_handles=handles)
        self._broker_calls += 1
        self._handles += len(handles)
        try:
            answer = await self._call(target.addr, header, self._timeout_ms, target.broker_name)
            results = split_answer(answer, len(handles))
        except Exception as exc:
            for w in waiters:
                if not w.future.done():
                    w.future.set_exception(exc)
            return
        start = 0
        for w in waiters:
            end = start + len(w.handles)
            if not w.future.done():
                w.future.set_result(results[start:end])
            start = end

    async def close(self) -> None:
        """Send every open batch now and wait for every call under way."""
        await self._gate.close()
