"""The client side of mq.broker.v1.Broker/SendStream: one broker's sends over one long-lived call.

A unary call costs both ends a fixed amount of gRPC work (~0.5 ms of CPU each here); a frame on an open stream
costs the broker about half of that. :class:`BrokerSendStream` keeps one open SendStream call per broker
address and multiplexes sends over it, the way RocketMQ's remoting multiplexes requests over one Netty channel
by opaque id (here ``frame_id``):

- ``send`` stamps the frame (``frame_id``, the caller's request id, ``deadline_unix_ms``), queues it and waits
  for the answer with that id. One writer task writes queued frames in order (a gRPC stream takes one write at
  a time), skipping frames whose caller already gave up; one reader task hands each answer to its caller.
- Past ``timeout_ms`` the caller gets RemotingTimeoutError (RPC_TIME_OUT); the broker refuses the frame if it
  reads it after its deadline (SYSTEM_BUSY), so a late frame is not stored behind the caller's back.
- When the call fails or the broker ends it (shutdown), every waiting caller gets the transport error
  (RemotingError, RPC_SEND_TO_CHANNEL_FAILED; see mq_common.grpc_errors) and the next ``send`` opens a new
  call. Frames the broker had not answered were not stored, except those whose answer was lost in the
  failure itself (at-least-once, as for a unary call whose answer is lost).

Runs on the caller's asyncio loop (the loop of the channel).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import grpc
from mq.broker.v1 import broker_pb2
from mq_common.errors import MQError, RemotingError, RemotingTimeoutError
from mq_common.grpc_errors import transport_error
from mq_common.logging import get_logger
from mq_common.request_context import current_request_id

log = get_logger("mq_client.send_stream")

# () -> a new SendStream call on the broker's channel
OpenCall = Callable[[], Any]


class _Session:
    """One open SendStream call: its unanswered frames, the writer task and the reader task."""

    def __init__(self, call: Any, addr: str) -> None:
        self.call = call
        self.addr = addr
        self.pending: dict[int, asyncio.Future[broker_pb2.SendStreamResponse]] = {}
        self.outbox: deque[broker_pb2.SendStreamRequest] = deque()
        self.wake = asyncio.Event()
        self.failure: MQError | None = None
        loop = asyncio.get_running_loop()
        self.writer = loop.create_task(self._write())
        self.reader = loop.create_task(self._read())

    def submit(self, frame: broker_pb2.SendStreamRequest) -> asyncio.Future[broker_pb2.SendStreamResponse]:
        future: asyncio.Future[broker_pb2.SendStreamResponse] = asyncio.get_running_loop().create_future()
        self.pending[frame.frame_id] = future
        self.outbox.append(frame)
        self.wake.set()
        return future

    async def _write(self) -> None:
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                while self.outbox:
                    frame = self.outbox.popleft()
                    if frame.frame_id in self.pending:  # else its caller gave up: do not store it
                        await self.call.write(frame)
        except grpc.aio.AioRpcError as exc:
            self.fail(transport_error(exc, self.addr))
        except (grpc.aio.UsageError, grpc.aio.InternalError, RuntimeError) as exc:
            self.fail(RemotingError(f"connect to <{self.addr}> failed: send stream write: {exc}"))

    async def _read(self) -> None:
        try:
            async for answer in self.call:
                future = self.pending.pop(answer.frame_id, None)
                if future is not None and not future.done():
                    future.set_result(answer)
            self.fail(RemotingError(f"connect to <{self.addr}> failed: the broker ended the send stream"))
        except grpc.aio.AioRpcError as exc:
            self.fail(transport_error(exc, self.addr))

    def fail(self, error: MQError) -> None:
        """The call is over: every waiting caller gets ``error``; the tasks stop. Idempotent."""
        if self.failure is None:
            self.failure = error
            log.info("send_stream_closed", broker_addr=self.addr, error=str(error), unanswered=len(self.pending))
        for future in self.pending.values():
            if not future.done():
                future.set_exception(self.failure)
        self.pending.clear()
        self.outbox.clear()
        self.call.cancel()
        current = asyncio.current_task()
        for task in (self.writer, self.reader):
            if task is not current:
                task.cancel()

    async def close(self) -> None:
        self.fail(RemotingError(f"connect to <{self.addr}> failed: send stream closed"))
        await asyncio.gather(self.writer, self.reader, return_exceptions=True)


class BrokerSendStream:
    """One broker address's SendStream (see the module docstring). ``open_call`` makes a new call on the
    address's current channel."""

    def __init__(self, open_call: OpenCall, addr: str) -> None:
        self._open_call = open_call
        self._addr = addr
        self._session: _Session | None = None
        self._frame_ids = itertools.count(1)

    async def send(self, frame: broker_pb2.SendStreamRequest, timeout_ms: int) -> broker_pb2.SendStreamResponse:
        """Send one frame (``send`` set; the rest is stamped here) and wait for its answer.

        Raises RemotingTimeoutError (RPC_TIME_OUT) past ``timeout_ms``, RemotingError when the call fails or
        ends first. A frame-level refusal comes back as the answer's ``code``/``remark``, not raised."""
        session = self._session
        if session is None or session.failure is not None:
            session = self._session = _Session(self._open_call(), self._addr)
        frame.frame_id = next(self._frame_ids)
        frame.request_id = current_request_id()
        frame.deadline_unix_ms = int(time.time() * 1000) + max(timeout_ms, 1)
        future = session.submit(frame)
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000.0):
                return await future
        except TimeoutError:
            raise RemotingTimeoutError(
                f"wait response on the channel <{self._addr}> timeout, {timeout_ms}(ms)"
            ) from None
        finally:
            session.pending.pop(frame.frame_id, None)

    async def close(self) -> None:
        """End the open call (waiting callers get RemotingError); a later ``send`` opens a new one."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
