"""MappedFile: one preallocated, fixed-size, memory-mapped store file.

Mirrors org.apache.rocketmq.store.logfile.DefaultMappedFile. The file is named by its start offset in the
queue it belongs to (20-digit zero-padded decimal, ``00000000001073741824``), preallocated with
``posix_fallocate`` (so a full disk fails at creation, not as SIGBUS on a later write) and mapped with a
shared ``mmap.mmap``.

Threads: :meth:`append`, :meth:`write_at` and :meth:`read` run on the event loop (one writer); a write is a
memcpy into the page cache. :meth:`flush` runs only on the flusher thread: it msyncs the dirty range through
libc so the GIL is released during the disk wait (CPython 3.11's ``mmap.flush`` keeps the GIL and would
stall the loop for the whole msync). ``wrote_position`` only grows while serving, so the flusher reads a
consistent snapshot of it.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from pathlib import Path
from typing import ClassVar, Final

from mq_broker.store.msync import is_resident, mapping_address, msync, populate_write, unmap_pages

OS_PAGE_SIZE_BYTES: Final = mmap.PAGESIZE
FILE_NAME_DIGITS: Final = 20
_ZERO_CHUNK_BYTES: Final = 1024 * 1024
_ZERO_CHUNK: Final = bytes(_ZERO_CHUNK_BYTES)
_WARM_CHUNK_BYTES: Final = 4 * 1024 * 1024
# Linux 5.14+: populate page tables writable without writing (madvise(2)); Python 3.11 has no constant for it.
_MADV_POPULATE_WRITE: Final = 23


def offset_to_file_name(offset: int) -> str:
    """UtilAll#offset2FileName: 20-digit zero-padded decimal."""
    assert offset >= 0
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def is_store_file_name(name: str) -> bool:
    return len(name) == FILE_NAME_DIGITS and name.isdigit()


class MappedFile:
    """A preallocated file of ``file_size_bytes`` mapped in memory.

    ``wrote_position``: bytes written (the next append goes there). ``flushed_position``: bytes known to be on
    disk. Raises OSError when the file cannot be created, preallocated or mapped.

    Holds one file descriptor: the one Python's mmap keeps (a dup of the descriptor it was given); the one used to
    create and map the file is closed at once, so a store of many small files (tests, tiny brokers) does not run
    out of descriptors at half the process limit. :meth:`append_by_write` opens a second one until the file is full
    or closed.
    """

    __slots__ = (
        "_address",
        "_append_fd",
        "_close_lock",
        "_closed",
        "_mm",
        "file_from_offset",
        "file_path",
        "file_size_bytes",
        "flushed_position",
        "page_cache_dropped_until",
        "populated_until",
        "wrote_position",
    )
    # msync calls made by every MappedFile of the process (benchmark instrumentation; flusher thread only).
    msync_calls: ClassVar[int] = 0

    def __init__(self, file_path: Path, file_size_bytes: int) -> None:
        assert file_size_bytes > 0
        assert is_store_file_name(file_path.name), file_path
        self.file_path = file_path
        self.file_size_bytes = file_size_bytes
        self.file_from_offset = int(file_path.name)
        self.wrote_position = 0
        self.flushed_position = 0
        exists = file_path.exists()
        fd = os.open(file_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if exists:
                actual = os.fstat(fd).st_size
                if actual != file_size_bytes:
                    raise OSError(errno.EINVAL, f"{file_path}: size {actual} bytes, expected {file_size_bytes}")
            else:
                _preallocate(fd, file_size_bytes)
            self._mm = mmap.mmap(fd, file_size_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if not exists:
                file_path.unlink(missing_ok=True)
            raise
        os.close(fd)  # the mapping keeps its own descriptor
        self._append_fd = -1  # append_by_write's descriptor, open while it fills the file
        self._closed = False
        self._address = mapping_address(self._mm)
        # PrefaultService: bytes from the start known to be prefaulted; the lock keeps close() out of a populate.
        self.populated_until = 0
        # drop_page_cache: bytes from the start no longer kept in the page cache (flusher thread).
        self.page_cache_dropped_until = 0
        self._close_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MappedFile({self.file_path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    @property
    def remaining_bytes(self) -> int:
        return self.file_size_bytes - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size_bytes

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size_bytes

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at ``wrote_position`` and advance it; returns the position written. Event loop only."""
        pos = self.wrote_position
        end = pos + len(data)
        assert end <= self.file_size_bytes, (self.file_path, pos, len(data))
        self._mm[pos:end] = data
        self.wrote_position = end
        return pos

    def append_by_write(self, data: bytes | bytearray | memoryview) -> int:
        """:meth:`append` through pwrite(2) on the file instead of a copy into the mapping, for bytes that arrive in
        large runs (a slave's replicated CommitLog): the page cache takes whole pages as they are, where a first
        store through the mapping has the kernel zero-fill each new page before the copy (half a slave's CPU per
        replicated byte in tests/bench/bench_ha.py). The mapping sees the same page cache, and msync flushes these
        pages like any other. The descriptor is opened on first use and closed once the file is full. Returns the
        position written. Raises OSError when the write fails (the position does not move). Event loop only.
        """
        pos = self.wrote_position
        end = pos + len(data)
        assert end <= self.file_size_bytes, (self.file_path, pos, len(data))
        if self._append_fd < 0:
            self._append_fd = os.open(self.file_path, os.O_WRONLY)
        view = memoryview(data)
        done = 0
        while done < len(view):
            done += os.pwrite(self._append_fd, view[done:], pos + done)
        self.wrote_position = end
        if end == self.file_size_bytes:
            self._close_append_fd()
        return pos

    def _close_append_fd(self) -> None:
        fd, self._append_fd = self._append_fd, -1
        if fd >= 0:
            os.close(fd)

    def append_record(self, record: bytes) -> int:
        """:meth:`append` for a CommitLog record: its first 8 bytes (TOTALSIZE, MAGICCODE) are written last, so a
        process killed during the copy leaves no magic code and recovery cuts the log there instead of reading
        a record whose tail (properties) was never written. Returns the position written. Event loop only."""
        pos = self.wrote_position
        end = pos + len(record)
        assert end <= self.file_size_bytes, (self.file_path, pos, len(record))
        self._mm[pos + 8 : end] = record[8:]
        self._mm[pos : pos + 8] = record[:8]
        self.wrote_position = end
        return pos

    @property
    def buffer(self) -> mmap.mmap:
        """The writable shared mapping (the CommitLog's native append writes into it, then sets
        ``wrote_position``). Event loop only; invalid after :meth:`close`."""
        return self._mm

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at ``pos`` without moving the positions (recovery, tests)."""
        assert pos >= 0
        assert pos + len(data) <= self.file_size_bytes
        self._mm[pos : pos + len(data)] = data

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes at ``pos`` (clamped to the file); ``b""`` once the file is destroyed (the
        clean service deleted it under a reader that still held it). Any thread.
        """
        end = min(pos + size, self.file_size_bytes)
        try:
            return self._mm[pos:end]
        except ValueError:  # mmap closed: the copy runs under the GIL, so it is never torn by the unmap
            return b""

    def read_into(self, pos: int, out: memoryview) -> int:
        """Copy the bytes at ``pos`` into ``out`` (at most ``len(out)``, clamped to the file) with one memcpy and no
        new object; returns the count, 0 once the file is destroyed. The mapping is exported only for the copy (a
        close meanwhile raises BufferError: :meth:`destroy`'s caller retries later). Any thread."""
        count = max(0, min(len(out), self.file_size_bytes - pos))
        try:
            with memoryview(self._mm) as mapping:
                out[:count] = mapping[pos : pos + count]
        except ValueError:  # mmap closed
            return 0
        return count

    @property
    def is_closed(self) -> bool:
        return self._closed

    def last_modified_s(self) -> float:
        """The file's modification time (st_mtime, seconds since the epoch). Mirrors getLastModifiedTimestamp.

        Raises OSError when the file is gone.
        """
        return os.stat(self.file_path).st_mtime

    def warm(self) -> None:
        """Prefault every page writable without changing a byte (MADV_POPULATE_WRITE, else a read of every
        page), in chunks so other threads get the GIL in between. Safe while the loop appends. Blocking: run it
        on a worker thread. Mirrors DefaultMappedFile#warmMappedFile (which writes a 0 per page before the file
        is handed out; prefaulting without writing lets the warm-up overlap the first appends).
        """
        pos = 0
        while pos < self.file_size_bytes and not self.is_closed:
            length = min(_WARM_CHUNK_BYTES, self.file_size_bytes - pos)
            try:
                _prefault(self._mm, pos, length)
            except ValueError:  # destroyed meanwhile
                return
            pos += length

    def is_able_to_flush(self, least_pages: int) -> bool:
        """MappedFile#isAbleToFlush: a full file always; else at least ``least_pages`` dirty pages."""
        wrote = self.wrote_position
        if self.flushed_position >= wrote:
            return False
        if self.is_full or least_pages <= 0:
            return True
        return (wrote // OS_PAGE_SIZE_BYTES) - (self.flushed_position // OS_PAGE_SIZE_BYTES) >= least_pages

    def flush(self, least_pages: int = 0) -> int:
        """msync the dirty range when :meth:`is_able_to_flush`; returns ``flushed_position``. Flusher thread only.

        Raises OSError when msync fails (the caller fails the store; a failed msync is never retried).
        """
        if not self.is_able_to_flush(least_pages):
            return self.flushed_position
        wrote = self.wrote_position
        start = (self.flushed_position // OS_PAGE_SIZE_BYTES) * OS_PAGE_SIZE_BYTES
        self._msync(start, wrote - start)
        self.flushed_position = wrote
        return wrote

    def _msync(self, start: int, length: int) -> None:
        if length <= 0:
            return
        MappedFile.msync_calls += 1
        msync(self._mm, self._address, start, length, self.file_path)

    def set_positions(self, position: int) -> None:
        """Recovery: wrote = flushed = ``position``."""
        assert 0 <= position <= self.file_size_bytes
        self.wrote_position = position
        self.flushed_position = position

    def zero_from(self, position: int, zero_run_stop_bytes: int = 0) -> None:
        """Clear every non-zero byte from ``position`` to the end (recovery drops a torn tail this way, so no
        stale record past the new end can be mistaken for a valid one after a later crash). Blocking.

        With ``zero_run_stop_bytes`` > 0 it stops at the first run of at least that many zero bytes: the file is
        written front to back and no record holds such a run when the bound exceeds the largest record, so
        nothing written lies past it. This keeps recovery of a barely used 1 GiB file from reading it all.
        """
        pos = position
        zero_run = 0
        while pos < self.file_size_bytes:
            end = min(pos + _ZERO_CHUNK_BYTES, self.file_size_bytes)
            if self._mm[pos:end] != _ZERO_CHUNK[: end - pos]:
                self._mm[pos:end] = _ZERO_CHUNK[: end - pos]
                zero_run = 0
            else:
                zero_run += end - pos
            pos = end
            if 0 < zero_run_stop_bytes <= zero_run:
                break
        start = (position // OS_PAGE_SIZE_BYTES) * OS_PAGE_SIZE_BYTES
        self._msync(start, pos - start)

    def close(self) -> None:
        """Unmap and close; the flusher must be stopped first. Idempotent. Waits for a populate in progress."""
        with self._close_lock:
            if self._closed:
                return
            self._close_append_fd()
            self._mm.close()
            self._closed = True

    def populate(self, until_position: int) -> bool:
        """Prefault the pages from ``populated_until`` up to ``until_position`` writable, bytes unchanged
        (msync.populate_write, GIL released). False when the file is closed or the call is not available.
        PrefaultService thread only.
        """
        with self._close_lock:
            if self._closed:
                return False
            # Never behind the write position: the writer has mapped those pages already (and the flusher may
            # have dropped them from the page cache since); they count as populated.
            wrote = self.wrote_position
            start = max(self.populated_until, wrote - wrote % OS_PAGE_SIZE_BYTES)
            self.populated_until = start
            start -= start % OS_PAGE_SIZE_BYTES
            end = min(until_position, self.file_size_bytes)
            if end <= start:
                return True
            if not populate_write(self._address, start, end - start):
                return False
            self.populated_until = end
            return True

    def drop_page_cache(self, until_position: int) -> int:
        """Drop the flushed bytes from ``page_cache_dropped_until`` up to ``until_position`` (rounded down to a
        page, never past ``flushed_position``) from the page cache: unmap them here (unmap_pages), then
        POSIX_FADV_DONTNEED. The bytes stay on disk; a later read maps them again. Returns the bytes dropped
        (0 when closed or when madvise is not available); raises OSError when posix_fadvise fails. Flusher
        thread; holds the close lock, so a file being closed or destroyed is never touched. No RocketMQ
        counterpart (DefaultMappedFile leaves its pages to the kernel).
        """
        with self._close_lock:
            if self._closed:
                return 0
            start = self.page_cache_dropped_until
            end = min(until_position, self.flushed_position)
            end -= end % OS_PAGE_SIZE_BYTES
            if end <= start or not unmap_pages(self._address, start, end - start):
                return 0
            _drop_file_cache(self.file_path, start, end - start)
            self.page_cache_dropped_until = end
            return end - start

    def is_in_page_cache(self, pos: int, size: int) -> bool:
        """Bytes [pos, pos + size) are in the page cache (reading them costs no disk I/O); False when the file is
        closed, True when the OS cannot tell (msync.is_resident). Any thread. Mirrors
        SelectMappedBufferResult#isInMem (MappedFile#isLoaded)."""
        with self._close_lock:
            if self._closed:
                return False
            resident = is_resident(self._address, pos, size)
        return True if resident is None else resident

    def destroy(self) -> None:
        """Close and delete the file. Raises BufferError while a buffer export pins the mapping (the caller
        retries later) and OSError on an unlink failure.
        """
        self.close()
        self.file_path.unlink(missing_ok=True)


def _drop_file_cache(path: Path, offset: int, length: int) -> None:
    """POSIX_FADV_DONTNEED for ``length`` bytes of ``path`` from ``offset``, through a descriptor opened for the
    call (the MappedFile keeps none of its own). A file already deleted has nothing left to drop."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _preallocate(fd: int, size: int) -> None:
    """Reserve every block of the file, so a later mmap write can never SIGBUS on a full file system.

    ``posix_fallocate``; where the file system does not support it, zeros are written (never a sparse
    ``ftruncate``). Raises OSError (ENOSPC when the disk is full).
    """
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    pos = 0
    while pos < size:
        pos += os.pwrite(fd, _ZERO_CHUNK[: min(_ZERO_CHUNK_BYTES, size - pos)], pos)
    os.fsync(fd)


def _prefault(mm: mmap.mmap, pos: int, length: int) -> None:
    try:
        mm.madvise(_MADV_POPULATE_WRITE, pos, length)
    except OSError:  # older kernel: read one byte per page (maps it; the first write is a minor fault)
        for page in range(pos, pos + length, OS_PAGE_SIZE_BYTES):
            _ = mm[page]
