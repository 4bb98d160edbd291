"""Serving a send stream: frames read in order, each handled in its own task, answers written as they come.

A SendStream (mq.broker.v1) carries many independent sends over one long-lived call. For one stream a
:class:`SendStreamSessions` session:

- reads frames in arrival order and starts one task per frame at once, so the frame's store append happens in
  arrival order (a task runs up to its first await, the put, before the next frame's task starts) while the
  group-commit waits of many frames overlap;
- keeps at most ``max_frames_in_flight`` frames unanswered; past that it stops reading, so HTTP/2 flow control
  pushes back on the sender instead of memory growing;
- writes answers in completion order (each names its frame), and tells ``observe`` (method, code name, ms);
- ends when the caller half-closes and every read frame is answered, or, after :meth:`close` (broker
  shutdown), stops reading at once, answers what it read and ends (OK): frames not read were not stored.

Protocol-agnostic (the frame and answer types are the gRPC face's); runs on the broker's asyncio loop.
Mirrors nothing in RocketMQ (its remoting multiplexes requests over one Netty channel by opaque id; this is
that channel).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from mq_common.logging import get_logger
from mq_common.request_context import RpcObserver, response_code_name

log = get_logger("mq_broker.stream_sessions")

MAX_FRAMES_IN_FLIGHT: Final = 512

F = TypeVar("F")
A = TypeVar("A")

# (frame, peer "ip:port") -> (method label, what response_code_name reads, answer); never raises for a bad frame
FrameHandler = Callable[[F, str], Awaitable[tuple[str, object, A]]]
# (frame, what the handler raised) -> the answer to send instead (SYSTEM_ERROR)
FrameFailure = Callable[[F, Exception], A]


@dataclass(slots=True)
class _Stream(Generic[A]):
    """One stream's state: its peer, its answer queue (None ends it), its in-flight bound, its frame tasks."""

    peer: str
    answers: asyncio.Queue[A | None]
    room: asyncio.Semaphore
    frame_tasks: set[asyncio.Task[None]] = field(default_factory=set)


class SendStreamSessions(Generic[F, A]):
    """Serves every send stream of one broker (see the module docstring). ``failed`` answers a frame whose
    handler raised (a bug: handlers answer bad input themselves). Raises ValueError for a non-positive
    ``max_frames_in_flight``."""

    def __init__(
        self,
        handle: FrameHandler[F, A],
        failed: FrameFailure[F, A],
        observe: RpcObserver | None = None,
        max_frames_in_flight: int = MAX_FRAMES_IN_FLIGHT,
    ) -> None:
        if max_frames_in_flight < 1:
            raise ValueError(f"max_frames_in_flight must be at least 1, got {max_frames_in_flight}")
        self._handle = handle
        self._failed = failed
        self._observe = observe
        self._max_in_flight = max_frames_in_flight
        self._closing = asyncio.Event()
        self._frame_tasks: set[asyncio.Task[None]] = set()  # strong references until each frame is answered

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def close(self) -> None:
        """Every stream stops reading, answers what it read, and ends; later streams end at once."""
        self._closing.set()

    async def serve(self, frames: AsyncIterator[F], peer: str) -> AsyncIterator[A]:
        """The answers of one stream, in completion order. Ends as the module docstring says."""
        stream = _Stream[A](peer, asyncio.Queue(), asyncio.Semaphore(self._max_in_flight), set())
        pump = asyncio.get_running_loop().create_task(self._pump(frames, stream))
        try:
            while (answer := await stream.answers.get()) is not None:
                yield answer
        finally:
            pump.cancel()

    async def _pump(self, frames: AsyncIterator[F], stream: _Stream[A]) -> None:
        reader = asyncio.get_running_loop().create_task(self._read(frames, stream))
        closing = asyncio.get_running_loop().create_task(self._closing.wait())
        try:
            await asyncio.wait({reader, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            closing.cancel()
        if not reader.cancelled() and reader.done() and reader.exception() is not None:
            log.info("send_stream_read_failed", peer=stream.peer, error=str(reader.exception()))
        if stream.frame_tasks:
            await asyncio.wait(set(stream.frame_tasks))
        stream.answers.put_nowait(None)

    async def _read(self, frames: AsyncIterator[F], stream: _Stream[A]) -> None:
        loop = asyncio.get_running_loop()
        iterator = aiter(frames)
        while True:
            await stream.room.acquire()
            try:
                frame = await anext(iterator)
            except StopAsyncIteration:
                return
            if self._closing.is_set():
                return
            task = loop.create_task(self._answer(frame, stream))
            for tasks in (stream.frame_tasks, self._frame_tasks):
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    async def _answer(self, frame: F, stream: _Stream[A]) -> None:
        begin = time.perf_counter()
        try:
            method, outcome, answer = await self._handle(frame, stream.peer)
        except Exception as exc:
            log.exception("send_stream_frame_failed", peer=stream.peer)
            method, answer = "SendStream", self._failed(frame, exc)
            outcome = answer
        finally:
            stream.room.release()
        stream.answers.put_nowait(answer)
        if self._observe is not None:
            self._observe(method, response_code_name(outcome), (time.perf_counter() - begin) * 1000.0)
