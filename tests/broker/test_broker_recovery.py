"""Recovery: clean restart, crash (abort left behind), torn tail, bit flip, lost ConsumeQueue pages, double crash.

Crashes are real: a child process stores messages and dies with os._exit (no shutdown, abort file stays, the
flusher dies mid-flight); damage is then done to the files the way a power cut would leave them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_testkit import MATRIX_IDS, STORE_MATRIX, Stored, crash_writer, message, open_store, served, store_config
from mq_broker.store.config import FlushDiskType, MessageStoreConfig
from mq_broker.store.mapped_file import offset_to_file_name
from mq_broker.store.message_store import DefaultMessageStore, StoreStartError

TOPIC = "TopicTest"


def expected(stored: list[Stored], queue_id: int) -> list[tuple[int, bytes]]:
    return sorted((s.queue_offset, s.body) for s in stored if s.queue_id == queue_id)


def damage(config: MessageStoreConfig, commit_log_offset: int, data: bytes) -> None:
    """Overwrite CommitLog bytes at ``commit_log_offset`` through plain file I/O."""
    size = config.mapped_file_size_commit_log_bytes
    path = config.commit_log_dir / offset_to_file_name(commit_log_offset - commit_log_offset % size)
    with path.open("r+b") as f:
        f.seek(commit_log_offset % size)
        f.write(data)


def read_commit_log(config: MessageStoreConfig, commit_log_offset: int, size: int) -> bytes:
    file_size = config.mapped_file_size_commit_log_bytes
    path = config.commit_log_dir / offset_to_file_name(commit_log_offset - commit_log_offset % file_size)
    with path.open("rb") as f:
        f.seek(commit_log_offset % file_size)
        return f.read(size)


async def _put_more_and_check(store: DefaultMessageStore, queue_id: int, next_queue_offset: int) -> None:
    (result,) = await store.put_messages([message(1000 + queue_id, queue_id=queue_id)])
    assert result.is_ok
    assert result.queue_offset == next_queue_offset


@pytest.mark.parametrize(("mode", "file_size"), STORE_MATRIX, ids=MATRIX_IDS)
async def test_clean_restart_serves_every_message(tmp_path: Path, mode: FlushDiskType, file_size: int) -> None:
    config = store_config(tmp_path, mode, file_size)
    store = open_store(config)
    stored: list[Stored] = []
    for start in range(0, 60, 6):
        batch = [message(i) for i in range(start, start + 6)]
        results = await store.put_messages(batch)
        stored += [
            Stored(i % 2, r.queue_offset, r.wrote_offset, r.wrote_bytes, m.body)
            for i, m, r in zip(range(start, start + 6), batch, results, strict=True)
        ]
    await store.put_messages([message(99, topic="Other", queue_id=0)])
    end = store.commit_log.max_offset
    store.shutdown()
    assert not config.abort_path.exists()

    again = open_store(config)
    try:
        assert again.last_exit_ok
        assert again.commit_log.max_offset == end
        for q in (0, 1):
            assert served(again, q) == expected(stored, q)
        assert [body for _, body in served(again, 0, "Other")] == [message(99).body]
        await _put_more_and_check(again, 0, 30)
    finally:
        again.shutdown()


@pytest.mark.parametrize(("mode", "file_size"), STORE_MATRIX, ids=MATRIX_IDS)
async def test_crash_recovers_every_acknowledged_message(tmp_path: Path, mode: FlushDiskType, file_size: int) -> None:
    config = store_config(tmp_path, mode, file_size)
    stored = crash_writer(tmp_path, mode, file_size, 0, 60)
    assert config.abort_path.exists()
    store = open_store(config)
    try:
        assert not store.last_exit_ok
        for q in (0, 1):
            assert served(store, q) == expected(stored, q)
        await _put_more_and_check(store, 1, 30)
    finally:
        store.shutdown()


@pytest.mark.parametrize(("mode", "file_size"), STORE_MATRIX, ids=MATRIX_IDS)
async def test_torn_tail_is_cut_and_the_rest_recovered(tmp_path: Path, mode: FlushDiskType, file_size: int) -> None:
    config = store_config(tmp_path, mode, file_size)
    stored = crash_writer(tmp_path, mode, file_size, 0, 60)
    torn = max(stored, key=lambda s: s.wrote_offset)
    half = torn.wrote_bytes // 2
    damage(config, torn.wrote_offset + half, bytes(torn.wrote_bytes - half))  # the second half never hit the disk
    store = open_store(config)
    try:
        survivors = [s for s in stored if s is not torn]
        for q in (0, 1):
            assert served(store, q) == expected(survivors, q)
        assert store.commit_log.max_offset == torn.wrote_offset
        (again,) = await store.put_messages([message(500, queue_id=torn.queue_id)])
        assert again.queue_offset == torn.queue_offset  # the torn message's place is reused
        assert again.wrote_offset == torn.wrote_offset
    finally:
        store.shutdown()


@pytest.mark.parametrize("file_size", [2048, 1024 * 1024])
async def test_bit_flip_in_the_tail_cuts_there(tmp_path: Path, file_size: int) -> None:
    mode = FlushDiskType.SYNC_FLUSH
    config = store_config(tmp_path, mode, file_size)
    stored = crash_writer(tmp_path, mode, file_size, 0, 60)
    last_file_start = max(s.wrote_offset for s in stored) // file_size * file_size
    in_last_file = sorted((s for s in stored if s.wrote_offset >= last_file_start), key=lambda s: s.wrote_offset)
    victim = in_last_file[len(in_last_file) // 2]
    record = read_commit_log(config, victim.wrote_offset, victim.wrote_bytes)
    body_at = victim.wrote_offset + record.index(victim.body) + 2
    damage(config, body_at, bytes([record[body_at - victim.wrote_offset] ^ 0x10]))  # only the CRC notices
    store = open_store(config)
    try:
        survivors = [s for s in stored if s.wrote_offset < victim.wrote_offset]
        for q in (0, 1):
            assert served(store, q) == expected(survivors, q)
        assert store.commit_log.max_offset == victim.wrote_offset
    finally:
        store.shutdown()


async def test_lost_consume_queue_pages_are_rebuilt_from_the_commit_log(tmp_path: Path) -> None:
    mode, file_size = FlushDiskType.ASYNC_FLUSH, 2048
    config = store_config(tmp_path, mode, file_size)
    # The queues are never flushed in the child, so the checkpoint never vouches for them.
    stored = crash_writer(tmp_path, mode, file_size, 0, 40, flush_interval_consume_queue_ms=600_000)
    for path in (p for p in config.consume_queue_dir.rglob("0*") if p.is_file()):
        path.write_bytes(bytes(path.stat().st_size))  # their pages were lost with the power
    store = open_store(config)
    try:
        for q in (0, 1):
            assert served(store, q) == expected(stored, q)
    finally:
        store.shutdown()


async def test_second_crash_after_a_torn_tail(tmp_path: Path) -> None:
    mode, file_size = FlushDiskType.SYNC_FLUSH, 1024 * 1024
    config = store_config(tmp_path, mode, file_size)
    first = crash_writer(tmp_path, mode, file_size, 0, 30)
    torn = max(first, key=lambda s: s.wrote_offset)
    damage(config, torn.wrote_offset + 8, b"\x00" * 4)  # BODYCRC field zeroed
    second = crash_writer(tmp_path, mode, file_size, 100, 30)  # recovers, writes over the cut, dies again
    assert min(s.wrote_offset for s in second) == torn.wrote_offset
    store = open_store(config)
    try:
        survivors = [s for s in first if s is not torn] + second
        for q in (0, 1):
            assert served(store, q) == expected(survivors, q)
    finally:
        store.shutdown()


def test_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    store = open_store(config)
    try:
        with pytest.raises(StoreStartError, match="Lock failed"):
            open_store(config)
    finally:
        store.shutdown()
