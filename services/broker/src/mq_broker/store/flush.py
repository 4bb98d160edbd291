"""Flush services: the flusher threads that make the CommitLog (and the ConsumeQueues) durable.

Mirrors org.apache.rocketmq.store.CommitLog.{GroupCommitService, FlushRealTimeService} and
DefaultMessageStore.FlushConsumeQueueService, each on its own thread as in RocketMQ, so a group commit never
waits behind the ConsumeQueue/index/checkpoint msyncs. The checkpoint's dispatch offset still never runs ahead
of the flushed CommitLog: it is capped by the CommitLog's flushed position as read when the round starts.

SYNC_FLUSH (:class:`GroupCommitService`): a put that must wait registers ``(next offset, deadline, future)``
from the event loop; the flusher swaps the write/read request lists, msyncs once past the highest requested
offset and completes every waiter of the round with one ``loop.call_soon_threadsafe``. A waiter not completed
within ``sync_flush_timeout_ms`` gets FLUSH_DISK_TIMEOUT (its message stays stored): each round expires its overdue
waiters, and, should the flusher hang in an msync, each loop's one sweeper (a timer every ``EXPIRY_SWEEP_S`` while
waiters exist, instead of a timer per put) expires them at most that much late.

ASYNC_FLUSH (:class:`FlushRealTimeService`): every ``flush_interval_commit_log_ms`` msync when at least
``flush_commit_log_least_pages`` pages are dirty, everything every ``flush_commit_log_thorough_interval_ms``.

A failed msync is never retried: the service records the error, calls ``on_failure`` (the store turns
read-only) and answers every waiter, present and future, with SERVICE_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from mq_common.logging import get_logger

from mq_broker.store.commit_log import CommitLog
from mq_broker.store.config import MessageStoreConfig
from mq_broker.store.message import PutMessageStatus

SHUTDOWN_JOIN_TIMEOUT_S: Final = 60.0
EXPIRY_SWEEP_S: Final = 0.1

log = get_logger("mq_broker.store.flush")


@dataclass(slots=True)
class GroupCommitRequest:
    """One waiting put (or batch). Mirrors CommitLog.GroupCommitRequest. Created and completed on its loop."""

    next_offset: int
    deadline_monotonic_s: float
    future: asyncio.Future[PutMessageStatus]
    loop: asyncio.AbstractEventLoop


def _complete_all(items: list[tuple[GroupCommitRequest, PutMessageStatus]]) -> None:
    """Event loop: resolve the futures of one flush round (a waiter may already have timed out)."""
    for request, status in items:
        if not request.future.done():
            request.future.set_result(status)


class LoopExpiry:
    """The waiters of one event loop in deadline order and the loop's one sweeper timer. Loop thread only.

    A timer per put (``call_later`` + ``cancel``) cost a SYNC_FLUSH put ~4 us of CPU; here a put appends one
    tuple, and the sweeper drops answered waiters and answers overdue ones every EXPIRY_SWEEP_S with the status the
    waiter named (FLUSH_DISK_TIMEOUT for the group commit, FLUSH_SLAVE_TIMEOUT for the group transfer: both share
    the loop's one sweeper, see :func:`loop_expiry`).
    """

    __slots__ = ("loop", "timer", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: deque[tuple[float, asyncio.Future[PutMessageStatus], PutMessageStatus]] = deque()
        self.timer: asyncio.TimerHandle | None = None

    def add(
        self,
        deadline_monotonic_s: float,
        future: asyncio.Future[PutMessageStatus],
        timeout_status: PutMessageStatus = PutMessageStatus.FLUSH_DISK_TIMEOUT,
    ) -> None:
        """Answer ``future`` with ``timeout_status`` once past ``deadline_monotonic_s`` (deadlines are added in
        non-decreasing order: every waiter gets now + the same sync_flush_timeout_ms)."""
        self.waiting.append((deadline_monotonic_s, future, timeout_status))
        if self.timer is None:
            self.timer = self.loop.call_later(EXPIRY_SWEEP_S, self.sweep)

    def sweep(self) -> None:
        now = time.monotonic()
        waiting = self.waiting
        while waiting:
            deadline, future, timeout_status = waiting[0]
            if not future.done():
                if deadline > now:
                    break
                future.set_result(timeout_status)
            waiting.popleft()
        self.timer = self.loop.call_later(EXPIRY_SWEEP_S, self.sweep) if waiting else None


_EXPIRIES: dict[asyncio.AbstractEventLoop, LoopExpiry] = {}


def loop_expiry(loop: asyncio.AbstractEventLoop) -> LoopExpiry:
    """The one LoopExpiry (sweeper) of ``loop``, shared by every waiter kind of the process. Loop thread."""
    expiry = _EXPIRIES.get(loop)
    if expiry is None:  # a new loop: forget the closed ones
        for closed in [k for k in _EXPIRIES if k.is_closed()]:
            del _EXPIRIES[closed]
        expiry = _EXPIRIES[loop] = LoopExpiry(loop)
    return expiry


class FlushObserver(Protocol):
    """Told about flush rounds, on the flusher thread (broker metrics); must be quick."""

    def on_flush(self, elapsed_ms: float) -> None:
        """An msync round that wrote something took ``elapsed_ms``."""

    def on_flush_timeout(self, requests: int) -> None:
        """``requests`` group-commit requests were answered FLUSH_DISK_TIMEOUT."""


class FlushService(ABC):
    """The CommitLog flusher thread, plus a FlushConsumeQueueService thread that calls ``flush_logics(least_pages)``
    (ConsumeQueues + index + checkpoint, store-provided) every flush_interval_consume_queue_ms, so a group commit
    never waits behind those msyncs (RocketMQ runs them on their own thread too). ``on_failure(exc)`` is called
    when an msync fails, on the thread that met it.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        flush_logics: Callable[[int], None],
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self._flush_logics = flush_logics
        self._on_failure = on_failure
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run_guarded, name=type(self).__name__, daemon=True)
        self._logics_stopped = threading.Event()
        self._logics_thread = threading.Thread(
            target=self._run_logics_guarded, name="FlushConsumeQueueService", daemon=True
        )
        now = time.monotonic()
        self._last_logics_flush_s = now
        self._last_logics_thorough_s = now
        self.observer: FlushObserver | None = None
        self._page_cache_recycle = config.page_cache_recycle_enable

    def start(self) -> None:
        self._thread.start()
        self._logics_thread.start()

    def shutdown(self) -> None:
        """Stop both threads after a final flush of everything: the CommitLog first, then the logic queues and the
        checkpoint (blocking; call off the event loop if waiters exist)."""
        self._stopped.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(SHUTDOWN_JOIN_TIMEOUT_S)
        self._logics_stopped.set()
        if self._logics_thread.is_alive():
            self._logics_thread.join(SHUTDOWN_JOIN_TIMEOUT_S)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive() or self._logics_thread.is_alive()

    def _run_logics_guarded(self) -> None:
        """FlushConsumeQueueService#run: a round every flush_interval_consume_queue_ms, a forced one at the end."""
        interval_s = self.config.flush_interval_consume_queue_ms / 1000
        try:
            while not self._logics_stopped.wait(interval_s):
                self._maybe_flush_logics()
            self._maybe_flush_logics(force=True)
        except BaseException as exc:  # the thread must never die silently
            self._fail(exc)

    def _run_guarded(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # the thread must never die silently
            self._fail(exc)
            self._stopped.set()
            self._answer_pending()

    @abstractmethod
    def _answer_pending(self) -> None:
        """After the thread failed: answer whoever still waits."""

    @abstractmethod
    def run(self) -> None: ...

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = exc
            self._on_failure(exc)

    def _flush_commit_log(self, least_pages: int) -> None:
        if self.failed is not None:
            return
        mfq = self.commit_log.mapped_file_queue
        before, begin = mfq.flushed_where, time.perf_counter()
        try:
            mfq.flush(least_pages)
        except OSError as exc:
            self._fail(exc)
            return
        if self.observer is not None and mfq.flushed_where != before:
            self.observer.on_flush((time.perf_counter() - begin) * 1000.0)

    def _recycle_page_cache(self) -> None:
        """After a flush, once its waiters are answered: MappedFileQueue#drop_page_cache_behind with
        page_cache_keep_bytes when page_cache_recycle_enable. A failure is logged once and turns it off (the
        bytes are on disk either way)."""
        if not self._page_cache_recycle or self.failed is not None:
            return
        try:
            self.commit_log.mapped_file_queue.drop_page_cache_behind(self.config.page_cache_keep_bytes)
        except OSError as exc:
            self._page_cache_recycle = False
            log.warning("page_cache_recycle_off", error=str(exc))

    def _maybe_flush_logics(self, force: bool = False) -> None:
        """FlushConsumeQueueService#doFlush (its thread): every flush_interval_consume_queue_ms."""
        if self.failed is not None:
            return
        now = time.monotonic()
        cfg = self.config
        if not force and (now - self._last_logics_flush_s) * 1000 < cfg.flush_interval_consume_queue_ms:
            return
        self._last_logics_flush_s = now
        least_pages = cfg.flush_consume_queue_least_pages
        if force or (now - self._last_logics_thorough_s) * 1000 >= cfg.flush_consume_queue_thorough_interval_ms:
            self._last_logics_thorough_s = now
            least_pages = 0
        try:
            self._flush_logics(least_pages)
        except OSError as exc:
            self._fail(exc)


class GroupCommitService(FlushService):
    """SYNC_FLUSH: group commit of waiting puts (rounds nobody waits for flush at the ASYNC_FLUSH cadence). Mirrors
    CommitLog.GroupCommitService."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        flush_logics: Callable[[int], None],
        on_failure: Callable[[BaseException], None],
    ) -> None:
        super().__init__(config, commit_log, flush_logics, on_failure)
        self._lock = threading.Lock()
        self._requests_write: list[GroupCommitRequest] = []
        self._last_flush_s = time.monotonic()

    def put_request(self, next_offset: int) -> asyncio.Future[PutMessageStatus]:
        """Event loop: a future resolved once the CommitLog is flushed past ``next_offset``.

        Result: PUT_OK, FLUSH_DISK_TIMEOUT (after sync_flush_timeout_ms) or SERVICE_NOT_AVAILABLE (msync
        failed, or the service is stopped).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutMessageStatus] = loop.create_future()
        if self.failed is not None or self._stopped.is_set():
            future.set_result(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            return future
        if self.commit_log.mapped_file_queue.flushed_where >= next_offset:
            future.set_result(PutMessageStatus.PUT_OK)  # an earlier round already covered it
            return future
        deadline = time.monotonic() + self.config.sync_flush_timeout_ms / 1000
        request = GroupCommitRequest(next_offset, deadline, future, loop)
        loop_expiry(loop).add(deadline, future)
        with self._lock:
            self._requests_write.append(request)
        self._wake.set()
        return future

    def _answer_pending(self) -> None:
        with contextlib.suppress(Exception):
            self._do_commit(force=True)

    def _swap_requests(self) -> list[GroupCommitRequest]:
        with self._lock:
            requests, self._requests_write = self._requests_write, []
        return requests

    def _do_commit(self, *, force: bool = False) -> None:
        """One round: flush and answer the waiting puts. A round nobody waits for (a slave's replicated appends,
        puts that do not wait for the flush) flushes only every flush_interval_commit_log_ms, as ASYNC_FLUSH
        would: RocketMQ's GroupCommitService msyncs every 10 ms regardless, which no one needs (on a SYNC_FLUSH
        slave about 0.3-0.5 µs of CPU per replicated message, docs/performance.md). ``force``: flush anyway."""
        requests = self._swap_requests()
        if not requests:
            now = time.monotonic()
            if force or (now - self._last_flush_s) * 1000 >= self.config.flush_interval_commit_log_ms:
                self._last_flush_s = now
                self._flush_commit_log(0)
                self._recycle_page_cache()
            return
        self._last_flush_s = time.monotonic()
        self._flush_commit_log(0)
        flushed = self.commit_log.mapped_file_queue.flushed_where
        now = time.monotonic()
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[GroupCommitRequest, PutMessageStatus]]] = {}
        retry: list[GroupCommitRequest] = []
        for request in requests:
            if flushed >= request.next_offset:
                status = PutMessageStatus.PUT_OK
            elif self.failed is not None or self._stopped.is_set():
                status = PutMessageStatus.SERVICE_NOT_AVAILABLE
            elif now < request.deadline_monotonic_s:
                retry.append(request)  # not flushed that far yet: next round
                continue
            else:
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            by_loop.setdefault(request.loop, []).append((request, status))
        if retry:
            with self._lock:
                self._requests_write[:0] = retry
        timeouts = sum(1 for items in by_loop.values() for _, s in items if s is PutMessageStatus.FLUSH_DISK_TIMEOUT)
        if timeouts:
            log.warning("flush_disk_timeout", requests=timeouts, flushed_where=flushed)
            if self.observer is not None:
                self.observer.on_flush_timeout(timeouts)
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_complete_all, items)
        self._recycle_page_cache()

    def run(self) -> None:
        interval_s = self.config.group_commit_wait_interval_ms / 1000
        while not self._stopped.is_set():
            self._wake.wait(interval_s)
            self._wake.clear()
            self._do_commit()
        self._do_commit(force=True)


class FlushRealTimeService(FlushService):
    """ASYNC_FLUSH: periodic msync. Mirrors CommitLog.FlushRealTimeService (flushCommitLogTimed=true)."""

    def _answer_pending(self) -> None:
        return  # puts never wait in ASYNC_FLUSH

    def run(self) -> None:
        cfg = self.config
        interval_s = cfg.flush_interval_commit_log_ms / 1000
        last_thorough_s = time.monotonic()
        while not self._stopped.wait(interval_s):
            now = time.monotonic()
            least_pages = cfg.flush_commit_log_least_pages
            if (now - last_thorough_s) * 1000 >= cfg.flush_commit_log_thorough_interval_ms:
                last_thorough_s = now
                least_pages = 0
            self._flush_commit_log(least_pages)
            self._recycle_page_cache()
        self._flush_commit_log(0)
