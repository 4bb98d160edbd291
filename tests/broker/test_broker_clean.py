"""CleanService: expiry by time (injected clock), forced cleaning by ratio (injected disk usage), the DISK_FULL
flag, ConsumeQueue trimming and pulls below the new min offset."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_testkit import STORE_HOST, message, store_config
from mq_broker.store.clean_service import CleanService
from mq_broker.store.config import FlushDiskType
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.disk import DiskSpaceUsage, disk_partition_space_used_ratio
from mq_broker.store.mapped_file import MappedFile, offset_to_file_name
from mq_broker.store.message import GetMessageStatus, PutMessageResult, PutMessageStatus
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.codec import decode_message

HOUR_S = 3600
NEVER_MS = 3_600_000  # the clean thread's own schedule never fires in these tests: they call run_once


class FakeDisk:
    """An injectable disk usage: one ratio for every path."""

    def __init__(self, ratio: float = 0.10) -> None:
        self.ratio = ratio

    def __call__(self, path: Path) -> float:
        assert path.exists(), path
        return self.ratio


def open_clean_store(root: Path, *, clock_s: Callable[[], float], disk: FakeDisk, **kw: Any) -> DefaultMessageStore:
    kw.setdefault("clean_resource_interval_ms", NEVER_MS)
    cfg = store_config(
        root,
        FlushDiskType.SYNC_FLUSH,
        2048,
        delete_commit_log_files_interval_ms=0,
        delete_consume_queue_files_interval_ms=0,
        **kw,
    )
    store = DefaultMessageStore(cfg, STORE_HOST)
    store.clean_service.clock_s = clock_s
    store.clean_service.disk_usage_ratio = disk
    store.start()
    return store


async def put_many(store: DefaultMessageStore, first: int, count: int) -> dict[int, PutMessageResult]:
    out: dict[int, PutMessageResult] = {}
    for start in range(first, first + count, 4):
        ids = range(start, min(start + 4, first + count))
        results = await store.put_messages([message(i) for i in ids])
        for i, r in zip(ids, results, strict=True):
            assert r.status is PutMessageStatus.PUT_OK, r
            out[i] = r
    return out


def wait_logics_flushed(store: DefaultMessageStore) -> None:
    """Full ConsumeQueue files are msynced by the flusher within a flush interval; wait (bounded) for it."""
    deadline = time.monotonic() + 10
    for cq in list(store.consume_queue_table.values()):
        mfq = cq.mapped_file_queue
        last = mfq.last_mapped_file()
        assert last is not None
        while mfq.flushed_where < last.file_from_offset:
            assert time.monotonic() < deadline, "consume queue not flushed"
            time.sleep(0.01)


async def clean_round(store: DefaultMessageStore) -> None:
    await asyncio.to_thread(wait_logics_flushed, store)
    await asyncio.to_thread(store.clean_service.run_once)


def commit_log_names(store: DefaultMessageStore) -> list[str]:
    return sorted(p.name for p in store.config.commit_log_dir.iterdir())


def assert_readable(store: DefaultMessageStore, stored: dict[int, PutMessageResult], ids: range | list[int]) -> None:
    for i in ids:
        r = stored[i]
        raw = store.commit_log.get_message(r.wrote_offset, r.wrote_bytes)
        assert raw is not None, i
        assert decode_message(raw, check_crc=True).body == message(i).body


def assert_consume_queues_trimmed(store: DefaultMessageStore, stored: dict[int, PutMessageResult]) -> None:
    """Each queue's min offset is its first message still in the CommitLog; below it pulls get OFFSET_TOO_SMALL."""
    cl_min = store.commit_log.min_offset
    for queue_id in (0, 1):
        cq = store.find_consume_queue("TopicTest", queue_id)
        assert cq is not None
        mine = sorted((r.queue_offset, r.wrote_offset, i) for i, r in stored.items() if i % 2 == queue_id)
        kept = [(qo, i) for qo, wo, i in mine if wo >= cl_min]
        expected_min = kept[0][0] if kept else mine[-1][0] + 1
        assert cq.min_offset_in_queue == expected_min
        assert store.get_min_offset_in_queue("TopicTest", queue_id) == expected_min
        assert cq.mapped_file_queue.min_offset() <= expected_min * 20
        too_small = store.get_messages("TopicTest", queue_id, 0, 32)
        if expected_min > 0:
            assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL
            assert too_small.next_begin_offset == expected_min
        if kept:
            found = store.get_messages("TopicTest", queue_id, expected_min, 1)
            assert found.status is GetMessageStatus.FOUND
            assert decode_message(found.messages[0], check_crc=True).body == message(kept[0][1]).body
        names = {p.name for p in (store.config.consume_queue_dir / "TopicTest" / str(queue_id)).iterdir()}
        assert names == {f.file_path.name for f in cq.mapped_file_queue.mapped_files}


async def test_expired_files_deleted_at_delete_when_hour(tmp_path: Path) -> None:
    later = time.time() + 73 * HOUR_S  # every file is older than file_reserved_time_hours (72)
    hour = time.localtime(later).tm_hour
    store = open_clean_store(tmp_path, clock_s=lambda: later, disk=FakeDisk(), delete_when=f"{(hour + 1) % 24:02d}")
    try:
        stored = await put_many(store, 0, 80)
        files_before = commit_log_names(store)
        assert len(files_before) >= 5
        await clean_round(store)  # expired, but not the hour: nothing goes
        assert commit_log_names(store) == files_before
        assert store.commit_log.min_offset == 0

        store.clean_service.delete_when_hours = frozenset({hour})
        await clean_round(store)
        last = store.commit_log.mapped_file_queue.last_mapped_file()
        assert last is not None
        assert commit_log_names(store) == [last.file_path.name]  # never the file being written
        assert store.commit_log.min_offset == last.file_from_offset > 0
        assert_consume_queues_trimmed(store, stored)
        assert_readable(store, stored, [i for i, r in stored.items() if r.wrote_offset >= last.file_from_offset])
        gone = min(stored.values(), key=lambda r: r.wrote_offset)
        assert store.commit_log.get_message(gone.wrote_offset, gone.wrote_bytes) is None

        more = await put_many(store, 80, 8)  # writing goes on; queue offsets stay dense
        for queue_id in (0, 1):
            top = max(r.queue_offset for i, r in stored.items() if i % 2 == queue_id)
            after = sorted(r.queue_offset for i, r in more.items() if i % 2 == queue_id)
            assert after == list(range(top + 1, top + 5))
        stored.update(more)
    finally:
        store.shutdown()
    reopened = open_clean_store(tmp_path, clock_s=time.time, disk=FakeDisk())
    try:  # recovery keeps the moved min offsets
        assert_consume_queues_trimmed(reopened, stored)
        assert_readable(reopened, stored, [i for i, r in stored.items() if r.wrote_offset >= last.file_from_offset])
    finally:
        reopened.shutdown()


async def test_unexpired_files_stay_at_the_hour(tmp_path: Path) -> None:
    now = time.time()
    hour = time.localtime(now).tm_hour
    store = open_clean_store(tmp_path, clock_s=lambda: now, disk=FakeDisk(), delete_when=f"{hour:02d}")
    try:
        await put_many(store, 0, 40)
        before = commit_log_names(store)
        await clean_round(store)
        assert commit_log_names(store) == before
    finally:
        store.shutdown()


async def test_over_max_used_ratio_deletes_only_expired_files_at_any_hour(tmp_path: Path) -> None:
    now = time.time()
    hour = time.localtime(now).tm_hour
    disk = FakeDisk(0.80)  # > disk_max_used_space_ratio 75 %, < clean forcibly 0.85
    store = open_clean_store(tmp_path, clock_s=lambda: now, disk=disk, delete_when=f"{(hour + 12) % 24:02d}")
    try:
        stored = await put_many(store, 0, 80)
        files = store.commit_log.mapped_file_queue.mapped_files
        assert len(files) >= 5
        old = now - 80 * HOUR_S
        for mapped in files[:2]:
            os.utime(mapped.file_path, (old, old))
        os.utime(files[3].file_path, (old, old))  # expired, but after a kept file: stays (no hole in the log)
        third = files[2]
        await clean_round(store)
        assert store.commit_log.min_offset == third.file_from_offset
        assert commit_log_names(store)[0] == third.file_path.name
        assert_consume_queues_trimmed(store, stored)
    finally:
        store.shutdown()


async def test_forced_cleaning_by_ratio_deletes_unexpired_files_in_batches(tmp_path: Path) -> None:
    now = time.time()
    hour = time.localtime(now).tm_hour
    disk = FakeDisk(0.86)  # > diskSpaceCleanForciblyRatio 0.85
    store = open_clean_store(
        tmp_path, clock_s=lambda: now, disk=disk, delete_when=f"{(hour + 12) % 24:02d}", delete_file_batch_max=2
    )
    try:
        stored = await put_many(store, 0, 80)
        count = len(commit_log_names(store))
        assert count >= 5
        await clean_round(store)
        assert len(commit_log_names(store)) == count - 2
        assert not store.clean_service.disk_full  # 0.86 is below the warning level 0.90
        for _ in range(count):
            await clean_round(store)
        assert len(commit_log_names(store)) == 1
        assert_consume_queues_trimmed(store, stored)
        disk.ratio = 0.50
        before = commit_log_names(store)
        await put_many(store, 80, 4)
        await clean_round(store)
        assert commit_log_names(store)[0] == before[0]  # below the ratios nothing more goes
    finally:
        store.shutdown()


async def test_disk_full_flag_refuses_puts_and_clears_itself(tmp_path: Path) -> None:
    disk = FakeDisk(0.10)
    store = open_clean_store(
        tmp_path, clock_s=time.time, disk=disk, clean_resource_interval_ms=10, disk_space_clean_forcibly_ratio=1.0
    )
    service = store.clean_service
    try:
        stored = await put_many(store, 0, 8)
        disk.ratio = 0.93
        await asyncio.to_thread(service.wait_rounds, service.rounds + 2, 10.0)
        assert service.disk_full
        refused = await store.put_messages([message(100), message(101)])
        for r in refused:
            assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert "the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93]" in r.remark
        disk.ratio = 0.89
        await asyncio.to_thread(service.wait_rounds, service.rounds + 2, 10.0)
        assert not service.disk_full
        stored.update(await put_many(store, 8, 8))
        assert store.get_max_offset_in_queue("TopicTest", 0) == 8  # the refused ones never reached a queue
        assert_readable(store, stored, range(16))
    finally:
        store.shutdown()


async def test_consume_queue_ensure_room_refuses_before_the_commit_log(tmp_path: Path, monkeypatch: Any) -> None:
    store = open_clean_store(tmp_path, clock_s=time.time, disk=FakeDisk())
    try:
        await put_many(store, 0, 16)  # 8 units per queue: each queue's first file is full
        max_offset = store.commit_log.max_offset

        def no_space(self: MappedFile, *_args: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(MappedFile, "__init__", no_space)
        refused = await store.put_messages([message(16)])
        assert refused[0].status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "create mapped file failed" in refused[0].remark
        assert store.commit_log.max_offset == max_offset  # nothing written
        assert store.failure is None
        monkeypatch.undo()
        ok = await store.put_messages([message(16)])
        assert ok[0].status is PutMessageStatus.PUT_OK
        assert ok[0].queue_offset == 8
    finally:
        store.shutdown()


def test_correct_min_offset_moves_forward_only(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, 4)
    for n in range(10):
        cq.put_message_position_info(1000 + n * 100, 100, 0, n)
    cq.correct_min_offset(1450)
    assert cq.min_offset_in_queue == 5
    cq.correct_min_offset(0)
    assert cq.min_offset_in_queue == 5
    cq.mapped_file_queue.flushed_where = cq.mapped_file_queue.max_offset()  # as if the flusher ran
    deleted = cq.delete_expired_files(1450)
    assert [m.file_path.name for m in deleted] == [offset_to_file_name(0)]  # units 4..7 hold 1400: kept
    for mapped in deleted:
        mapped.destroy()
    cq.correct_min_offset(10_000)  # everything gone: an empty queue, min == max
    assert cq.min_offset_in_queue == cq.max_offset_in_queue == 10
    assert cq.get_unit(9) is None
    cq.close()


def test_warm_up_keeps_the_bytes(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / offset_to_file_name(0), 3 * 1024 * 1024 + 100)
    mapped.append(b"hello" * 1000)
    mapped.warm()
    assert mapped.read(0, 5000) == b"hello" * 1000
    assert mapped.read(5000, 100) == bytes(100)
    mapped.destroy()
    assert mapped.read(0, 5) == b""  # a reader still holding a deleted file gets nothing, never a crash


async def test_warm_mapped_file_enable_store_round_trip(tmp_path: Path) -> None:
    store = open_clean_store(tmp_path, clock_s=time.time, disk=FakeDisk(), warm_mapped_file_enable=True)
    try:
        stored = await put_many(store, 0, 40)
        assert len(commit_log_names(store)) >= 2
        assert_readable(store, stored, range(40))
    finally:
        store.shutdown()


def test_preallocation_without_fallocate_writes_every_block(tmp_path: Path, monkeypatch: Any) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    size = 256 * 1024
    mapped = MappedFile(tmp_path / offset_to_file_name(0), size)
    st = os.stat(mapped.file_path)
    assert st.st_size == size
    assert st.st_blocks * 512 >= size  # not sparse: a write through the mapping cannot SIGBUS
    mapped.destroy()


def test_disk_partition_space_used_ratio(tmp_path: Path) -> None:
    ratio = disk_partition_space_used_ratio(tmp_path)
    assert 0.0 <= ratio <= 1.0
    assert ratio == round(ratio, 2)
    assert disk_partition_space_used_ratio(tmp_path / "missing") == -1.0
    assert DiskSpaceUsage(0.931, 0.5, -1.0).disk_util() == "CL:  0.93 CQ:  0.50 INDEX: -1.00"


def test_clean_service_thread_stops(tmp_path: Path) -> None:
    cfg = store_config(tmp_path, clean_resource_interval_ms=5)
    store = DefaultMessageStore(cfg, STORE_HOST)
    service = CleanService(cfg, store.commit_log, list)
    service.start()
    assert service.wait_rounds(3, 10.0)
    service.shutdown()
    assert not service.is_alive


async def test_consume_queue_files_flushed_late_are_deleted_in_a_later_round(tmp_path: Path) -> None:
    later = time.time() + 73 * HOUR_S
    hour = time.localtime(later).tm_hour
    store = open_clean_store(
        tmp_path,
        clock_s=lambda: later,
        disk=FakeDisk(),
        delete_when=f"{hour:02d}",
        flush_interval_consume_queue_ms=NEVER_MS,  # the flusher leaves the ConsumeQueues alone until shutdown
    )
    try:
        stored = await put_many(store, 0, 80)
        queues = list(store.consume_queue_table.values())
        counts = [len(cq.mapped_file_queue.mapped_files) for cq in queues]
        assert min(counts) >= 3
        await asyncio.to_thread(store.clean_service.run_once)
        assert len(commit_log_names(store)) == 1
        assert [len(cq.mapped_file_queue.mapped_files) for cq in queues] == counts  # not flushed: kept for now
        assert_consume_queues_trimmed(store, stored)  # but the min offsets moved already
        for cq in queues:
            await asyncio.to_thread(cq.flush, 0)
        await asyncio.to_thread(store.clean_service.run_once)
        assert all(len(cq.mapped_file_queue.mapped_files) < n for cq, n in zip(queues, counts, strict=True))
        assert_consume_queues_trimmed(store, stored)
    finally:
        store.shutdown()


async def test_clean_file_forcibly_disabled_keeps_unexpired_files_above_the_ratio(tmp_path: Path) -> None:
    now = time.time()
    hour = time.localtime(now).tm_hour
    disk = FakeDisk(0.88)  # > diskSpaceCleanForciblyRatio 0.85 and > diskMaxUsedSpaceRatio 75 %, < warning 0.90
    store = open_clean_store(
        tmp_path,
        clock_s=lambda: now,
        disk=disk,
        delete_when=f"{(hour + 12) % 24:02d}",
        clean_file_forcibly_enable=False,
    )
    try:
        stored = await put_many(store, 0, 80)
        files = store.commit_log.mapped_file_queue.mapped_files
        before = commit_log_names(store)
        assert len(before) >= 5
        await clean_round(store)
        assert commit_log_names(store) == before  # nothing unexpired goes
        old = now - 80 * HOUR_S
        os.utime(files[0].file_path, (old, old))
        await clean_round(store)  # over diskMaxUsedSpaceRatio: the expired oldest file still goes
        assert commit_log_names(store) == before[1:]
        assert store.commit_log.min_offset == files[1].file_from_offset
        assert_consume_queues_trimmed(store, stored)
        for i, result in stored.items():
            if result.wrote_offset >= files[1].file_from_offset:
                got = store.commit_log.get_message(result.wrote_offset, result.wrote_bytes)
                assert got is not None, i
    finally:
        store.shutdown()


async def test_files_holding_undelivered_held_messages_stay_until_forced(tmp_path: Path) -> None:
    """``keep_from`` (the lowest CommitLog offset a pending timer or delay-level message needs): expired files
    from there on stay; those before it go; forced cleaning still frees the disk."""
    later = time.time() + 73 * HOUR_S
    hour = time.localtime(later).tm_hour
    disk = FakeDisk()
    store = open_clean_store(tmp_path, clock_s=lambda: later, disk=disk, delete_when=f"{hour:02d}")
    try:
        stored = await put_many(store, 0, 80)
        files = store.commit_log.mapped_file_queue.mapped_files
        assert len(files) >= 5
        held_at = stored[min(stored, key=lambda i: abs(stored[i].wrote_offset - files[2].file_from_offset))]
        keep = held_at.wrote_offset
        store.clean_service.keep_from = lambda: keep
        await clean_round(store)
        assert store.commit_log.min_offset <= keep, "the file holding the held message stays"
        assert store.commit_log.min_offset > 0, "the files before it go"
        assert_readable(store, stored, [i for i, r in stored.items() if r.wrote_offset >= keep])
        disk.ratio = 0.95  # past disk_space_clean_forcibly_ratio: forced cleaning ignores keep_from
        await clean_round(store)
        assert store.commit_log.min_offset > keep
    finally:
        store.shutdown()
