"""Flush services: group commit (SYNC_FLUSH), WAIT=false, flush timeout, failed msync, periodic ASYNC_FLUSH."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from mq_broker.store.config import BrokerRole, FlushDiskType
from mq_broker.store.mapped_file import OS_PAGE_SIZE_BYTES, MappedFile
from mq_broker.store.message import PutMessageStatus

_REAL_MSYNC = MappedFile._msync


def _patch_commit_log_msync(
    monkeypatch: pytest.MonkeyPatch,
    before: Callable[[MappedFile, int, int], None],
    after: Callable[[MappedFile, int, int], None] = lambda _m, _s, _l: None,
) -> None:
    """Run ``before``/``after(file, start, length)`` around every CommitLog msync (ConsumeQueue files untouched)."""

    def patched(self: MappedFile, start: int, length: int) -> None:
        is_commit_log = self.file_path.parent.name == "commitlog"
        if is_commit_log:
            before(self, start, length)
        _REAL_MSYNC(self, start, length)
        if is_commit_log:
            after(self, start, length)

    monkeypatch.setattr(MappedFile, "_msync", patched)


async def _wait_until(predicate: Callable[[], bool], limit_s: float = 5.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return predicate()


async def test_many_concurrent_puts_complete_after_the_msync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced_ends: list[int] = []

    def slow_disk(_m: MappedFile, _s: int, _l: int) -> None:
        time.sleep(0.002)  # the flusher thread's msync is slow: more puts pile up per round (not the loop)

    def record(mapped: MappedFile, start: int, length: int) -> None:
        synced_ends.append(mapped.file_from_offset + start + length)

    _patch_commit_log_msync(monkeypatch, slow_disk, record)
    store = open_store(store_config(tmp_path, FlushDiskType.SYNC_FLUSH, 64 * 1024))
    try:

        async def writer(w: int) -> None:
            for k in range(10):
                batch = [message(w * 100 + k * 3 + j, queue_id=w % 4) for j in range(3)]
                results = await store.put_messages(batch)
                assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 3
                end = max(r.wrote_offset + r.wrote_bytes for r in results)
                assert max(synced_ends, default=0) >= end  # completed only once an msync covered it

        await asyncio.wait_for(asyncio.gather(*(writer(w) for w in range(32))), 60)
        assert sum(store.get_max_offset_in_queue("TopicTest", q) for q in range(4)) == 32 * 30
        assert store.commit_log.mapped_file_queue.flushed_where == store.commit_log.max_offset
        assert len(synced_ends) < 32 * 10  # waiters were grouped: fewer msyncs than puts
    finally:
        store.shutdown()


async def test_wait_false_does_not_wait_and_timeout_gives_flush_disk_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    _patch_commit_log_msync(monkeypatch, lambda _m, _s, _l: release.wait(10))
    store = open_store(store_config(tmp_path, FlushDiskType.SYNC_FLUSH, 64 * 1024, sync_flush_timeout_ms=300))
    try:
        (no_wait,) = await asyncio.wait_for(store.put_messages([message(1, WAIT="false")]), 2)
        assert no_wait.status is PutMessageStatus.PUT_OK
        waiting = asyncio.ensure_future(store.put_messages([message(2)]))
        (timed_out,) = await asyncio.wait_for(waiting, 5)
        assert timed_out.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert timed_out.msg_id  # stored all the same
        release.set()
        got = store.get_messages("TopicTest", 0, 0, 10)
        assert got.message_count == 1  # message(2) went to queue 0
        (later,) = await asyncio.wait_for(store.put_messages([message(3)]), 5)
        assert later.status is PutMessageStatus.PUT_OK
    finally:
        release.set()
        store.shutdown()


async def test_group_commit_rounds_nobody_waits_for_flush_at_the_async_cadence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SYNC_FLUSH slave: its replicated appends wait for no flush, so the group commit (a round every 10 ms) does
    not msync them until flush_interval_commit_log_ms has passed; shutdown flushes them all."""
    synced: list[int] = []
    _patch_commit_log_msync(monkeypatch, lambda _m, _s, _l: None, lambda m, s, n: synced.append(s + n))
    master = open_store(store_config(tmp_path / "m", FlushDiskType.SYNC_FLUSH, 64 * 1024))
    slave = open_store(store_config(tmp_path / "s", FlushDiskType.SYNC_FLUSH, 64 * 1024, broker_role=BrokerRole.SLAVE,
                                    flush_interval_commit_log_ms=60_000))  # fmt: skip
    try:
        await master.put_messages([message(i) for i in range(20)])
        end = master.commit_log.max_offset
        synced.clear()
        assert slave.append_replicated(0, master.commit_log.get_message(0, end) or b"")
        await asyncio.sleep(0.3)  # about 30 group commit rounds
        assert synced == []
        assert slave.commit_log.mapped_file_queue.flushed_where == 0
    finally:
        master.shutdown()
        slave.shutdown()
    assert slave.commit_log.mapped_file_queue.flushed_where == end


async def test_failed_msync_makes_the_store_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fail(_m: MappedFile, start: int, _length: int) -> None:
        calls.append(start)
        raise OSError(errno.EIO, "injected I/O error")

    _patch_commit_log_msync(monkeypatch, fail)
    config = store_config(tmp_path, FlushDiskType.SYNC_FLUSH, 64 * 1024)
    store = open_store(config)
    try:
        (first,) = await asyncio.wait_for(store.put_messages([message(1)]), 5)
        assert first.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "read-only" in first.remark
        assert not store.is_writeable
        (second,) = await store.put_messages([message(2)])
        assert second.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        seen = len(calls)
        await asyncio.sleep(0.2)  # twenty group-commit rounds
        assert len(calls) == seen == 1  # never retried
        assert store.get_messages("TopicTest", 1, 0, 10).message_count == 1  # reads still work
    finally:
        store.shutdown()
    assert config.abort_path.exists()  # not a clean stop: the next start recovers


async def test_async_flush_waits_for_dirty_pages_then_flushes(tmp_path: Path) -> None:
    config = store_config(
        tmp_path,
        FlushDiskType.ASYNC_FLUSH,
        1024 * 1024,
        flush_interval_commit_log_ms=20,
        flush_commit_log_thorough_interval_ms=60_000,
    )
    store = open_store(config)
    mfq = store.commit_log.mapped_file_queue
    try:
        (result,) = await store.put_messages([message(1)])
        assert result.status is PutMessageStatus.PUT_OK  # never waits
        await asyncio.sleep(0.2)  # ten rounds: fewer than 4 dirty pages, so no msync yet
        assert mfq.flushed_where == 0
        await store.put_messages([message(i) for i in range(2, 400)])  # > 4 pages
        end = store.commit_log.max_offset
        assert end > 8 * OS_PAGE_SIZE_BYTES
        # Flushed up to where fewer than 4 dirty pages remain (the flusher may have run mid-batch).
        assert await _wait_until(lambda: mfq.flushed_where > 0 and end - mfq.flushed_where < 4 * OS_PAGE_SIZE_BYTES)
    finally:
        store.shutdown()


async def test_async_thorough_flush_and_checkpoint(tmp_path: Path) -> None:
    config = store_config(
        tmp_path,
        FlushDiskType.ASYNC_FLUSH,
        1024 * 1024,
        flush_interval_commit_log_ms=20,
        flush_commit_log_thorough_interval_ms=100,
        flush_interval_consume_queue_ms=20,
        flush_consume_queue_thorough_interval_ms=100,
    )
    store = open_store(config)
    try:
        await store.put_messages([message(1)])
        end = store.commit_log.max_offset
        assert await _wait_until(lambda: store.commit_log.mapped_file_queue.flushed_where == end)
        checkpoint = store.checkpoint
        assert checkpoint is not None
        assert await _wait_until(lambda: checkpoint.dispatch_flushed_offset == end)
    finally:
        store.shutdown()
