"""Merges concurrent MessageBatches bound for one broker and topic into one SEND_BATCH_MESSAGE call.

Every SendBatch of the gateway is one MessageBatch (or a few chunks) for one queue; under load many are in flight
to the same broker at once, and each broker call costs about as much CPU (gRPC, both ends) as a hundred messages'
Python. :class:`MessageBatchMerger` (used by :class:`mq_gateway.coalescer.CoalescingBrokerTransport`) keeps one open
merged batch per (broker address, topic and the other request header fields):

- A MessageBatch whose ``message_count`` is known and whose queue is free (``queue_free``: no sharding key pins it)
  joins the open batch; its body is appended whole, so its messages stay together and in order. The merged call
  goes to the queue of its first MessageBatch (fault isolation is per broker, so any queue of the broker is the
  producer's choice as well). Each caller's answer carries the queue the broker really used.
- It goes out by mq_gateway.batch_gate's rule: at the end of the loop iteration when no merged call for that key
  is in flight; otherwise when the in-flight call returns, ``linger_s`` after its first batch arrived at the
  latest, or at once when it reaches ``max_bytes`` / ``max_messages``.
- The broker's answer is split back: message ``i`` of a part gets offset msg id number ``start + i`` of the merged
  answer and queue offset ``queue_offset + start + i``; an error code (the whole merged batch refused) or a transport
  failure goes to every part. A part whose caller gave up before the call went out is dropped.
- The call's timeout is the latest deadline of its parts; each caller keeps its own.

Runs on the gateway's one asyncio loop (no locking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final

from mq_common.errors import RemotingError, RemotingTimeoutError
from mq_common.protocol import SendMessageBatchRequestHeader, SendMessageBatchResponseHeader
from mq_common.response_code import ResponseCode

from mq_gateway.batch_gate import BatchGate

SendMessageBatch = Callable[[str, SendMessageBatchRequestHeader, int], Awaitable[SendMessageBatchResponseHeader]]
# The codes with which the broker stored the batch (MQClientAPIImpl#processSendResponse's SendResult codes).
_STORED_CODES: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
_MergeKey = tuple[str, str, str, int, str, str, int, str]


@dataclass(slots=True)
class _Part:
    request: SendMessageBatchRequestHeader
    deadline_s: float
    future: asyncio.Future[SendMessageBatchResponseHeader]


def _gave_up(part: _Part) -> bool:
    return part.future.done()


@dataclass(frozen=True, slots=True)
class MergerStats:
    """Counters since start: MessageBatches ``submitted``, ``broker_calls`` made for them."""

    submitted: int
    broker_calls: int


class MessageBatchMerger:
    """See the module docstring. ``send`` is the real transport's send_message_batch."""

    def __init__(self, send: SendMessageBatch, *, linger_s: float, max_bytes: int, max_messages: int) -> None:
        self._send = send
        self.linger_s = linger_s
        self.max_bytes = max_bytes
        self.max_messages = max_messages
        self._gate: BatchGate[_MergeKey, _Part] = BatchGate(
            self._call, _gave_up, max_count=max_messages, max_bytes=max_bytes, linger_s=linger_s
        )
        self._submitted = 0
        self._broker_calls = 0

    @property
    def stats(self) -> MergerStats:
        return MergerStats(self._submitted, self._broker_calls)

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """One MessageBatch; merged with others of the same key when it says its ``message_count`` and fits.
        Returns its own part of the answer; raises the call's transport error (RemotingError, RemotingTimeoutError)."""
        self._submitted += 1
        count = request.message_count
        if not request.queue_free or count <= 0 or count >= self.max_messages or len(request.body) >= self.max_bytes:
            self._broker_calls += 1
            return await self._send(addr, request, timeout_ms)
        return await self._submit(addr, request, timeout_ms)

    def _submit(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> asyncio.Future[SendMessageBatchResponseHeader]:
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
        self._gate.add(key, part, request.message_count, len(request.body))
        return part.future

    async def _call(self, key: _MergeKey, parts: list[_Part]) -> None:
        addr = key[0]
        loop = asyncio.get_running_loop()
        timeout_ms = max(1, int((max(p.deadline_s for p in parts) - loop.time()) * 1000))
        first = parts[0].request
        count = sum(p.request.message_count for p in parts)
        merged = (
            first
            if len(parts) == 1
            else replace(first, body=b"".join(p.request.body for p in parts), message_count=count)
        )
        self._broker_calls += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                resp = await self._send(addr, merged, timeout_ms)
        except TimeoutError:
            _fail(parts, RemotingTimeoutError(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)"))
            return
        except Exception as exc:
            _fail(parts, exc)
            return
        if len(parts) == 1:
            _answer(parts[0], resp)
            return
        if resp.code not in _STORED_CODES:
            for part in parts:
                _answer(part, resp)
            return
        offset_ids = resp.msg_id.split(",")
        if resp.message_count != count or len(offset_ids) != count:
            _fail(parts, RemotingError(f"{addr}: a batch of {count} answered for {resp.message_count}"))
            return
        start = 0
        for part in parts:
            n = part.request.message_count
            ids = ",".join(offset_ids[start : start + n])
            _answer(part, replace(resp, msg_id=ids, queue_offset=resp.queue_offset + start, message_count=n))
            start += n

    async def close(self) -> None:
        """Send every open merged batch now and wait for all calls to finish."""
        await self._gate.close()


def _answer(part: _Part, resp: SendMessageBatchResponseHeader) -> None:
    if not part.future.done():
        part.future.set_result(resp)


def _fail(parts: list[_Part], exc: Exception) -> None:
    for part in parts:
        if not part.future.done():
            part.future.set_exception(exc)
