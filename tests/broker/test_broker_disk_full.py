"""Disk full, for real: the store runs on a small file system the test mounts itself (tmpfs, else an ext4 loop
device). Puts are refused with SERVICE_NOT_AVAILABLE before anything is corrupted; once space is freed they
succeed again, and every acknowledged message stays intact (also after a restart)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_testkit import STORE_HOST
from mq_broker.store.checkpoint import StoreCheckpoint
from mq_broker.store.config import FlushDiskType, MessageStoreConfig
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.codec import decode_message, host_to_bytes

FS_SIZE_BYTES = 4 * 1024 * 1024
BODY_BYTES = 1024
BATCH = 16
MAX_BATCHES = 1_000
TOPIC = "DiskFullTopic"
DISK_RATIO = re.compile(r"the broker's disk is full \[CL:\s+(\d\.\d\d) CQ:\s+(\d\.\d\d) INDEX:\s+(-?\d\.\d\d)\]")


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, check=False)


@contextlib.contextmanager
def small_file_system() -> Iterator[Path]:
    """A fresh 4 MiB file system: tmpfs, else ext4 on a loop device; skipped (with the reasons) if neither mounts.

    Always unmounted (and the loop device detached) on the way out.
    """
    with tempfile.TemporaryDirectory(prefix="mq-diskfull-") as work:
        mount_point = Path(work) / "mnt"
        mount_point.mkdir()
        tmpfs = _run("mount", "-t", "tmpfs", "-o", f"size={FS_SIZE_BYTES}", "tmpfs", str(mount_point))
        loop_dev = ""
        if tmpfs.returncode != 0:
            loop_dev, loop_error = _mount_loop_device(Path(work) / "fs.img", mount_point)
            if not loop_dev:
                pytest.skip(f"cannot mount a small file system: tmpfs: {tmpfs.stderr.strip()}; loop: {loop_error}")
        try:
            yield mount_point
        finally:
            if _run("umount", str(mount_point)).returncode != 0:
                _run("umount", "-l", str(mount_point))
            if loop_dev:
                _run("losetup", "-d", loop_dev)


def _mount_loop_device(image: Path, mount_point: Path) -> tuple[str, str]:
    """(loop device, "") when an ext4 image is mounted at ``mount_point``, else ("", why not)."""
    with image.open("wb") as f:
        f.truncate(2 * FS_SIZE_BYTES)  # ext4 metadata takes a share; the test measures the ratio anyway
    attach = _run("losetup", "-f", "--show", str(image))
    if attach.returncode != 0:
        return "", f"losetup: {attach.stderr.strip()}"
    dev = attach.stdout.strip()
    for cmd in (("mkfs.ext4", "-q", "-F", "-m", "0", dev), ("mount", dev, str(mount_point))):
        done = _run(*cmd)
        if done.returncode != 0:
            _run("losetup", "-d", dev)
            return "", f"{cmd[0]}: {done.stderr.strip()}"
    return dev, ""


def fill(path: Path, size: int) -> None:
    """A filler file of ``size`` real bytes (allocated, not sparse)."""
    with path.open("wb") as f:
        os.posix_fallocate(f.fileno(), 0, size)


def fill_up(path: Path) -> None:
    """A filler file taking every block still free (allocated, not sparse)."""
    st = os.statvfs(path.parent)
    with path.open("wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)


def msg(i: int, queue_id: int, keys: int = 1) -> MessageExtBrokerInner:
    return MessageExtBrokerInner.build(
        topic=TOPIC,
        queue_id=queue_id,
        body=(f"{i:08d}".encode() * (BODY_BYTES // 8)),
        properties={"TAGS": "T", "KEYS": " ".join(f"k{i}-{k}" for k in range(keys))},
        born_timestamp_ms=1_700_000_000_000 + i,
        born_host=host_to_bytes("127.0.0.2", 5000),
    )


@dataclass(frozen=True)
class Acked:
    i: int
    queue_id: int
    result: PutMessageResult


# One small index file holds every key of the test (made by the first put, while space is plenty): a new index
# file that cannot be created fails the whole store until restart (IndexService, RocketMQ makeIndexFileError).
INDEX_SIZES = {"max_hash_slot_num": 1024, "max_index_num": 8 * 1024}


def store_cfg(root: Path, **kw: Any) -> MessageStoreConfig:
    for k, v in INDEX_SIZES.items():
        kw.setdefault(k, v)
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=256,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        flush_interval_consume_queue_ms=20,
        clean_resource_interval_ms=10,
        # No file may be deleted here: every acknowledged message must stay (cleaning has its own tests).
        disk_space_clean_forcibly_ratio=1.0,
        disk_max_used_space_ratio_percent=100,
        **kw,
    )


class Writer:
    """Puts batches of BATCH messages over two queues and remembers what was acknowledged."""

    def __init__(self, store: DefaultMessageStore, keys: int = 1) -> None:
        self.store = store
        self.keys = keys
        self.acked: list[Acked] = []
        self.next_i = 0

    async def put_batch(self) -> list[PutMessageResult]:
        ids = range(self.next_i, self.next_i + BATCH)
        self.next_i += BATCH
        results = await self.store.put_messages([msg(i, i % 2, self.keys) for i in ids])
        for i, r in zip(ids, results, strict=True):
            if r.status is PutMessageStatus.PUT_OK:
                self.acked.append(Acked(i, i % 2, r))
            else:
                assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE, r
        return results

    async def put_until_refused(self, *, wait_for_disk_check: bool) -> PutMessageResult:
        """Bounded: MAX_BATCHES batches. With ``wait_for_disk_check`` every batch is followed by a disk check."""
        service = self.store.clean_service
        for _ in range(MAX_BATCHES):
            results = await self.put_batch()
            refused = [r for r in results if not r.is_ok]
            if refused:
                return refused[0]
            if wait_for_disk_check:
                assert await asyncio.to_thread(service.wait_rounds, service.rounds + 2, 10.0)
        raise AssertionError(f"never refused after {MAX_BATCHES} batches")

    def assert_intact(self, store: DefaultMessageStore) -> None:
        """Every acknowledged message reads back byte-identical through the CommitLog and its ConsumeQueue;
        queue offsets are dense and nothing unacknowledged is in a queue.
        """
        for queue_id in (0, 1):
            mine = [a for a in self.acked if a.queue_id == queue_id]
            assert [a.result.queue_offset for a in mine] == list(range(len(mine)))
            assert store.get_max_offset_in_queue(TOPIC, queue_id) == len(mine)
            by_queue: list[bytes] = []
            offset = 0
            while offset < len(mine):
                got = store.get_messages(TOPIC, queue_id, offset, 64)
                assert got.messages, got.status
                by_queue.extend(got.messages)
                offset = got.next_begin_offset
            for a, raw_cq in zip(mine, by_queue, strict=True):
                raw = store.commit_log.get_message(a.result.wrote_offset, a.result.wrote_bytes)
                assert raw == raw_cq
                decoded = decode_message(raw, check_crc=True)
                assert decoded.body == msg(a.i, queue_id, self.keys).body
                assert decoded.queue_offset == a.result.queue_offset
                assert decoded.commit_log_offset == a.result.wrote_offset


async def test_disk_full_refuses_puts_then_resumes_when_space_frees() -> None:
    with small_file_system() as mount:
        fill(mount / "filler", FS_SIZE_BYTES // 2)
        store = DefaultMessageStore(store_cfg(mount / "store"), STORE_HOST)
        store.start()
        writer = Writer(store)
        try:
            refused = await writer.put_until_refused(wait_for_disk_check=True)
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            match = DISK_RATIO.search(refused.remark)
            assert match is not None, refused.remark
            assert float(match.group(1)) > 0.90
            assert refused.remark.startswith("service not available now.")
            assert store.clean_service.disk_full
            assert store.failure is None
            assert len(writer.acked) > 100
            writer.assert_intact(store)

            (mount / "filler").unlink()
            assert await asyncio.to_thread(store.clean_service.wait_rounds, store.clean_service.rounds + 2, 10.0)
            assert not store.clean_service.disk_full  # resumed by itself
            before = len(writer.acked)
            for _ in range(8):
                assert all(r.is_ok for r in await writer.put_batch())
            assert len(writer.acked) == before + 8 * BATCH
            writer.assert_intact(store)
        finally:
            await asyncio.to_thread(store.shutdown)
        reopened = DefaultMessageStore(store_cfg(mount / "store"), STORE_HOST)
        reopened.start()
        try:
            writer.assert_intact(reopened)
        finally:
            reopened.shutdown()


# "growing": the index entry region (2.4 MB) is allocated 1 MiB at a time while the disk fills, so ENOSPC can
# meet the index first; the reservation before the CommitLog append must refuse the put, not fail the store.
@pytest.mark.parametrize(
    ("index_max_num", "keys"), [(INDEX_SIZES["max_index_num"], 1), (120_000, 300)], ids=["index-small", "index-growing"]
)
async def test_no_space_for_a_new_file_refuses_puts_without_damage(index_max_num: int, keys: int) -> None:
    """The DISK_FULL check is off (ratio 1.0): the allocation of the next file itself meets ENOSPC."""
    with small_file_system() as mount:
        fill(mount / "filler", FS_SIZE_BYTES // 2)
        cfg = store_cfg(mount / "store", disk_space_warning_level_ratio=1.0, max_index_num=index_max_num)
        store = DefaultMessageStore(cfg, STORE_HOST)
        store.start()
        writer = Writer(store, keys)
        try:
            refused = await writer.put_until_refused(wait_for_disk_check=False)
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert "create mapped file failed" in refused.remark
            assert "No space left on device" in refused.remark
            assert store.failure is None
            writer.assert_intact(store)
            again = await writer.put_batch()  # still refused, still nothing damaged
            assert not all(r.is_ok for r in again)

            (mount / "filler").unlink()
            for _ in range(8):
                assert all(r.is_ok for r in await writer.put_batch())
            writer.assert_intact(store)
        finally:
            await asyncio.to_thread(store.shutdown)
        reopened = DefaultMessageStore(store_cfg(mount / "store", max_index_num=index_max_num), STORE_HOST)
        reopened.start()
        try:
            writer.assert_intact(reopened)
        finally:
            reopened.shutdown()


def test_a_new_checkpoint_owns_its_blocks_before_the_disk_fills() -> None:
    """A store that filled the disk before its flusher first wrote the checkpoint went read-only (the write of the
    checkpoint's first page met ENOSPC); the checkpoint's 4 KiB are now allocated when the file is created."""
    with small_file_system() as mount:
        checkpoint = StoreCheckpoint(mount / "store" / "checkpoint")
        try:
            fill_up(mount / "filler")
            checkpoint.confirm_phy_offset = 65_536
            checkpoint.dispatch_flushed_offset = 4_096
            checkpoint.flush()
        finally:
            checkpoint.close()
        reopened = StoreCheckpoint(mount / "store" / "checkpoint")
        try:
            assert reopened.existed
            assert (reopened.confirm_phy_offset, reopened.dispatch_flushed_offset) == (65_536, 4_096)
        finally:
            reopened.close()
