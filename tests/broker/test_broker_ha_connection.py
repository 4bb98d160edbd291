"""The master's side of one slave connection (HAConnection behind HAService), driven by a raw socket playing a
static slave: frames from its first report on, a burst of reports taken in one read (the newest counts), and a
silent slave dropped after ``ha_housekeeping_interval_ms``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker_testkit import message, open_store, store_config
from mq_broker.ha.ha_service import HAService
from mq_broker.ha.protocol import FRAME_HEADER, REPORT
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import PutMessageStatus

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
