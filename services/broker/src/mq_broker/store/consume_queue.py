"""ConsumeQueue: the per topic/queueId index of CommitLog positions (the table of contents of the CommitLog).

Mirrors org.apache.rocketmq.store.ConsumeQueue. Each unit is 20 bytes, big-endian::

    0   8   commit log offset (i64)
    8   4   message size in bytes (i32)
    12  8   tag hash code (i64; Java String#hashCode of TAGS, 0 without tags)

Unit ``n`` (the queue offset) lives at byte ``n * 20``, files hold ``mapped_file_size_consume_queue_units``
units and are named by their start byte offset, under ``consumequeue/<topic>/<queueId>/``. Lookup is O(1).

Threads: units are written on the event loop right after the CommitLog put (dispatch); the flusher thread
flushes them periodically (:meth:`flush`); the clean service thread moves the min offset up and deletes files
below the CommitLog's min offset (:meth:`correct_min_offset`, :meth:`delete_expired_files`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

from mq_broker.store.config import CQ_UNIT_SIZE_BYTES
from mq_broker.store.mapped_file import MappedFile
from mq_broker.store.mapped_file_queue import MappedFileQueue

_UNIT_FORMAT: Final = "qiq"
CQ_UNIT: Final = struct.Struct(">" + _UNIT_FORMAT)
assert CQ_UNIT.size == CQ_UNIT_SIZE_BYTES
# ConsumeQueue#fillPreBlank writes (0, Integer.MAX_VALUE, 0) where units are missing.
BLANK_UNIT_SIZE: Final = 0x7FFFFFFF
_BLANK_UNIT: Final = CQ_UNIT.pack(0, BLANK_UNIT_SIZE, 0)
_SCAN_CHUNK_BYTES: Final = 4096 * CQ_UNIT.size


class CqUnit(NamedTuple):
    """One ConsumeQueue unit. Mirrors org.apache.rocketmq.store.queue.CqUnit."""

    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def is_blank(self) -> bool:
        return self.size == BLANK_UNIT_SIZE


def _valid_unit(phys: int, size: int) -> bool:
    return phys >= 0 and size > 0


class ConsumeQueue:
    """Units of one topic/queueId. Raises OSError on file errors."""

    def __init__(self, topic: str, queue_id: int, root_dir: Path, units_per_file: int) -> None:
        assert units_per_file > 0
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_queue = MappedFileQueue(root_dir / topic / str(queue_id), units_per_file * CQ_UNIT.size)
        self.max_physic_offset = -1
        self.min_logic_offset_bytes = 0

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic}-{self.queue_id}, max={self.max_offset_in_queue})"

    # --- start-up -------------------------------------------------------------------------------------------

    def load(self) -> None:
        self.mapped_file_queue.load()

    def recover(self, *, zero_tail: bool) -> None:
        """Keep the leading valid units (offset >= 0, size > 0); the first invalid one ends the queue.

        ``zero_tail`` (after a crash) clears what follows. Mirrors ConsumeQueue#recover. Recovery only; blocking.
        """
        mfq = self.mapped_file_queue
        if mfq.is_empty:
            return
        index = max(0, len(mfq.mapped_files) - 3)
        end_logic = mfq.mapped_files[index].file_from_offset
        for mapped in mfq.mapped_files[index:]:
            count = self._valid_prefix_units(mapped)
            end_logic = mapped.file_from_offset + count * CQ_UNIT.size
            if end_logic < mapped.file_end_offset:
                break
        mfq.truncate_dirty_files(end_logic, zero_tail=zero_tail)
        self._correct_min_offset()
        self.max_physic_offset = self._last_physic_end()

    @staticmethod
    def _valid_prefix_units(mapped: MappedFile) -> int:
        count = 0
        for phys, size, _tags in CQ_UNIT.iter_unpack(mapped.read(0, mapped.file_size_bytes)):
            if not _valid_unit(phys, size):
                break
            count += 1
        return count

    def _correct_min_offset(self) -> None:
        first = self.mapped_file_queue.first_mapped_file()
        if first is None:
            self.min_logic_offset_bytes = 0
            return
        skip = 0
        for _phys, size, _tags in CQ_UNIT.iter_unpack(first.read(0, first.wrote_position)):
            if size != BLANK_UNIT_SIZE:
                break
            skip += 1
        self.min_logic_offset_bytes = first.file_from_offset + skip * CQ_UNIT.size

    def _last_physic_end(self) -> int:
        for mapped in reversed(self.mapped_file_queue.mapped_files):
            raw = mapped.read(0, mapped.wrote_position)
            for i in range(len(raw) // CQ_UNIT.size - 1, -1, -1):
                phys, size, _tags = CQ_UNIT.unpack_from(raw, i * CQ_UNIT.size)
                if size != BLANK_UNIT_SIZE:
                    return int(phys + size)
        return -1

    def truncate_dirty_logic_files(self, physic_end: int, *, zero_tail: bool) -> None:
        """Drop units that point at or past ``physic_end`` (the CommitLog's valid end).

        Mirrors ConsumeQueue#truncateDirtyLogicFiles. Recovery only.
        """
        mfq = self.mapped_file_queue
        cut = mfq.min_offset()
        for mapped in reversed(mfq.mapped_files):
            raw = mapped.read(0, mapped.wrote_position)
            units = list(CQ_UNIT.iter_unpack(raw))
            first_dirty = next(
                (i for i, (phys, size, _t) in enumerate(units) if size != BLANK_UNIT_SIZE and phys + size > physic_end),
                None,
            )
            if first_dirty is None and units:
                cut = mapped.file_from_offset + len(units) * CQ_UNIT.size
                break
            cut = mapped.file_from_offset + (first_dirty or 0) * CQ_UNIT.size
            if first_dirty:
                break
        if cut < mfq.max_offset():
            mfq.truncate_dirty_files(cut, zero_tail=zero_tail)
        self.max_physic_offset = self._last_physic_end()
        if mfq.is_empty:
            self.min_logic_offset_bytes = 0

    # --- write path (event loop) ------------------------------------------------------------------------------

    def ensure_room(self, queue_offset: int, count: int) -> None:
        """Create now the files units ``queue_offset .. queue_offset + count - 1`` need, so a full disk fails
        the put before the CommitLog append instead of the dispatch after it. Event loop. Raises OSError.
        """
        mfq = self.mapped_file_queue
        end = (queue_offset + count) * CQ_UNIT.size
        last = mfq.last_mapped_file()
        if last is not None and end <= last.file_end_offset:
            return
        if last is None:
            start = max(queue_offset * CQ_UNIT.size, 0)
            mfq.create_next(start)
            if start > 0:
                self.min_logic_offset_bytes = start
        mfq.prepare_files_until(end)

    def put_message_position_info(self, commit_log_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Append the unit for ``queue_offset``; units already present are skipped (recovery re-dispatch).

        Missing units before it are filled with blanks. Returns False when it was already there.
        Mirrors ConsumeQueue#putMessagePositionInfo. Raises OSError when a new file cannot be created.
        """
        if commit_log_offset + size <= self.max_physic_offset:
            return False
        mfq = self.mapped_file_queue
        expect = queue_offset * CQ_UNIT.size
        if mfq.is_empty and expect > 0:
            mfq.create_next(expect)
            self.min_logic_offset_bytes = expect
        current = mfq.max_offset()
        if expect < current:
            return False
        while current < expect:
            mfq.get_last_mapped_file(current).append(_BLANK_UNIT)
            current += CQ_UNIT.size
        mfq.get_last_mapped_file(expect).append(CQ_UNIT.pack(commit_log_offset, size, tags_code))
        self.max_physic_offset = commit_log_offset + size
        return True

    def put_units(self, first_queue_offset: int, units: Sequence[tuple[int, int, int]]) -> None:
        """Append ``units`` ((commit log offset, size, tags code), CommitLog order) for consecutive queue offsets
        from ``first_queue_offset``: one packed write when they directly follow the queue's end inside its last
        file, else :meth:`put_message_position_info` for each. Event loop. Raises OSError (new file)."""
        mfq = self.mapped_file_queue
        last = mfq.last_mapped_file()
        count = len(units)
        expect = first_queue_offset * CQ_UNIT.size
        if (
            last is not None
            and count > 1
            and units[0][0] + units[0][1] > self.max_physic_offset
            and last.file_from_offset + last.wrote_position == expect
            and last.wrote_position + count * CQ_UNIT.size <= last.file_size_bytes
        ):
            last.append(struct.pack(">" + _UNIT_FORMAT * count, *(field for unit in units for field in unit)))
            phys, size, _tags = units[-1]
            self.max_physic_offset = phys + size
            return
        for i, (phys, size, tags) in enumerate(units):
            self.put_message_position_info(phys, size, tags, first_queue_offset + i)

    def put_units_raw(self, first_queue_offset: int, units: bytes) -> None:
        """Append packed units (20 bytes each, CQ layout, consecutive queue offsets from ``first_queue_offset``):
        one write when they directly follow the queue's end inside its last file, else unit by unit through
        :meth:`put_units`. Event loop. Raises OSError (new file)."""
        mfq = self.mapped_file_queue
        last = mfq.last_mapped_file()
        size = len(units)
        assert size % CQ_UNIT.size == 0
        if size == 0:
            return
        phys, msg_size, _tags = CQ_UNIT.unpack_from(units, size - CQ_UNIT.size)
        if (
            last is not None
            and last.file_from_offset + last.wrote_position == first_queue_offset * CQ_UNIT.size
            and last.wrote_position + size <= last.file_size_bytes
            and CQ_UNIT.unpack_from(units, 0)[0] >= self.max_physic_offset
        ):
            last.append(units)
            self.max_physic_offset = phys + msg_size
            return
        self.put_units(first_queue_offset, list(CQ_UNIT.iter_unpack(units)))

    # --- read path ------------------------------------------------------------------------------------------------

    @property
    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset_bytes // CQ_UNIT.size

    @property
    def max_offset_in_queue(self) -> int:
        """The next queue offset to be written (= number of units when the queue starts at 0)."""
        return self.mapped_file_queue.max_offset() // CQ_UNIT.size

    def get_unit(self, queue_offset: int) -> CqUnit | None:
        """The unit at ``queue_offset`` or None when outside the queue. O(1)."""
        units = self.read_units(queue_offset, 1)
        return units[0] if units else None

    def read_units(self, queue_offset: int, max_count: int) -> list[CqUnit] | None:
        """Up to ``max_count`` units from ``queue_offset`` within one file; None when no file holds it."""
        if queue_offset < self.min_offset_in_queue or max_count <= 0:
            return None
        pos = queue_offset * CQ_UNIT.size
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mapped is None:
            return None
        in_file = pos - mapped.file_from_offset
        end = min(mapped.wrote_position, in_file + max_count * CQ_UNIT.size)
        if end <= in_file:
            return []
        raw = mapped.read(in_file, end - in_file)
        return [
            CqUnit(queue_offset + i, phys, size, tags) for i, (phys, size, tags) in enumerate(CQ_UNIT.iter_unpack(raw))
        ]

    # --- clean (clean service thread) ----------------------------------------------------------------------------

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move the min offset to the first unit whose message is at or after ``min_commit_log_offset`` (still in
        the CommitLog); every unit below it is gone: the queue is empty (min = max). Never moves it back.
        Clean service thread or recovery. Mirrors ConsumeQueue#correctMinOffset.
        """
        mfq = self.mapped_file_queue
        pos = max(self.min_logic_offset_bytes, mfq.min_offset())
        end = mfq.max_offset()
        while pos < end:
            mapped = mfq.find_mapped_file_by_offset(pos)
            if mapped is None:
                break
            in_file = pos - mapped.file_from_offset
            raw = mapped.read(in_file, min(mapped.wrote_position - in_file, _SCAN_CHUNK_BYTES))
            if not raw:
                break
            for i, (phys, size, _tags) in enumerate(CQ_UNIT.iter_unpack(raw)):
                if size != BLANK_UNIT_SIZE and phys >= min_commit_log_offset:
                    self.min_logic_offset_bytes = max(self.min_logic_offset_bytes, pos + i * CQ_UNIT.size)
                    return
            pos += len(raw)
        self.min_logic_offset_bytes = max(self.min_logic_offset_bytes, pos)

    def delete_expired_files(self, min_commit_log_offset: int) -> list[MappedFile]:
        """Take out of the queue the oldest files (never the last) whose last unit points below
        ``min_commit_log_offset``; returns them for the caller to destroy. Call :meth:`correct_min_offset` first.
        Clean service thread. Mirrors MappedFileQueue#deleteExpiredFileByOffset.
        """
        expired: list[MappedFile] = []
        for mapped in self.mapped_file_queue.deletable_files():
            raw = mapped.read(mapped.file_size_bytes - CQ_UNIT.size, CQ_UNIT.size)
            if len(raw) != CQ_UNIT.size:
                break
            phys, size, _tags = CQ_UNIT.unpack(raw)
            if size != BLANK_UNIT_SIZE and phys >= min_commit_log_offset:
                break
            expired.append(mapped)
        self.mapped_file_queue.remove_first_files(expired)
        return expired

    def roll_next_file(self, queue_offset: int) -> int:
        """The first queue offset of the file after the one holding ``queue_offset``."""
        units_per_file = self.mapped_file_queue.mapped_file_size_bytes // CQ_UNIT.size
        return queue_offset + units_per_file - queue_offset % units_per_file

    # --- flush (flusher thread) --------------------------------------------------------------------------------

    def first_unflushed_physic_offset(self) -> int | None:
        """CommitLog offset of the first unit not yet flushed (None when all are). Flusher thread."""
        mfq = self.mapped_file_queue
        flushed = mfq.flushed_where
        if flushed >= mfq.max_offset():
            return None
        mapped = mfq.find_mapped_file_by_offset(flushed)
        if mapped is None:
            return None
        raw = mapped.read(flushed - mapped.file_from_offset, CQ_UNIT.size)
        if len(raw) < CQ_UNIT.size:  # the file was destroyed meanwhile (queue deleted, expired): nothing to flush
            return None
        phys, size, _tags = CQ_UNIT.unpack(raw)
        return 0 if size == BLANK_UNIT_SIZE else phys

    def flush(self, least_pages: int = 0) -> int:
        """msync dirty units; returns the flushed byte offset. Raises OSError on failure."""
        return self.mapped_file_queue.flush(least_pages)

    def close(self) -> None:
        self.mapped_file_queue.close()
