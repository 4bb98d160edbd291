"""The master's side of one slave connection (HAConnection behind HAService), driven by a raw socket playing a
static slave: frames from its first report on, a burst of reports taken in one read (the newest counts), a silent
slave dropped after ``ha_housekeeping_interval_ms``, and frames sent with sendfile (DirectFrameSender) that the
socket takes only in part: the stream stays byte-identical to the CommitLog."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

from broker_testkit import message, open_store, store_config
from mq_broker.ha.direct_send import DirectFrameSender
from mq_broker.ha.ha_service import HAService
from mq_broker.ha.protocol import FRAME_HEADER, REPORT
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus

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
