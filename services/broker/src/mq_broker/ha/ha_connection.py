"""HAConnection: the master's side of one slave's connection.

Mirrors org.apache.rocketmq.store.ha.DefaultHAConnection (ReadSocketService + WriteSocketService as two tasks
of the broker's event loop). The reader takes the slave's 8-byte max-offset reports: the first one says where
the transfer starts, every one is the slave's acknowledged offset (GroupTransferService#on_slave_ack, the lag
metrics). The writer pushes CommitLog frames from there on (mq_broker.ha.protocol), at most
``ha_transfer_batch_size_bytes`` each and never across a file, woken by every put (:meth:`wake`); an ASYNC_MASTER's
writer lingers ``ha_async_frame_linger_ms`` after a frame that took all there was, so that the next one gathers the
puts meanwhile; when idle it sends a heartbeat frame every ``ha_send_heartbeat_interval_ms``. Bytes in the page
cache go out with sendfile on a plain connection (mq_broker.ha.direct_send; RocketMQ's transferTo); under TLS they
are copied into a frame buffer first; bytes no longer in the page cache (a slave catching up on old files) are read
in a worker thread. Reports are read in bursts (the newest counts). A slave silent for
``ha_housekeeping_interval_ms`` is dropped.

Controller mode (``master_broker_id`` gives this master's id): a slave opens with the handshake of
mq_broker.ha.protocol; the master refuses a slave whose last epoch is newer than its own, answers with its epoch
history, remembers the slave's ``broker_id`` (the SyncStateSet names brokers by id) and then accepts as first report
only an offset at or below the consistent point of both histories (the slave truncated what lies past it). Each
report at the master's max offset tells ``on_caught_up`` (the SyncStateSet keeper).

Where an empty slave starts: the master's min offset, the oldest CommitLog file kept (RocketMQ starts it at the
last file; this keeps every message the master still has, at the price of a longer first catch-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Final

from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_log

from mq_broker.ha.direct_send import DirectFrameSender
from mq_broker.ha.protocol import (
    EPOCH_ENTRY,
    FRAME_HEADER,
    HANDSHAKE_ACCEPTED,
    HANDSHAKE_HEADER,
    HANDSHAKE_MARKER,
    HANDSHAKE_REFUSED,
    HANDSHAKE_TIMEOUT_S,
    REPORT,
    decode_entries,
    encode_answer,
)
from mq_broker.store.config import BrokerRole
from mq_broker.store.epoch_file import MAX_EPOCH_ENTRIES, EpochEntries, EpochFileError
from mq_broker.store.message_store import DefaultMessageStore

log = get_logger("mq_broker.ha")

REPORTS_READ_BYTES: Final = 64 * REPORT.size
"""Reports taken by one read at most (a burst beyond waits for the next read)."""
HOT_TAIL_BYTES: Final = 4 * 1024 * 1024
"""Bytes this close to the CommitLog's max offset were just written: the frame copies them on the event loop without
asking the page cache (mincore) first."""


class HAConnection:
    """One slave. ``slave`` names it (its peer ``host:port``); ``on_closed`` runs once when it ends."""

    def __init__(
        self,
        store: DefaultMessageStore,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        slave: str,
        on_closed: Callable[[HAConnection], None],
        *,
        master_broker_id: Callable[[], int | None] = lambda: None,
        on_caught_up: Callable[[HAConnection], None] | None = None,
    ) -> None:
        self.store = store
        self.slave = slave
        self._reader = reader
        self._writer = writer
        self._on_closed = on_closed
        self._master_broker_id = master_broker_id
        self._on_caught_up = on_caught_up
        # Controller mode: the slave's broker id (from its handshake) and the highest offset its first report may
        # name (the consistent point of both epoch histories); None for a static slave.
        self.broker_id: int | None = None
        self._max_first_report: int | None = None
        self._wake = asyncio.Event()
        self._started = asyncio.Event()
        # The slave's last reported (acknowledged) offset; -1 until the first report.
        self.acked_offset = -1
        self.next_transfer_offset = -1
        self.last_caught_up_monotonic_s = time.monotonic()
        # The end of the last frame that reached the master's max offset then, and when it was sent: a report of
        # it means the slave held all the master had at that time (AutoSwitchHAConnection's lastMasterMaxOffset).
        self._all_sent_offset = -1
        self._all_sent_monotonic_s = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        self._frame = bytearray()  # the frame buffer, reused while the transport takes each frame whole
        self._direct = DirectFrameSender(writer.transport)

    def wake(self) -> None:
        """New CommitLog bytes (a put): the writer sends them now. Event loop; cheap."""
        self._wake.set()

    def lag_bytes(self, master_max_offset: int) -> int:
        return max(0, master_max_offset - max(self.acked_offset, 0))

    def lag_seconds(self, master_max_offset: int) -> float:
        """0 while the slave holds everything; else the time since it last held all the master had (at its report,
        or at the send of the last frame that reached the max offset and that the slave has acknowledged)."""
        if self.acked_offset >= master_max_offset:
            return 0.0
        return time.monotonic() - self.last_caught_up_monotonic_s

    async def run(self) -> None:
        """Serve the slave until either side stops, the slave is silent too long, or :meth:`close`."""
        self._tasks = [asyncio.create_task(self._read_reports()), asyncio.create_task(self._transfer())]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self.close()

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            await cancel_and_log(task, log, "ha_connection_task_failed", slave=self.slave)
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._direct.close()
        self.store.group_transfer.on_slave_gone(self.slave)
        callback, self._on_closed = self._on_closed, lambda _c: None
        callback(self)

    async def _read_reports(self) -> None:
        """The first 8 bytes (a handshake's marker, or the first report) one read at a time; then every read takes
        all reports the socket holds and applies the newest (reports only grow): one wake-up for a burst. One
        deadline, pushed back at each read, drops a slave silent for ``ha_housekeeping_interval_ms``."""
        loop = asyncio.get_running_loop()
        housekeeping_s = self.store.config.ha_housekeeping_interval_ms / 1000
        reader = self._reader
        try:
            async with asyncio.timeout(housekeeping_s) as silence:
                while self.next_transfer_offset < 0:
                    value = REPORT.unpack(await reader.readexactly(REPORT.size))[0]
                    silence.reschedule(loop.time() + housekeeping_s)
                    if value == HANDSHAKE_MARKER and self.broker_id is None:
                        if not await self._handshake():
                            return
                    elif not self._on_report(value):
                        return
                pending = bytearray()
                while True:
                    chunk = await reader.read(REPORTS_READ_BYTES)
                    if not chunk:
                        raise asyncio.IncompleteReadError(bytes(pending), REPORT.size)
                    silence.reschedule(loop.time() + housekeeping_s)
                    pending += chunk
                    whole = len(pending) - len(pending) % REPORT.size
                    if whole:
                        newest = REPORT.unpack_from(pending, whole - REPORT.size)[0]
                        del pending[:whole]
                        if not self._on_report(newest):
                            return
        except (TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
            log.info("ha_slave_gone", slave=self.slave, reason=type(exc).__name__)

    async def _handshake(self) -> bool:
        """Controller mode's epoch exchange (mq_broker.ha.protocol); False refuses the slave (after answering)."""
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            head = await self._reader.readexactly(HANDSHAKE_HEADER.size)
        broker_id, slave_max, count = HANDSHAKE_HEADER.unpack(head)
        if not 0 <= count <= MAX_EPOCH_ENTRIES:
            log.error("ha_handshake_malformed", slave=self.slave, entries=count)
            return False
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
            body = await self._reader.readexactly(count * EPOCH_ENTRY.size)
        epoch_file = self.store.epoch_file
        master_id = self._master_broker_id()
        mine = epoch_file.wire_form()
        try:
            theirs = EpochEntries(decode_entries(body, count)).to_entries()
        except EpochFileError as exc:
            log.error("ha_handshake_malformed", slave=self.slave, error=str(exc))
            return False
        their_last = theirs[-1].epoch if theirs else -1
        refused = master_id is None or their_last > epoch_file.last_epoch()
        status = HANDSHAKE_REFUSED if refused else HANDSHAKE_ACCEPTED
        self._writer.write(encode_answer(status, master_id or 0, mine.entries))
        await self._writer.drain()
        if refused:
            log.warning("ha_slave_refused", slave=self.slave, slave_epoch=their_last, epoch=epoch_file.last_epoch(),
                        controller_mode=master_id is not None)  # fmt: skip
            return False
        point = epoch_file.find_consistent_point(theirs, slave_max)
        self.broker_id = broker_id
        self._max_first_report = max(point, 0)
        log.info("ha_slave_handshake", slave=self.slave, broker_id=broker_id, slave_max=slave_max, point=point)
        return True

    def _on_report(self, offset: int) -> bool:
        """A report: False closes the connection (a slave the master cannot serve)."""
        commit_log = self.store.commit_log
        master_max = commit_log.max_offset
        if self.next_transfer_offset < 0:
            start = offset if offset > 0 else commit_log.min_offset
            limit = self._max_first_report
            if limit is not None and offset > limit:
                log.error("ha_slave_not_truncated", slave=self.slave, slave_offset=offset, consistent_point=limit)
                return False
            if offset > master_max or (offset > 0 and offset < commit_log.min_offset):
                log.error("ha_slave_offset_unservable", slave=self.slave, slave_offset=offset, master_max=master_max,
                          master_min=commit_log.min_offset)  # fmt: skip
                return False
            self.next_transfer_offset = start
            self._started.set()
            log.info("ha_slave_connected", slave=self.slave, slave_offset=offset, transfer_from=start)
        self.acked_offset = offset
        if offset >= master_max:
            self.last_caught_up_monotonic_s = time.monotonic()
            if self._on_caught_up is not None:
                self._on_caught_up(self)
        elif 0 <= self._all_sent_offset <= offset:
            # Under steady puts a report never meets the max offset (it moved on meanwhile): the slave is caught up
            # as of the last frame that reached it (lag_seconds, the SyncStateSet's not_catchup_ms). Joining the
            # SyncStateSet (on_caught_up) still takes the max offset itself.
            self.last_caught_up_monotonic_s = max(self.last_caught_up_monotonic_s, self._all_sent_monotonic_s)
        self.store.group_transfer.on_slave_ack(self.slave, offset)
        return True

    async def _transfer(self) -> None:
        """The writer: frames back to back while each is full; after one that took all there was, an ASYNC_MASTER
        lingers ``ha_async_frame_linger_ms`` (the next frame gathers the puts meanwhile), a SYNC_MASTER goes on
        at once; with nothing to send it waits for a put (:meth:`wake`) or sends a heartbeat frame."""
        await self._started.wait()
        cfg = self.store.config
        heartbeat_s = cfg.ha_send_heartbeat_interval_ms / 1000
        linger_s = cfg.ha_async_frame_linger_ms / 1000
        try:
            while True:
                sent = await self._send_next(cfg.ha_transfer_batch_size_bytes)
                if sent == cfg.ha_transfer_batch_size_bytes:
                    continue
                if not sent:
                    self._wake.clear()
                    try:
                        async with asyncio.timeout(heartbeat_s):
                            await self._wake.wait()
                    except TimeoutError:
                        self._writer.write(FRAME_HEADER.pack(self.next_transfer_offset, 0))
                        await self._writer.drain()
                        continue
                if linger_s and self.store.broker_role is BrokerRole.ASYNC_MASTER:
                    await asyncio.sleep(linger_s)
        except OSError as exc:
            log.info("ha_slave_write_failed", slave=self.slave, error=str(exc))

    async def _send_next(self, max_bytes: int) -> int:
        """Send one data frame from next_transfer_offset; returns its size in bytes (0: nothing to send yet). Bytes
        in the page cache go out with sendfile on a plain connection (DirectFrameSender), what the socket does not
        take at once through the transport after them; otherwise (TLS, bytes queued, or a slave catching up on cold
        bytes, read in a worker thread) the bytes are copied once, from the mapped file into the frame buffer, and
        sent from there. A frame (or nothing) that reaches the max offset marks the point the slave is caught up
        at once it acknowledges it (RocketMQ's lastMasterMaxOffset / lastTransferTimeMs)."""
        commit_log = self.store.commit_log
        offset = self.next_transfer_offset
        size = commit_log.transfer_size(offset, max_bytes)
        max_offset = commit_log.max_offset
        if offset + size >= max_offset:
            self._all_sent_offset, self._all_sent_monotonic_s = offset + size, time.monotonic()
        if size == 0:
            return 0
        hot = max_offset - offset <= HOT_TAIL_BYTES or commit_log.is_in_page_cache(offset, size)
        source = commit_log.file_position(offset, size) if hot and self._direct.usable() else None
        if source is not None:
            header = FRAME_HEADER.pack(offset, size)
            header_sent, body_sent = self._direct.send(header, *source, size)
            if header_sent < len(header) or body_sent < size:
                await self._queue_rest(header[header_sent:], offset + body_sent, size - body_sent)
        else:
            await self._queue_rest(FRAME_HEADER.pack(offset, size), offset, size, in_thread=not hot)
        self.next_transfer_offset = offset + size
        await self._writer.drain()
        return size

    async def _queue_rest(self, header: bytes, offset: int, size: int, *, in_thread: bool = False) -> None:
        """Queue ``header`` and the ``size`` CommitLog bytes at ``offset`` on the transport, copied once into the
        frame buffer (in a worker thread when ``in_thread``: bytes not in the page cache)."""
        frame = self._frame_buffer(len(header) + size)
        frame[: len(header)] = header
        body = frame[len(header) :]
        if size:
            read_into = self.store.commit_log.read_into
            copied = await asyncio.to_thread(read_into, offset, body) if in_thread else read_into(offset, body)
            if not copied:
                raise OSError(f"commit log bytes at {offset} are gone (deleted meanwhile)")
        self._writer.write(frame)
        if self._writer.transport.get_write_buffer_size():
            self._frame = bytearray()  # the transport may hold on to the frame: the next one gets a new buffer

    def _frame_buffer(self, size: int) -> memoryview:
        """``size`` bytes of the frame buffer (allocated for the largest frame when there is none)."""
        if len(self._frame) < size:
            self._frame = bytearray(max(size, FRAME_HEADER.size + self.store.config.ha_transfer_batch_size_bytes))
        return memoryview(self._frame)[:size]
