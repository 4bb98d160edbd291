"""Store side of replication: CommitLog#append_data + the slave's reput, the GroupTransferService waiters of a
SYNC_MASTER put, and a SLAVE store refusing puts (no network here; tests/broker/test_broker_ha_*.py run brokers)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from mq_broker.store.config import BrokerRole, FlushDiskType
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus
from mq_broker.store.message_store import SLAVE_PUT_REMARK, DefaultMessageStore


def _mixed(i: int) -> MessageExtBrokerInner:
    base = message(i, queue_id=i % 3)
    size = random.Random(i).choice((10, 200, 700))
    return MessageExtBrokerInner.build(
        topic=base.topic,
        queue_id=base.queue_id,
        body=bytes([i % 251]) * size,
        properties={"TAGS": "TagA", "KEYS": f"k{i}"},
        born_timestamp_ms=base.born_timestamp_ms,
        born_host=base.born_host,
    )


def _commit_log_bytes(store: DefaultMessageStore) -> bytes:
    return b"".join(m.read(0, m.wrote_position) for m in store.commit_log.mapped_file_queue.mapped_files)


def _replicate(master: DefaultMessageStore, slave: DefaultMessageStore, frame_bytes: int) -> None:
    """What HAConnection + HAClient do, without the socket: frames from the slave's max offset on."""
    offset = slave.commit_log.max_offset or master.commit_log.min_offset
    while offset < master.commit_log.max_offset:
        size = master.commit_log.transfer_size(offset, frame_bytes)
        data = master.commit_log.get_message(offset, size)
        assert data is not None
        assert slave.append_replicated(offset, data)
        offset += size


@pytest.mark.parametrize("frame_bytes", [97, 4096])
async def test_slave_commit_log_is_byte_identical_and_queues_match(tmp_path: Path, frame_bytes: int) -> None:
    master = open_store(store_config(tmp_path / "m", file_size=4096))
    slave = open_store(store_config(tmp_path / "s", file_size=4096, broker_role=BrokerRole.SLAVE))
    try:
        for start in range(0, 120, 8):
            await master.put_messages([_mixed(i) for i in range(start, start + 8)])
        assert len(master.commit_log.mapped_file_queue.mapped_files) > 3  # rolled, with END_OF_FILE fillers
        _replicate(master, slave, frame_bytes)
        assert slave.commit_log.max_offset == master.commit_log.max_offset
        assert _commit_log_bytes(slave) == _commit_log_bytes(master)
        assert slave.dispatched_offset == master.commit_log.max_offset
        for queue_id in range(3):
            want = master.get_messages("TopicTest", queue_id, 0, 1000)
            got = slave.get_messages("TopicTest", queue_id, 0, 1000)
            assert got.messages == want.messages
            assert got.max_offset == want.max_offset > 0
        assert slave.commit_log.topic_queue_table == master.commit_log.topic_queue_table
        found = slave.query_message_by_unique_key("TopicTest", "k7")  # KEYS indexed too
        hits = slave.query_message("TopicTest", "k7", 10, 0, 1 << 62)
        assert found is not None
        assert len(hits.messages) == 1
    finally:
        master.shutdown()
        slave.shutdown()


async def test_append_data_refuses_a_gap_and_a_misaligned_start(tmp_path: Path) -> None:
    slave = open_store(store_config(tmp_path / "s", file_size=4096, broker_role=BrokerRole.SLAVE))
    try:
        assert not slave.append_replicated(100, b"x" * 8)  # empty log: only a file boundary
        assert not slave.append_replicated(4096 + 8, b"x")
        assert slave.commit_log.max_offset == 0
    finally:
        slave.shutdown()


async def test_slave_store_refuses_puts_with_rocketmq_remark(tmp_path: Path) -> None:
    slave = open_store(store_config(tmp_path / "s", broker_role=BrokerRole.SLAVE))
    try:
        (result,) = await slave.put_messages([message(1)])
        assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert result.remark == SLAVE_PUT_REMARK
        assert slave.commit_log.max_offset == 0
    finally:
        slave.shutdown()


async def test_sync_master_put_waits_for_the_slave_ack(tmp_path: Path) -> None:
    cfg = store_config(
        tmp_path / "m", FlushDiskType.SYNC_FLUSH, broker_role=BrokerRole.SYNC_MASTER, sync_flush_timeout_ms=300
    )
    master = open_store(cfg)
    try:
        (alone,) = await master.put_messages([message(1)])  # no slave: stored, answered at once
        assert alone.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert alone.msg_id
        master.group_transfer.on_slave_ack("127.0.0.2:1", master.commit_log.max_offset)
        put = asyncio.create_task(master.put_messages([message(2)]))
        await asyncio.sleep(0.1)  # the put is stored and flushed; it waits for the slave
        assert not put.done()  # the master flushed it, the slave has not acknowledged it
        master.group_transfer.on_slave_ack("127.0.0.2:1", master.commit_log.max_offset)
        (acked,) = await asyncio.wait_for(put, 10)
        assert acked.status is PutMessageStatus.PUT_OK
        (late,) = await master.put_messages([message(3)])  # the slave never acknowledges it
        assert late.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert late.queue_offset >= 0
        master.group_transfer.on_slave_gone("127.0.0.2:1")
        (gone,) = await master.put_messages([message(4)])
        assert gone.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    finally:
        master.shutdown()


async def test_a_slave_too_far_behind_is_not_in_sync(tmp_path: Path) -> None:
    cfg = store_config(
        tmp_path / "m",
        file_size=8192,
        broker_role=BrokerRole.SYNC_MASTER,
        ha_max_gap_not_in_sync_bytes=1000,
        sync_flush_timeout_ms=200,
    )
    master = open_store(cfg)
    try:
        master.group_transfer.on_slave_ack("127.0.0.2:1", 0)
        (first,) = await master.put_messages([message(1)])  # in sync before the put: it waits, and times out
        assert first.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        big = MessageExtBrokerInner("TopicTest", 0, b"x" * 2000)
        (far,) = await master.put_messages([big])  # the slave is now > 1000 bytes behind: not in sync
        assert far.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    finally:
        master.shutdown()


async def test_read_into_copies_the_written_bytes_of_one_file(tmp_path: Path) -> None:
    """The master's HA frames: CommitLog#read_into fills a caller's buffer with what get_message returns."""
    master = open_store(store_config(tmp_path / "m", file_size=4096))
    commit_log = master.commit_log
    try:
        await master.put_messages([_mixed(i) for i in range(20)])
        first = commit_log.mapped_file_queue.mapped_files[0]
        size = commit_log.transfer_size(100, 1 << 20)
        assert size == first.wrote_position - 100
        frame = bytearray(size + 12)
        assert commit_log.read_into(100, memoryview(frame)[12:])
        assert bytes(frame[12:]) == commit_log.get_message(100, size)
        assert not commit_log.read_into(100, memoryview(bytearray(size + 1)))  # past the file's written end
        assert not commit_log.read_into(commit_log.max_offset + 8 * 4096, memoryview(bytearray(8)))  # no file
    finally:
        master.shutdown()
    assert first.read_into(0, memoryview(bytearray(8))) == 0  # the mapping is closed


def _descriptors_under(directory: Path) -> int:
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if str(_readlink(fd)).startswith(str(directory)))


def _readlink(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:  # closed meanwhile (the listing's own descriptor)
        return ""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_replicated_appends_keep_a_write_descriptor_only_on_the_file_being_filled(tmp_path: Path) -> None:
    master = open_store(store_config(tmp_path / "m", file_size=4096))
    slave = open_store(store_config(tmp_path / "s", file_size=4096, broker_role=BrokerRole.SLAVE))
    commit_log_dir = slave.config.commit_log_dir
    try:
        for start in range(0, 64, 8):
            await master.put_messages([_mixed(i) for i in range(start, start + 8)])
        _replicate(master, slave, 1000)
        files = len(slave.commit_log.mapped_file_queue.mapped_files)
        assert files > 3
        assert _commit_log_bytes(slave) == _commit_log_bytes(master)
        # one descriptor per mapping, plus the pwrite one of the last (partly written) file only
        assert _descriptors_under(commit_log_dir) == files + 1
    finally:
        master.shutdown()
        slave.shutdown()
    assert _descriptors_under(commit_log_dir) == 0
