"""The gateway's one batching stage: concurrent sends bound for one broker share one broker call.

A :class:`CoalescingBrokerTransport` wraps the gateway's real BrokerTransport (mq_client.broker_client.BrokerClient)
and satisfies the same protocol, so the producer core (validation, route, queue selection, MQFaultStrategy,
retries, hooks) stays above it and does not change: this stage sits below queue selection, on the way to one
broker. It keeps one :class:`mq_gateway.batch_gate.BatchGate` with two kinds of key:

- **a broker address** (RocketMQ SEND_MESSAGE requests): ``send_message`` and a small ``send_batch`` (fewer than
  ``max_batch_messages`` requests and fewer than ``max_batch_bytes`` bytes) join the broker's open batch as one
  unit; a unit is never split, so the messages of one core batch keep their order inside one broker call. A larger
  ``send_batch`` goes to the broker as it is. The broker's answers are split back per unit in request order.
- **a broker address + the header of a MessageBatch** (RocketMQ SEND_BATCH_MESSAGE, ``send_message_batch``): a
  MessageBatch whose ``message_count`` is known and whose queue is free (``queue_free``: no sharding key pins it)
  joins the open merged batch of its broker, topic and other header fields (below ``max_message_batch_messages``
  / ``max_message_batch_bytes``); its body is appended whole, so its messages stay together and in order. The
  merged call goes to the queue of its first MessageBatch (fault isolation is per broker, so any queue of the
  broker is the producer's choice as well). Message ``i`` of a part gets offset msg id ``start + i`` of the merged
  answer and queue offset ``queue_offset + start + i``; a refusal code goes to every part.

Both go out by the gate's rule: at the end of the current loop iteration when no call for that key is in flight
(an idle broker gets a lone message without delay; sends arriving together still merge); otherwise when the
in-flight call returns, ``linger_ms`` after the first item arrived at the latest, or at once when the batch is full
(an item that would overflow it closes it first). A transport failure (or a wrong number of answers) is raised to
every item of the call. An item whose caller gave up (its future was cancelled by the core's deadline) before the
batch went out is dropped, so it is not stored behind the caller's back. The broker call's timeout is the latest
deadline of its items (enforced here too, RPC_TIME_OUT to every item); each caller keeps its own deadline.

Bytes of a request = body + properties + topic. Runs on the gateway's one asyncio loop (no locking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
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
from mq_common.response_code import ResponseCode

from mq_gateway.batch_gate import BatchGate

MAX_LINGER_MS: Final = 2.0
# The codes with which the broker stored a MessageBatch (MQClientAPIImpl#processSendResponse's SendResult codes).
_STORED_CODES: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
# (broker address, producer group, topic, sys flag, properties, default topic, its queue count, born host)
_MergeKey = tuple[str, str, str, int, str, str, int, str]
_Key = str | _MergeKey


def request_size_bytes(request: SendMessageRequestHeader) -> int:
    """What one request counts against ``max_batch_bytes``."""
    return len(request.body) + len(request.properties) + len(request.topic)


@dataclass(slots=True)
class _Unit:
    """SEND_MESSAGE requests of one caller, answered together."""

    requests: Sequence[SendMessageRequestHeader]
    deadline_s: float
    future: asyncio.Future[list[SendMessageResponseHeader]]


@dataclass(slots=True)
class _Part:
    """One caller's MessageBatch of a merged SEND_BATCH_MESSAGE."""

    request: SendMessageBatchRequestHeader
    deadline_s: float
    future: asyncio.Future[SendMessageBatchResponseHeader]


_Item = _Unit | _Part


@dataclass(frozen=True, slots=True)
class CoalescerStats:
    """Counters since start: SEND_MESSAGE ``units`` and ``message_batches`` submitted, ``broker_calls`` made for
    them (both kinds, merged or not), ``messages`` carried by those calls."""

    units: int
    message_batches: int
    broker_calls: int
    messages: int


def _gave_up(item: _Item) -> bool:
    return item.future.done()


class CoalescingBrokerTransport:
    """A BrokerTransport that batches per broker (see the module docstring).

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
        if min(max_batch_bytes, max_batch_messages, max_message_batch_bytes, max_message_batch_messages) < 1:
            raise ValueError("the batch bounds must be at least 1")
        self.inner = inner
        self.linger_s = linger_ms / 1000.0
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_messages = max_batch_messages
        self.max_message_batch_bytes = max_message_batch_bytes
        self.max_message_batch_messages = max_message_batch_messages
        self._gate: BatchGate[_Key, _Item] = BatchGate(
            self._call, _gave_up, max_count=max_batch_messages, max_bytes=max_batch_bytes, linger_s=self.linger_s
        )
        self._units = 0
        self._message_batches = 0
        self._broker_calls = 0
        self._messages = 0

    @property
    def stats(self) -> CoalescerStats:
        return CoalescerStats(self._units, self._message_batches, self._broker_calls, self._messages)

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
            self._count_call(len(requests))
            return await self.inner.send_batch(addr, requests, timeout_ms)
        return await self._submit(addr, requests, size, timeout_ms)

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """A MessageBatch: merged with concurrent ones for the same broker, topic and header when it says its
        ``message_count`` and fits, else sent as it is. Returns its own part of the answer; raises the call's
        transport error (RemotingError, RemotingTimeoutError)."""
        self._message_batches += 1
        count = request.message_count
        if (
            not request.queue_free
            or count <= 0
            or count >= self.max_message_batch_messages
            or len(request.body) >= self.max_message_batch_bytes
        ):
            self._count_call(max(count, 1))
            return await self.inner.send_message_batch(addr, request, timeout_ms)
        loop = asyncio.get_running_loop()
        part = _Part(request, loop.time() + max(timeout_ms, 1) / 1000.0, loop.create_future())
        key: _MergeKey = (
            addr,
            request.producer_group,
            request.topic,
            request.sys_flag,
            request.properties,
            request.default_topic,
            request.default_topic_queue_nums,
            request.born_host,
        )
        self._gate.add(
            key,
            part,
            count,
            len(request.body),
            max_count=self.max_message_batch_messages,
            max_bytes=self.max_message_batch_bytes,
        )
        return await part.future

    def _submit(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], size: int, timeout_ms: int
    ) -> asyncio.Future[list[SendMessageResponseHeader]]:
        loop = asyncio.get_running_loop()
        unit = _Unit(requests, loop.time() + max(timeout_ms, 1) / 1000.0, loop.create_future())
        self._units += 1
        self._gate.add(addr, unit, len(requests), size)
        return unit.future

    def _count_call(self, messages: int) -> None:
        self._broker_calls += 1
        self._messages += messages

    async def _call(self, key: _Key, items: list[_Item]) -> None:
        """The gate's send: one broker call for ``items`` (all of one kind, as the key says)."""
        loop = asyncio.get_running_loop()
        timeout_ms = max(1, int((max(i.deadline_s for i in items) - loop.time()) * 1000))
        addr = key if isinstance(key, str) else key[0]
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                if isinstance(key, str):
                    await self._send_units(addr, [i for i in items if isinstance(i, _Unit)], timeout_ms)
                else:
                    await self._send_parts(addr, [i for i in items if isinstance(i, _Part)], timeout_ms)
        except TimeoutError:
            _fan_out(items, RemotingTimeoutError(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)"))
        except Exception as exc:
            _fan_out(items, exc)

    async def _send_units(self, addr: str, units: list[_Unit], timeout_ms: int) -> None:
        requests = [r for u in units for r in u.requests]
        self._count_call(len(requests))
        if len(requests) == 1:
            responses = [await self.inner.send_message(addr, requests[0], timeout_ms)]
        else:
            responses = await self.inner.send_batch(addr, requests, timeout_ms)
        if len(responses) != len(requests):
            raise RemotingError(f"{addr}: {len(responses)} responses for {len(requests)} sends")
        start = 0
        for u in units:
            end = start + len(u.requests)
            if not u.future.done():
                u.future.set_result(responses[start:end])
            start = end

    async def _send_parts(self, addr: str, parts: list[_Part], timeout_ms: int) -> None:
        first = parts[0].request
        count = sum(p.request.message_count for p in parts)
        merged = (
            first
            if len(parts) == 1
            else replace(first, body=b"".join(p.request.body for p in parts), message_count=count)
        )
        self._count_call(count)
        resp = await self.inner.send_message_batch(addr, merged, timeout_ms)
        if len(parts) == 1 or resp.code not in _STORED_CODES:
            for part in parts:
                _answer(part, resp)
            return
        offset_ids = resp.msg_id.split(",")
        if resp.message_count != count or len(offset_ids) != count:
            raise RemotingError(f"{addr}: a batch of {count} answered for {resp.message_count}")
        start = 0
        for part in parts:
            n = part.request.message_count
            ids = ",".join(offset_ids[start : start + n])
            _answer(part, replace(resp, msg_id=ids, queue_offset=resp.queue_offset + start, message_count=n))
            start += n

    async def close(self) -> None:
        """Send every open batch now and wait for all broker calls to finish."""
        await self._gate.close()


def _answer(part: _Part, resp: SendMessageBatchResponseHeader) -> None:
    if not part.future.done():
        part.future.set_result(resp)


def _fan_out(items: Sequence[_Item], exc: Exception) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(exc)
