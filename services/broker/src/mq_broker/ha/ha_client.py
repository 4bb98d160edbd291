"""HAClient: a slave's connection to its master's HA port.

Mirrors org.apache.rocketmq.store.ha.DefaultHAClient. Connects to the master's HA address (TLS when configured),
reports the CommitLog max offset at once, then receives frames (mq_broker.ha.protocol) straight into a reusable
buffer (an asyncio BufferedProtocol: no per-frame allocation, the fastest receiver measured) and appends each at
the same offset (DefaultMessageStore#append_replicated, which also dispatches the ConsumeQueue and index entries),
reporting the new max offset after every frame and every ``ha_send_heartbeat_interval_ms`` when idle. While the
store is DISK_FULL (its clean service's flag) the slave takes no frame: a frame arriving then closes the connection,
and no new one is opened until the flag clears (checked every DISK_FULL_RECHECK_S), so the master sees the slave
gone (it leaves the SyncStateSet) instead of a slave that acknowledges bytes it could not keep. A frame at
another offset than the slave's max, or a master silent for ``ha_housekeeping_interval_ms``, closes the connection;
a lost connection is retried with a doubling backoff (RECONNECT_FIRST_DELAY_S .. RECONNECT_MAX_DELAY_S). Runs on
the broker's event loop; the slave's own flush service makes the bytes durable per its flush_disk_type.

Controller mode (``handshake_broker_id`` set): each connection opens with the handshake of mq_broker.ha.protocol.
With the master's epoch history the slave computes the consistent point (EpochFileCache#find_consistent_point;
AutoSwitchHAClient#truncateInvalidMsg); if it holds bytes past it (a returning old master's un-replicated tail) it
closes the connection, cuts its store there (DefaultMessageStore#truncate_files, in a worker thread) and connects
again. With no common epoch (-1) it cuts everything it holds (to its min offset) and catches up from the master's
oldest file: simpler than guessing a common prefix, and safe because the master's copy wins. Only then does it send
the first report and take frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_wait, wait_event

from mq_broker.ha.protocol import (
    ANSWER_HEADER,
    CONNECT_TIMEOUT_S,
    EPOCH_ENTRY,
    FRAME_HEADER,
    HANDSHAKE_ACCEPTED,
    HANDSHAKE_TIMEOUT_S,
    MAX_FRAME_BYTES,
    RECONNECT_FIRST_DELAY_S,
    RECONNECT_MAX_DELAY_S,
    REPORT,
    decode_entries,
    encode_handshake,
    split_ha_addr,
)
from mq_broker.ha.tls import HaTls
from mq_broker.store.epoch_file import MAX_EPOCH_ENTRIES, EpochEntries, EpochFileError
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.store.truncation import TruncateRefusedError

log = get_logger("mq_broker.ha")

DISK_FULL_RECHECK_S: Final = 1.0
"""While the store is DISK_FULL the client stays disconnected and looks at the flag again this often."""


class _ReplicaProtocol(asyncio.BufferedProtocol):
    """Frames into one buffer: the 12-byte header, then the body; each body goes to the store on arrival."""

    def __init__(
        self, store: DefaultMessageStore, lost: asyncio.Future[None], handshake_broker_id: int | None = None
    ) -> None:
        self.store = store
        self.lost = lost
        self.handshake_broker_id = handshake_broker_id
        # Controller mode: the master's answer (status, master broker id, its epoch history); the client awaits it.
        self.answer: asyncio.Future[tuple[int, int, EpochEntries]] = lost.get_loop().create_future()
        self._answer_count = -1
        self.awaiting_start = False
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray(FRAME_HEADER.size + store.config.ha_transfer_batch_size_bytes)
        self.view = memoryview(self.buffer)
        self.filled = 0
        self.wanted = FRAME_HEADER.size
        self.frame_offset = -1
        self.last_read_monotonic_s = time.monotonic()
        self.last_report_monotonic_s = 0.0
        self.frames = 0
        if handshake_broker_id is not None:
            self.wanted = ANSWER_HEADER.size

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        broker_id = self.handshake_broker_id
        if broker_id is None:
            self.report()
            return
        mine = self.store.epoch_file.wire_form()
        transport.write(encode_handshake(broker_id, self.store.commit_log.max_offset, mine.entries))

    def start_replication(self) -> None:
        """After an accepted handshake: take frames from now on and send the first report."""
        self.handshake_broker_id = None
        self.awaiting_start = False
        self.filled, self.wanted, self.frame_offset = 0, FRAME_HEADER.size, -1
        self.report()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def report(self) -> None:
        """Tell the master the CommitLog max offset (what this slave holds)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(REPORT.pack(self.store.commit_log.max_offset))
            self.last_report_monotonic_s = time.monotonic()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.filled : self.wanted]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        self.last_read_monotonic_s = time.monotonic()
        if self.filled < self.wanted:
            return
        if self.awaiting_start:
            self._close("data from the master before the first report")
        elif self.handshake_broker_id is not None:
            self._on_answer()
        elif self.frame_offset < 0:
            self._on_header()
        else:
            self._on_body()

    def _on_answer(self) -> None:
        """The master's handshake answer: its header, then its entries (the buffer grows when they need it)."""
        if self._answer_count < 0:
            _status, _master, count = ANSWER_HEADER.unpack_from(self.buffer, 0)
            if not 0 <= count <= MAX_EPOCH_ENTRIES:
                self._close(f"handshake answer with {count} epoch entries")
                return
            self._answer_count = count
            self.wanted = ANSWER_HEADER.size + count * EPOCH_ENTRY.size
            if self.wanted > len(self.buffer):
                grown = bytearray(self.wanted)
                grown[: ANSWER_HEADER.size] = self.buffer[: ANSWER_HEADER.size]
                self.buffer, self.view = grown, memoryview(grown)
            if self.filled < self.wanted:
                return
        status, master_id, count = ANSWER_HEADER.unpack_from(self.buffer, 0)
        entries = decode_entries(self.view[ANSWER_HEADER.size : self.wanted], count)
        self.filled, self.wanted = 0, FRAME_HEADER.size
        self.awaiting_start = True  # no frame may come before the first report: one would be a protocol error
        if not self.answer.done():
            self.answer.set_result((status, master_id, EpochEntries(entries)))

    def _on_header(self) -> None:
        offset, size = FRAME_HEADER.unpack_from(self.buffer, 0)
        if size == 0:  # heartbeat
            self.filled = 0
            return
        if not 0 < size <= MAX_FRAME_BYTES:
            self._close(f"frame of {size} bytes")
            return
        if FRAME_HEADER.size + size > len(self.buffer):
            self.buffer = bytearray(FRAME_HEADER.size + size)
            self.buffer[: FRAME_HEADER.size] = FRAME_HEADER.pack(offset, size)
            self.view = memoryview(self.buffer)
        self.frame_offset = offset
        self.wanted = FRAME_HEADER.size + size

    def _on_body(self) -> None:
        offset = self.frame_offset
        body = self.view[FRAME_HEADER.size : self.wanted]
        self.frame_offset, self.filled, self.wanted = -1, 0, FRAME_HEADER.size
        if self.store.clean_service.disk_full:
            log.warning("ha_client_disk_full", offset=offset, disk_util=self.store.clean_service.disk_util())
            if self.transport is not None:
                self.transport.close()
            return
        if not self.store.append_replicated(offset, body, dispatch=False):
            self._close(f"frame at {offset} does not follow the slave's max offset {self.store.commit_log.max_offset}")
            return
        self.frames += 1
        self.report()  # acknowledge first (a SYNC_MASTER put waits for it), then parse the records
        self.store.reput()

    def _close(self, reason: str) -> None:
        log.error("ha_client_protocol_error", reason=reason)
        if self.transport is not None:
            self.transport.close()


class HAClient:
    """The slave's replication loop. ``change_master`` points it at a master's HA address (None: idle)."""

    def __init__(self, store: DefaultMessageStore, tls: HaTls | None = None) -> None:
        self.store = store
        self.tls = tls
        self.master_ha_addr: str | None = None
        self.connected = False
        self.connects = 0
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._protocol: _ReplicaProtocol | None = None
        # Controller mode (mq_broker.ha.replicas_manager): this broker's id, sent in the handshake; None: static.
        self.handshake_broker_id: int | None = None
        self.truncations = 0
        self.paused_for_disk_full = False

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ha-client")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._drop_connection()

    def change_master(self, ha_addr: str | None) -> None:
        """Replicate from ``ha_addr`` (``host:port``) from now on; None stops replicating. A new address drops
        the current connection. Mirrors DefaultHAClient#updateHaMasterAddress. Event loop."""
        if ha_addr == self.master_ha_addr:
            return
        log.info("ha_client_master_changed", old=self.master_ha_addr, new=ha_addr)
        self.master_ha_addr = ha_addr
        self._drop_connection()
        self._changed.set()

    async def wait_idle(self) -> None:
        """Until no connection is open (after change_master(None))."""
        await self._idle.wait()

    def _drop_connection(self) -> None:
        protocol = self._protocol
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()

    async def _run(self) -> None:
        delay_s = RECONNECT_FIRST_DELAY_S
        while True:
            addr = self.master_ha_addr
            if addr is None:
                self._changed.clear()
                await self._changed.wait()
                continue
            if self.store.clean_service.disk_full:  # take no bytes it cannot keep: away until space returns
                await self._wait_disk_space()
                continue
            served = await self._connect_and_serve(addr)
            delay_s = RECONNECT_FIRST_DELAY_S if served else min(delay_s * 2, RECONNECT_MAX_DELAY_S)
            self._changed.clear()
            await wait_event(self._changed, delay_s)

    async def _wait_disk_space(self) -> None:
        """DISK_FULL (the clean service's flag): wait DISK_FULL_RECHECK_S (or a master change) before looking again."""
        if not self.paused_for_disk_full:
            log.warning("ha_client_paused_disk_full", disk_util=self.store.clean_service.disk_util())
        self.paused_for_disk_full = True
        self._changed.clear()
        await wait_event(self._changed, DISK_FULL_RECHECK_S)
        if not self.store.clean_service.disk_full:
            log.info("ha_client_resumed_disk_ok", disk_util=self.store.clean_service.disk_util())
            self.paused_for_disk_full = False

    async def _connect_and_serve(self, addr: str) -> bool:
        """One connection's life; True when it received at least one frame (or truncated the store). Not idle
        from the connect on: a change_master during the connect drops the new connection before wait_idle
        returns (else a broker just made master could still take frames or truncate from its former master)."""
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        self._idle.clear()
        try:
            protocol = await self._connect(loop, addr, lost)
            if protocol is None:
                return False
            self._protocol = protocol
            if self.master_ha_addr != addr:  # changed while connecting: closed below, this master is not wanted
                return False
            self.connected = True
            self.connects += 1
            log.info("ha_client_connected", master_ha_addr=addr, slave_offset=self.store.commit_log.max_offset)
            truncations = self.truncations
            if protocol.handshake_broker_id is not None and not await self._handshake(protocol, lost):
                return self.truncations > truncations  # after a truncation reconnect at once, else back off
            await self._keep_alive(protocol, lost)
            return protocol.frames > 0
        finally:
            self._drop_connection()
            self._protocol, self.connected = None, False
            self._idle.set()

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, addr: str, lost: asyncio.Future[None]
    ) -> _ReplicaProtocol | None:
        """TCP (+ TLS) connect to ``addr`` within CONNECT_TIMEOUT_S; None (logged) when it fails."""
        try:
            host, port = split_ha_addr(addr)
            ssl_context = self.tls.client_context() if self.tls is not None else None
            hostname = self.tls.server_hostname(host) if self.tls is not None else None
            connect = loop.create_connection(
                lambda: _ReplicaProtocol(self.store, lost, self.handshake_broker_id),
                host,
                port,
                ssl=ssl_context,
                server_hostname=hostname,
            )
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _transport, protocol = await connect
        except (OSError, TimeoutError, ValueError) as exc:
            log.warning("ha_client_connect_failed", master_ha_addr=addr, error=str(exc))
            return None
        return protocol

    async def _handshake(self, protocol: _ReplicaProtocol, lost: asyncio.Future[None]) -> bool:
        """Controller mode: wait for the master's answer, truncate when needed; True when replication may start
        (the first report is sent), False when this connection ends here."""
        done, _pending = await asyncio.wait((protocol.answer, lost), timeout=HANDSHAKE_TIMEOUT_S,
                                            return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if protocol.answer not in done:
            log.warning("ha_handshake_unanswered", master_ha_addr=self.master_ha_addr)
            return False
        status, master_id, theirs = protocol.answer.result()
        if status != HANDSHAKE_ACCEPTED:
            log.warning("ha_handshake_refused", master_ha_addr=self.master_ha_addr, master_broker_id=master_id,
                        epoch=self.store.epoch_file.last_epoch())  # fmt: skip
            return False
        try:
            point = self.store.epoch_file.find_consistent_point(theirs, theirs.max_offset)
        except EpochFileError as exc:
            log.error("ha_handshake_bad_epochs", master_ha_addr=self.master_ha_addr, error=str(exc))
            return False
        commit_log = self.store.commit_log
        cut = point if point >= 0 else commit_log.min_offset
        if commit_log.max_offset <= cut:
            try:
                await asyncio.to_thread(self._adopt_epochs, theirs)
            except (OSError, EpochFileError) as exc:
                log.error("ha_epoch_adopt_failed", error=str(exc))
                return False
            protocol.start_replication()
            return True
        self._drop_connection()
        await self._truncate(cut, point, master_id)
        return False

    def _adopt_epochs(self, theirs: EpochEntries) -> None:
        """Worker thread: append the master's epochs newer than this slave's last one, so that both histories are
        the same once the bytes arrived (the slave's holds no conflicting entry: it agrees up to the consistent
        point and holds nothing past it). Raises OSError, EpochFileError."""
        epoch_file = self.store.epoch_file
        for epoch, start, _end in theirs.entries:
            if epoch > epoch_file.last_epoch():
                epoch_file.append(epoch, start)

    async def _truncate(self, cut: int, point: int, master_id: int) -> None:
        """Cut the store back to ``cut`` (worker thread); a refusal or failure is logged (the store fails on an
        I/O error: read-only until restart)."""
        log.warning("ha_truncating", offset=cut, consistent_point=point, master_broker_id=master_id,
                    max_offset=self.store.commit_log.max_offset)  # fmt: skip
        try:
            await asyncio.to_thread(self.store.truncate_files, cut)
        except (TruncateRefusedError, OSError) as exc:
            log.error("ha_truncate_failed", offset=cut, error=str(exc))
            return
        self.truncations += 1

    async def _keep_alive(self, protocol: _ReplicaProtocol, lost: asyncio.Future[None]) -> None:
        """Report when idle; close a connection whose master stayed silent past ha_housekeeping_interval_ms."""
        cfg = self.store.config
        heartbeat_s = cfg.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = cfg.ha_housekeeping_interval_ms / 1000
        while not lost.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(heartbeat_s / 2):
                    await asyncio.shield(lost)
            now = time.monotonic()
            if now - protocol.last_read_monotonic_s > housekeeping_s:
                log.warning("ha_client_master_silent", silent_s=round(now - protocol.last_read_monotonic_s, 1))
                return
            if now - protocol.last_report_monotonic_s >= heartbeat_s:
                protocol.report()
