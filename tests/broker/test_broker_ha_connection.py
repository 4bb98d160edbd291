"""The master's side of one slave connection (HAConnection behind HAService), driven by a raw socket playing a
static slave: frames from its first report on, a burst of reports taken in one read (the newest counts), a silent
slave dropped after ``ha_housekeeping_interval_ms``, and frames sent with sendfile (DirectFrameSender) that the
socket takes only in part: the stream stays byte-identical to the CommitLog."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

from broker_testkit import message, open_store, store_config
from mq_broker.ha.direct_send import DirectFrameSender
from mq_broker.ha.ha_service import HAService
from mq_broker.ha.protocol import FRAME_HEADER, REPORT
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus
from mq_broker.store.message_store import DefaultMessageStore

DEADLINE_S = 30.0
FILE_BYTES = 1024 * 1024


async def _frames_until(reader: asyncio.StreamReader, end_offset: int) -> bytes:
    """The data frames' bodies (heartbeats skipped) until they reach ``end_offset``."""
    received = bytearray()
    reached = -1
    while reached < end_offset:
        offset, size = FRAME_HEADER.unpack(await asyncio.wait_for(reader.readexactly(FRAME_HEADER.size), DEADLINE_S))
        if size:
            received += await reader.readexactly(size)
            reached = offset + size
    return bytes(received)


async def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_burst_of_reports_counts_its_newest(tmp_path: Path) -> None:
    config = store_config(tmp_path / "m", file_size=FILE_BYTES, broker_role=BrokerRole.SYNC_MASTER)
    store = open_store(config)
    ha = HAService(store)
    writer: asyncio.StreamWriter | None = None
    try:
        await store.put_messages([message(i) for i in range(30)])
        end = store.commit_log.max_offset
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(0))  # an empty static slave
        body = await _frames_until(reader, end)
        assert body == store.commit_log.get_message(0, end)
        (connection,) = ha.connections.values()
        assert connection.acked_offset == 0
        # Every report the slave would send frame by frame, arriving at once: one read takes them all.
        steps = [*range(0, end, 97), end]
        writer.write(b"".join(REPORT.pack(o) for o in steps))
        await _until(lambda: connection.acked_offset == end, "the newest report of the burst is applied")
        assert store.group_transfer.acked_offsets == {connection.slave: end}
        put = asyncio.create_task(store.put_messages([message(99)]))  # SYNC_MASTER: waits for this slave
        await _frames_until(reader, end + 1)
        assert not put.done()
        writer.write(REPORT.pack(store.commit_log.max_offset - 1) + REPORT.pack(store.commit_log.max_offset))
        (acked,) = await asyncio.wait_for(put, DEADLINE_S)
        assert acked.status is PutMessageStatus.PUT_OK
    finally:
        if writer is not None:
            writer.close()
        await ha.shutdown()
        store.shutdown()


async def test_a_silent_slave_is_dropped_after_the_housekeeping_interval(tmp_path: Path) -> None:
    config = store_config(
        tmp_path / "m",
        broker_role=BrokerRole.ASYNC_MASTER,
        ha_housekeeping_interval_ms=600,
        ha_send_heartbeat_interval_ms=100,
    )
    store = open_store(config)
    ha = HAService(store)
    writer: asyncio.StreamWriter | None = None
    try:
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(0))
        await _until(lambda: len(ha.connections) == 1, "the slave is connected")
        for _ in range(3):  # reports keep it: each one pushes the deadline back
            await asyncio.sleep(0.3)
            writer.write(REPORT.pack(0))
        assert len(ha.connections) == 1
        await _until(lambda: not ha.connections, "the silent slave is dropped")
        assert store.group_transfer.acked_offsets == {}
        while await asyncio.wait_for(reader.read(65536), DEADLINE_S):  # heartbeats, then the master's close
            pass
    finally:
        if writer is not None:
            writer.close()
        await ha.shutdown()
        store.shutdown()


async def _next_frame(reader: asyncio.StreamReader) -> tuple[int, int]:
    """(offset, size) of the next data frame (heartbeats skipped), its body read and dropped."""
    while True:
        offset, size = FRAME_HEADER.unpack(await asyncio.wait_for(reader.readexactly(FRAME_HEADER.size), DEADLINE_S))
        if size:
            await reader.readexactly(size)
            return offset, size


# Long enough that the puts of a test all land inside one linger, far below the heartbeat interval.
LINGER_MS = 2_000
HEARTBEAT_MS = 10_000


@contextlib.asynccontextmanager
async def _lingering_master(
    tmp_path: Path, role: BrokerRole, puts_before: int = 0
) -> AsyncIterator[tuple[DefaultMessageStore, HAService, asyncio.StreamReader, asyncio.StreamWriter]]:
    """A master of ``role`` with ha_async_frame_linger_ms = LINGER_MS, ``puts_before`` messages stored, and an
    empty static slave (a raw socket) that has sent its first report."""
    config = store_config(tmp_path / "m", file_size=FILE_BYTES, broker_role=role,
                          ha_async_frame_linger_ms=LINGER_MS, ha_send_heartbeat_interval_ms=HEARTBEAT_MS)  # fmt: skip
    store = open_store(config)
    ha = HAService(store)
    writer: asyncio.StreamWriter | None = None
    try:
        if puts_before:
            await store.put_messages([message(i) for i in range(puts_before)])
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REPORT.pack(0))
        yield store, ha, reader, writer
    finally:
        if writer is not None:
            writer.close()
        await ha.shutdown()
        store.shutdown()


async def test_an_async_master_lingers_so_one_frame_carries_the_puts_meanwhile(tmp_path: Path) -> None:
    """ASYNC_MASTER: after the frame that took all there was, the writer waits ha_async_frame_linger_ms; three puts
    made meanwhile (each acknowledged at once, no slave waited for) go out as one frame."""
    async with _lingering_master(tmp_path, BrokerRole.ASYNC_MASTER, puts_before=1) as (store, _ha, reader, _w):
        first_end = store.commit_log.max_offset
        assert await _next_frame(reader) == (0, first_end)
        for i in range(1, 4):
            (result,) = await store.put_messages([message(i)])
            assert result.status is PutMessageStatus.PUT_OK
        assert await _next_frame(reader) == (first_end, store.commit_log.max_offset - first_end)


async def test_a_sync_master_does_not_linger(tmp_path: Path) -> None:
    """SYNC_MASTER with the same linger setting: each put's frame goes out at once (the put waits for the slave's
    report), so three puts take far less than one linger."""
    async with _lingering_master(tmp_path, BrokerRole.SYNC_MASTER) as (store, _ha, reader, writer):
        await _until(lambda: store.group_transfer.acked_offsets, "the slave's first report is applied")
        started = time.monotonic()
        for i in range(3):
            put = asyncio.create_task(store.put_messages([message(i)]))
            offset, size = await _next_frame(reader)
            writer.write(REPORT.pack(offset + size))
            (result,) = await asyncio.wait_for(put, DEADLINE_S)
            assert result.status is PutMessageStatus.PUT_OK
        assert time.monotonic() - started < LINGER_MS / 1000


async def test_a_slave_acknowledging_each_frame_under_steady_puts_stays_caught_up(tmp_path: Path) -> None:
    """A report never meets the max offset while puts go on (it moved on meanwhile); a slave that acknowledged the
    last frame that reached the max offset was caught up when that frame went out (RocketMQ's lastMasterMaxOffset),
    so its lag in seconds does not grow with the length of the load."""
    async with _lingering_master(tmp_path, BrokerRole.ASYNC_MASTER) as (store, ha, reader, writer):
        await _until(lambda: len(ha.connections) == 1, "the slave is connected")
        (connection,) = ha.connections.values()
        connected_at = connection.last_caught_up_monotonic_s
        await asyncio.sleep(0.05)
        before_put = time.monotonic()
        await store.put_messages([message(0)])
        offset, size = await _next_frame(reader)  # reached the max offset when sent, after before_put
        await store.put_messages([message(1)])  # the writer lingers: this one is not sent yet
        assert store.commit_log.max_offset > offset + size
        writer.write(REPORT.pack(offset + size))
        await _until(lambda: connection.acked_offset == offset + size, "the report is applied")
        assert connection.last_caught_up_monotonic_s >= before_put > connected_at
        assert connection.lag_seconds(store.commit_log.max_offset) <= time.monotonic() - before_put


def _big(i: int) -> MessageExtBrokerInner:
    base = message(i)
    return MessageExtBrokerInner.build(
        topic=base.topic,
        queue_id=base.queue_id,
        body=bytes([i % 251]) * 16_000,
        properties={"TAGS": "TagA", "KEYS": f"k{i}"},
        born_timestamp_ms=base.born_timestamp_ms,
        born_host=base.born_host,
    )


async def test_frames_the_socket_takes_in_part_keep_the_stream_byte_identical(tmp_path: Path) -> None:
    """24 MiB over 1 MiB files, a slave that reads nothing for a while: the socket buffers fill, a sendfile falls
    short and the rest of that frame (and the frames behind it) go through the transport; every byte arrives once,
    in order."""
    store = open_store(store_config(tmp_path / "m", file_size=FILE_BYTES, broker_role=BrokerRole.ASYNC_MASTER))
    ha = HAService(store)
    writer: asyncio.StreamWriter | None = None
    try:
        for start in range(0, 1536, 64):
            await store.put_messages([_big(i) for i in range(start, start + 64)])
        end = store.commit_log.max_offset
        port = await ha.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=4 * FILE_BYTES)
        writer.write(REPORT.pack(0))
        await asyncio.sleep(1.0)  # nothing read: the master's sends fill both socket buffers
        received = await _frames_until(reader, end)
        files = store.commit_log.mapped_file_queue.mapped_files
        assert received == b"".join(m.read(0, m.wrote_position) for m in files)
    finally:
        if writer is not None:
            writer.close()
        await ha.shutdown()
        store.shutdown()


async def test_direct_sender_reports_what_a_full_socket_took(tmp_path: Path) -> None:
    """DirectFrameSender on a socket with a small send buffer: the header whole, then the body as far as the
    buffers take it; what it says it sent is exactly what the peer reads."""
    data = os.urandom(2 * 1024 * 1024)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(data)
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    ours.setblocking(False)
    transport, _protocol = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
    sender = DirectFrameSender(transport)
    try:
        assert sender.usable()
        header_sent, body_sent = sender.send(b"HEADER", path, 1000, len(data) - 1000)
        assert header_sent == 6
        assert 0 < body_sent < len(data) - 1000  # the buffers are far smaller than the body
        peer.settimeout(5)
        got = b""
        while len(got) < 6 + body_sent:
            got += peer.recv(1 << 20)
        assert got == b"HEADER" + data[1000 : 1000 + body_sent]
    finally:
        sender.close()
        transport.close()
        peer.close()


async def test_direct_sender_is_not_used_under_tls_or_behind_queued_bytes() -> None:
    ours, peer = socket.socketpair()
    transport, _protocol = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
    try:
        sender = DirectFrameSender(transport)
        assert sender.usable()
        transport.pause_reading()
        assert isinstance(transport, asyncio.WriteTransport)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        transport.write(bytes(8 * 1024 * 1024))  # far more than the socket takes: the rest stays queued
        assert transport.get_write_buffer_size() > 0
        assert not sender.usable()
    finally:
        transport.close()
        peer.close()
