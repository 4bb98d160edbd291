"""Page cache recycling: flushed CommitLog bytes far enough behind the flush point leave the page cache (and read
back unchanged from the disk); nothing unflushed is dropped.

Residency is read with mincore(2) (for a shared file mapping it reports the file's pages in the page cache).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import mmap
import sys
import time
from pathlib import Path

import pytest
from broker_testkit import open_store, store_config
from mq_broker.store.config import FlushDiskType
from mq_broker.store.mapped_file import OS_PAGE_SIZE_BYTES, MappedFile, offset_to_file_name
from mq_broker.store.mapped_file_queue import PAGE_CACHE_DROP_LEAST_BYTES, MappedFileQueue
from mq_broker.store.message import MessageExtBrokerInner
from mq_broker.store.msync import mapping_address
from mq_common.codec import host_to_bytes, iter_messages

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="madvise / posix_fadvise / mincore are Linux calls")

MIB = 1024 * 1024
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_LIBC.mincore.restype = ctypes.c_int


def resident_pages(mm: mmap.mmap, start: int, end: int) -> list[bool]:
    """Whether each page of bytes [start, end) of the shared file mapping ``mm`` is in the page cache."""
    pages = (end - start) // OS_PAGE_SIZE_BYTES
    vec = ctypes.create_string_buffer(pages)
    assert _LIBC.mincore(mapping_address(mm) + start, end - start, vec) == 0, ctypes.get_errno()
    return [bool(b & 1) for b in vec.raw]


def big_message(i: int, body_bytes: int = 16 * 1024) -> MessageExtBrokerInner:
    return MessageExtBrokerInner.build(
        topic="TopicTest",
        queue_id=0,
        body=i.to_bytes(4, "big") * (body_bytes // 4),
        properties={"TAGS": "TagA"},
        born_timestamp_ms=1_700_000_000_000 + i,
        born_host=host_to_bytes("127.0.0.2", 5000),
    )


def pattern(size: int, seed: int) -> bytes:
    return bytes((seed + i * 7) % 251 for i in range(256)) * (size // 256)


def test_drop_page_cache_keeps_the_bytes_and_never_drops_past_the_flushed_position(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / offset_to_file_name(0), 8 * MIB)
    try:
        data = pattern(8 * MIB, 3)
        mapped.append(data[: 4 * MIB])
        mapped.flush()
        mapped.append(data[4 * MIB :])  # written, not flushed
        assert all(resident_pages(mapped.buffer, 0, 8 * MIB))
        assert mapped.drop_page_cache(8 * MIB) == 4 * MIB  # stops at flushed_position
        assert mapped.page_cache_dropped_until == 4 * MIB
        assert not any(resident_pages(mapped.buffer, 0, 4 * MIB))
        assert all(resident_pages(mapped.buffer, 4 * MIB, 8 * MIB))
        assert mapped.drop_page_cache(8 * MIB) == 0  # nothing new flushed
        mapped.flush()
        assert mapped.drop_page_cache(6 * MIB + 100) == 2 * MIB  # rounded down to a page
        assert mapped.read(0, 8 * MIB) == data  # dropped pages read back from the disk
    finally:
        mapped.close()
    assert mapped.drop_page_cache(8 * MIB) == 0  # closed: nothing touched


def test_queue_drops_what_is_more_than_keep_bytes_behind_the_flush_point(tmp_path: Path) -> None:
    mfq = MappedFileQueue(tmp_path, 4 * MIB)
    try:
        data = pattern(20 * MIB, 5)
        for pos in range(0, len(data), MIB):
            mfq.get_last_mapped_file().append(data[pos : pos + MIB])
        mfq.flush()
        assert mfq.flushed_where == 20 * MIB
        assert mfq.drop_page_cache_behind(keep_bytes=6 * MIB, least_bytes=MIB) == 14 * MIB
        files = mfq.mapped_files
        assert [f.page_cache_dropped_until for f in files] == [4 * MIB, 4 * MIB, 4 * MIB, 2 * MIB, 0]
        assert not any(resident_pages(files[2].buffer, 0, 4 * MIB))
        assert all(resident_pages(files[3].buffer, 2 * MIB, 4 * MIB))
        assert mfq.drop_page_cache_behind(keep_bytes=6 * MIB, least_bytes=MIB) == 0  # nothing more due
        assert b"".join(f.read(0, 4 * MIB) for f in files) == data
    finally:
        mfq.close()


async def _wait_until_dropped(first: MappedFile, limit_s: float = 10.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if first.page_cache_dropped_until > 0:
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.mark.parametrize("mode", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
async def test_the_flusher_recycles_the_commit_log_page_cache_and_reads_still_work(
    tmp_path: Path, mode: FlushDiskType
) -> None:
    body_bytes = 16 * 1024
    count = (PAGE_CACHE_DROP_LEAST_BYTES + 3 * MIB) // body_bytes
    store = open_store(store_config(tmp_path, mode, 64 * MIB, cq_units=4096, page_cache_keep_bytes=MIB))
    try:
        msgs = [big_message(i, body_bytes) for i in range(count)]
        results = await store.put_messages(msgs)
        assert all(r.is_ok for r in results)
        first = store.commit_log.mapped_file_queue.mapped_files[0]
        assert await _wait_until_dropped(first)
        dropped = first.page_cache_dropped_until
        assert dropped <= first.flushed_position - MIB
        assert not any(resident_pages(first.buffer, 0, dropped))
        got = store.get_messages("TopicTest", 0, 0, 32)  # the first messages now come from the disk
        bodies = [m.body for m in iter_messages(b"".join(got.messages))]
        assert len(bodies) > 0
        assert bodies == [m.body for m in msgs[: len(bodies)]]
    finally:
        store.shutdown()


async def test_with_recycling_off_the_page_cache_stays(tmp_path: Path) -> None:
    store = open_store(
        store_config(
            tmp_path, FlushDiskType.SYNC_FLUSH, 64 * MIB, page_cache_recycle_enable=False, page_cache_keep_bytes=0
        )
    )
    try:
        msgs = [big_message(i) for i in range((PAGE_CACHE_DROP_LEAST_BYTES + MIB) // (16 * 1024))]
        assert all(r.is_ok for r in await store.put_messages(msgs))
        first = store.commit_log.mapped_file_queue.mapped_files[0]
        assert first.flushed_position >= PAGE_CACHE_DROP_LEAST_BYTES
        assert not await _wait_until_dropped(first, limit_s=0.5)
        assert all(resident_pages(first.buffer, 0, first.flushed_position - first.flushed_position % 4096))
    finally:
        store.shutdown()
