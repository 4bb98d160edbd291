"""MappedFileQueue: the ordered files of one logical byte stream (the CommitLog, or one ConsumeQueue).

Mirrors org.apache.rocketmq.store.MappedFileQueue. File ``i`` covers offsets
``[first.file_from_offset + i * size, ... + size)``, so finding the file of an offset is one division.

Threads: files are added (:meth:`create_next`) on the event loop; the flusher thread reads the list and calls
:meth:`flush`; the clean service thread takes expired files off the front (:meth:`remove_first_files`).
The list is never mutated in place once serving: adding and removing swap in a new list under ``_lock``,
so a reader's snapshot (``files = self.mapped_files``) stays consistent. Recovery (:meth:`load`,
:meth:`truncate_dirty_files`) runs before the flusher starts.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mq_common.logging import get_logger

from mq_broker.store.mapped_file import MappedFile, is_store_file_name, offset_to_file_name

if TYPE_CHECKING:
    from mq_broker.store.prefault import PrefaultService

# drop_page_cache_behind: fewer bytes due than this wait for the next flush (two syscalls per file per drop).
PAGE_CACHE_DROP_LEAST_BYTES: Final = 4 * 1024 * 1024

log = get_logger("mq_broker.store")


def _extend_short_last_file(path: Path, size: int) -> None:
    """A crash or a damaged copy can leave the LAST file shorter than its preallocated ``size``: grow it back with
    zeros (recovery then cuts the log where the valid records end). RocketMQ's MappedFileQueue#doLoad refuses to
    start instead. Any other file of the wrong size still fails :meth:`MappedFileQueue.load`. Raises OSError.
    """
    actual = path.stat().st_size
    if actual >= size:
        return
    log.warning("store_file_too_short_extended", path=str(path), size_bytes=actual, expected_bytes=size)
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.pwrite(fd, bytes(size - actual), actual)  # never sparse (see mapped_file._preallocate)
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFileQueue:
    """Files of ``mapped_file_size_bytes`` each under ``store_path``. Raises OSError on file errors."""

    def __init__(self, store_path: Path, mapped_file_size_bytes: int) -> None:
        assert mapped_file_size_bytes > 0
        self.store_path = store_path
        self.mapped_file_size_bytes = mapped_file_size_bytes
        self.mapped_files: list[MappedFile] = []
        self.flushed_where = 0
        # MessageStoreConfig.warmMapedFileEnable (CommitLog only): prefault each new file on a worker thread.
        self.warm_mapped_file_enable = False
        # PrefaultService keeping prefault_ahead_bytes past the write position mapped (None: off).
        self.prefault: PrefaultService | None = None
        self.prefault_ahead_bytes = 0
        self._prefault_at = 0
        self._lock = threading.Lock()
        # drop_page_cache_behind: the queue offset below which the flushed bytes were dropped from the page cache.
        self._page_cache_dropped_where = 0
        # Files created ahead by prepare_files_until (on disk, not yet in the queue); create_next hands them out.
        self._prepared: list[MappedFile] = []

    def load(self) -> None:
        """Map every existing file in name order; positions start at the file size (recovery lowers them).

        Raises OSError when a file has the wrong size or the files are not contiguous.
        """
        if not self.store_path.is_dir():
            return
        names = sorted(p.name for p in self.store_path.iterdir() if is_store_file_name(p.name))
        if names:
            _extend_short_last_file(self.store_path / names[-1], self.mapped_file_size_bytes)
        for name in names:
            mapped = MappedFile(self.store_path / name, self.mapped_file_size_bytes)
            if self.mapped_files and mapped.file_from_offset != self.mapped_files[-1].file_end_offset:
                mapped.close()
                raise OSError(f"{self.store_path}: file {name} does not follow the previous file")
            mapped.set_positions(self.mapped_file_size_bytes)
            self.mapped_files.append(mapped)
        if self.mapped_files:
            self.flushed_where = self.mapped_files[-1].file_end_offset

    @property
    def is_empty(self) -> bool:
        return not self.mapped_files

    def after_write(self) -> None:
        """Event loop, after appends: past the watermark, ask the PrefaultService to map the last file up to
        ``prefault_ahead_bytes`` beyond the write position (the next ask comes a quarter of that later)."""
        service = self.prefault
        files = self.mapped_files
        if service is None or not files:
            return
        last = files[-1]
        position = last.file_from_offset + last.wrote_position
        if position < self._prefault_at:
            return
        self._prefault_at = position + self.prefault_ahead_bytes // 4
        service.request(last, last.wrote_position + self.prefault_ahead_bytes)

    def last_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[-1] if files else None

    def first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def create_next(self, start_offset: int = 0) -> MappedFile:
        """Create the file after the last one (or at ``start_offset``, aligned down, when there is none)."""
        last = self.last_mapped_file()
        if last is None:
            from_offset = start_offset - start_offset % self.mapped_file_size_bytes
        else:
            from_offset = last.file_end_offset
        if self._prepared and self._prepared[0].file_from_offset == from_offset:
            mapped = self._prepared.pop(0)
        else:
            self.store_path.mkdir(parents=True, exist_ok=True)
            mapped = MappedFile(self.store_path / offset_to_file_name(from_offset), self.mapped_file_size_bytes)
        if last is None:
            self.flushed_where = from_offset
            self._page_cache_dropped_where = from_offset
        with self._lock:
            self.mapped_files = [*self.mapped_files, mapped]
        log.info("mapped_file_created", file=str(mapped.file_path), from_offset=from_offset)
        if self.warm_mapped_file_enable:
            threading.Thread(target=mapped.warm, name=f"WarmMappedFile-{mapped.file_path.name}", daemon=True).start()
        return mapped

    def prepare_files_until(self, end_offset: int) -> None:
        """Create now the files after the last one up to the one holding ``end_offset - 1``, kept aside until
        :meth:`create_next` needs them: a full disk then fails a put before anything is written. Event loop.
        Raises OSError (ENOSPC); files made before the failure stay prepared.
        """
        last = self.last_mapped_file()
        assert last is not None
        next_from = self._prepared[-1].file_end_offset if self._prepared else last.file_end_offset
        while next_from < end_offset:
            self.store_path.mkdir(parents=True, exist_ok=True)
            mapped = MappedFile(self.store_path / offset_to_file_name(next_from), self.mapped_file_size_bytes)
            self._prepared.append(mapped)
            next_from = mapped.file_end_offset

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file to append to: the last one, or a new one when there is none or it is full."""
        last = self.last_mapped_file()
        if last is None or last.is_full:
            return self.create_next(start_offset)
        return last

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None when it is outside every file. O(1)."""
        files = self.mapped_files
        if not files:
            return None
        first = files[0]
        if offset < first.file_from_offset:
            return None
        index = (offset - first.file_from_offset) // self.mapped_file_size_bytes
        if index >= len(files):
            return None
        return files[index]

    def min_offset(self) -> int:
        first = self.first_mapped_file()
        return first.file_from_offset if first is not None else 0

    def max_offset(self) -> int:
        """Offset of the next byte to be written."""
        last = self.last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def deletable_files(self) -> list[MappedFile]:
        """Files the clean service may delete, oldest first: every file but the last (the one being written)
        that is completely flushed (the flusher never touches it again). Any thread.
        """
        files = self.mapped_files
        flushed_where = self.flushed_where
        return [f for f in files[:-1] if f.file_end_offset <= flushed_where]

    def remove_first_files(self, files: Sequence[MappedFile]) -> None:
        """Take ``files`` (a prefix of the list, never the last file) out of the queue; the caller destroys
        them. Clean service thread. Mirrors MappedFileQueue#deleteExpiredFile.
        """
        if not files:
            return
        with self._lock:
            current = self.mapped_files
            count = len(files)
            assert count < len(current), "the file being written is never deleted"
            assert all(a is b for a, b in zip(current, files, strict=False)), "only the oldest files are deleted"
            self.mapped_files = current[count:]

    def flush(self, least_pages: int = 0) -> int:
        """Flush from ``flushed_where`` through every written file; returns the new ``flushed_where``.

        Flusher thread only. ``least_pages`` applies to the file being written; full files always flush.
        Raises OSError when msync fails.
        """
        while True:
            mapped = self.find_mapped_file_by_offset(self.flushed_where)
            if mapped is None:
                return self.flushed_where
            flushed = mapped.flush(least_pages)
            self.flushed_where = mapped.file_from_offset + flushed
            if flushed < mapped.file_size_bytes:
                return self.flushed_where

    def drop_page_cache_behind(self, keep_bytes: int, least_bytes: int = PAGE_CACHE_DROP_LEAST_BYTES) -> int:
        """Drop from the page cache the flushed bytes more than ``keep_bytes`` behind ``flushed_where``, once at
        least ``least_bytes`` are due (MappedFile#drop_page_cache on each file concerned); returns the bytes
        dropped. New writes then get the freed pages: on a VM that hands free memory back to its host, a page
        it never used (or handed back) costs ~10 us per 4 KiB to fault in, 15 x a page it reuses, and the kernel
        keeps written pages cached until memory runs short, so without this every new CommitLog page is one the
        host must supply. Reads of dropped bytes come from the disk. Flusher thread, after a flush. Raises
        OSError when posix_fadvise fails (FlushService then turns recycling off). No RocketMQ counterpart.
        """
        target = self.flushed_where - keep_bytes
        if target - self._page_cache_dropped_where < least_bytes:
            return 0
        dropped = 0
        for mapped in self.mapped_files:
            if mapped.file_from_offset >= target:
                break
            if mapped.file_end_offset > self._page_cache_dropped_where:
                dropped += mapped.drop_page_cache(target - mapped.file_from_offset)
        self._page_cache_dropped_where = target
        return dropped

    def truncate_dirty_files(self, offset: int, *, zero_tail: bool = True, zero_run_stop_bytes: int = 0) -> None:
        """Drop everything at or after ``offset``: the file holding it ends there, later files are deleted.

        With ``zero_tail`` the rest of that file is cleared (after a crash it may hold a torn or stale record),
        up to the first run of ``zero_run_stop_bytes`` zeros when that is > 0 (MappedFile#zero_from).
        Mirrors MappedFileQueue#truncateDirtyFiles. Recovery only (before the flusher runs).
        """
        keep: list[MappedFile] = []
        for mapped in self.mapped_files:
            if mapped.file_end_offset <= offset:
                keep.append(mapped)
            elif mapped.file_from_offset <= offset:
                mapped.set_positions(offset - mapped.file_from_offset)
                if zero_tail:
                    mapped.zero_from(mapped.wrote_position, zero_run_stop_bytes)
                keep.append(mapped)
            else:
                mapped.destroy()
        for prepared in self._prepared:
            prepared.destroy()
        self._prepared = []
        self.mapped_files = keep
        self.flushed_where = keep[-1].file_from_offset + keep[-1].flushed_position if keep else 0

    def truncate_to(self, offset: int, *, zero_run_stop_bytes: int = 0) -> None:
        """While serving: :meth:`truncate_dirty_files` at ``offset`` (the rest of the file holding it zeroed and
        msynced before any later file is deleted, so a crash midway still recovers to ``offset``), then the
        prefault and page-cache watermarks brought back to the new end. The caller keeps the flusher and the
        clean service off the queue meanwhile. Blocking (worker thread). Raises OSError.
        Mirrors MappedFileQueue#truncateDirtyFiles as DefaultMessageStore#truncateFiles uses it.
        """
        self.truncate_dirty_files(offset, zero_tail=True, zero_run_stop_bytes=zero_run_stop_bytes)
        end = self.max_offset()
        self._prefault_at = min(self._prefault_at, end)
        self._page_cache_dropped_where = min(self._page_cache_dropped_where, self.flushed_where)
        last = self.last_mapped_file()
        if last is not None:
            last.page_cache_dropped_until = min(last.page_cache_dropped_until, last.wrote_position)

    def close(self) -> None:
        for mapped in [*self.mapped_files, *self._prepared]:
            mapped.close()

    def destroy(self) -> None:
        for mapped in [*self.mapped_files, *self._prepared]:
            mapped.destroy()
        self.mapped_files = []
        self._prepared = []
        self.flushed_where = 0
