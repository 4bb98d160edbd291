"""PrefaultService: pages past the write position get mapped on its own thread, bytes unchanged, and a request
beyond a file's end stops at the end."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker_testkit import STORE_HOST, message, store_config
from mq_broker.store.config import FlushDiskType
from mq_broker.store.mapped_file import MappedFile
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.store.msync import populate_write
from mq_broker.store.prefault import PrefaultService
from mq_common.codec import iter_messages

FILE_BYTES = 256 * 1024


async def wait_until(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``check`` (the PrefaultService thread works meanwhile) without blocking the event loop."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_store_writes_are_prefaulted_ahead_and_bytes_stay(tmp_path: Path) -> None:
    cfg = store_config(
        tmp_path,
        FlushDiskType.ASYNC_FLUSH,
        FILE_BYTES,
        prefault_ahead_commit_log_bytes=64 * 1024,
        prefault_ahead_consume_queue_bytes=4096,
        cq_units=1024,  # 20 KiB ConsumeQueue files
    )
    store = DefaultMessageStore(cfg, STORE_HOST)
    store.start()
    try:
        service = store.prefault_service
        assert service is not None
        results = await store.put_messages([message(i) for i in range(20)])
        assert all(r.is_ok for r in results)
        last = store.commit_log.mapped_file_queue.mapped_files[-1]
        ahead = last.wrote_position + 64 * 1024
        assert await wait_until(lambda: last.populated_until >= ahead), (last.populated_until, ahead)
        assert service.populated_bytes >= 64 * 1024
        cq = store.find_consume_queue("TopicTest", 0)
        assert cq is not None
        cq_file = cq.mapped_file_queue.mapped_files[-1]
        assert await wait_until(lambda: cq_file.populated_until >= 4096)
        got = store.get_messages("TopicTest", 0, 0, 32)  # prefaulting changed no byte: the records read back
        bodies = [m.body for m in iter_messages(b"".join(got.messages))]
        assert bodies == [f"body-{i}".encode() * 3 for i in range(0, 20, 2)]
    finally:
        store.shutdown()


def test_a_request_past_the_file_end_stops_at_the_end(tmp_path: Path) -> None:
    mapped = MappedFile(tmp_path / "00000000000000000000", 64 * 1024)
    mapped.append(b"\x01" * 100)
    service = PrefaultService()
    worker = threading.Thread(target=service._populate, args=(mapped, 10 * 64 * 1024))
    try:
        worker.start()
        worker.join(10.0)
        assert not worker.is_alive(), "populate must end at the file's end"
        if mapped.populated_until == 0:  # no MADV_POPULATE_WRITE here (older kernel): ending is all there is
            assert populate_write(0, 0, 0) is False
            return
        assert mapped.populated_until == 64 * 1024
        assert mapped.read(0, 101) == b"\x01" * 100 + b"\x00"
        mapped.close()
        assert mapped.populate(64 * 1024) is False  # a closed file is never touched
    finally:
        mapped.close()


def test_populate_starts_at_the_write_position_and_ends(tmp_path: Path) -> None:
    """Pages behind the write position are the writer's (and may have left the page cache since): a request
    that starts behind it skips to it, and the service's loop still ends (it once spun when the writer was more
    than a chunk ahead)."""
    mib = 1024 * 1024
    mapped = MappedFile(tmp_path / "00000000000000000000", 8 * mib)
    mapped.append(b"\x02" * (3 * mib + 100))
    service = PrefaultService()
    worker = threading.Thread(target=service._populate, args=(mapped, 5 * mib))
    try:
        assert mapped.populate(mib) is True  # wholly behind the write position: nothing to map
        assert mapped.populated_until == 3 * mib
        worker.start()
        worker.join(10.0)
        assert not worker.is_alive(), "populate must end once the request is covered"
        if populate_write(0, 0, 0) is False and mapped.populated_until == 3 * mib:
            return  # no MADV_POPULATE_WRITE here (older kernel)
        assert mapped.populated_until == 5 * mib
        assert mapped.read(3 * mib, 101) == b"\x02" * 100 + b"\x00"
    finally:
        service.shutdown()
        mapped.close()
