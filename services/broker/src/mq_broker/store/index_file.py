"""IndexFile: one memory-mapped hash index from message keys to CommitLog offsets.

Mirrors org.apache.rocketmq.store.index.{IndexFile, IndexHeader}. Byte layout (big-endian, as RocketMQ's)::

    header   40 bytes   beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64
                        | hashSlotCount i32 | indexCount i32
    slots    hash_slot_num x 4 bytes   i32: number of the newest entry whose key hashes here (0 = none)
    entries  index_num x 20 bytes      keyHash i32 | phyOffset i64 | timeDiff i32 (seconds since
                                       beginTimestamp) | prevIndex i32 (older entry of the same slot, 0 = none)

Entry numbers start at 1 (``indexCount`` starts at 1; entry 0 is never used), so a file holds
``index_num - 1`` keys. The key hash is ``abs(String#hashCode)`` of ``"topic#key"`` (0 for Integer.MIN_VALUE),
the slot ``hash % hash_slot_num``. The file is named by its creation time ``yyyyMMddHHmmssSSS`` (local time,
UtilAll#timeMillisToHumanString) and sized ``40 + slots * 4 + entries * 20`` bytes; it is created sparse and the
header + slot region is preallocated at once, the entry region in 1 MiB steps as it fills (a full disk shows
as OSError on a put, never as SIGBUS).

Two deliberate differences from RocketMQ, same bytes: the first entry's timeDiff is computed after
beginTimestamp is set (RocketMQ computes it against the previous file's end), and a slot or prevIndex that is
>= indexCount is treated as empty (what a kill between the entry write and the count update leaves behind).

Threads: :meth:`put_key` runs on the event loop (one writer), :meth:`iter_phy_offsets` on the event loop,
:meth:`flush` on the flusher thread (msync through libc, GIL released), :meth:`truncate` at recovery only.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from mq_common.hashing import java_abs_hash

from mq_broker.store import native_append
from mq_broker.store.msync import mapping_address, msync

INDEX_HEADER_SIZE_BYTES: Final = 40
HASH_SLOT_SIZE_BYTES: Final = 4
INDEX_ENTRY_SIZE_BYTES: Final = 20
INVALID_INDEX: Final = 0
INDEX_FILE_NAME_DIGITS: Final = 17
# An entry's time is stored in whole seconds: a message stored at t has entry time in (t - 1000 ms, t].
TIME_DIFF_UNIT_MS: Final = 1000
ALLOCATE_STEP_BYTES: Final = 1024 * 1024
_INT_MAX: Final = 0x7FFFFFFF
_HEADER: Final = struct.Struct(">qqqqii")
_ENTRY: Final = struct.Struct(">iqii")
_I32: Final = struct.Struct(">i")
assert _HEADER.size == INDEX_HEADER_SIZE_BYTES
assert _ENTRY.size == INDEX_ENTRY_SIZE_BYTES
OS_PAGE_SIZE_BYTES: Final = mmap.PAGESIZE


def index_key_hash(topic: str, key: str) -> int:
    """IndexFile#indexKeyHashMethod of ``"topic#key"`` (IndexService#buildKey): ``Math.abs(String#hashCode)``,
    0 for Integer.MIN_VALUE."""
    return java_abs_hash(f"{topic}#{key}")


def index_file_size_bytes(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE_BYTES + hash_slot_num * HASH_SLOT_SIZE_BYTES + index_num * INDEX_ENTRY_SIZE_BYTES


def is_index_file_name(name: str) -> bool:
    return len(name) == INDEX_FILE_NAME_DIGITS and name.isdigit()


class IndexFile:
    """One index file at ``file_path`` (created when missing, else loaded). Raises OSError on I/O errors
    (wrong size, cannot create, map or preallocate).
    """

    __slots__ = (
        "_address",
        "_allocated_bytes",
        "_entries_base",
        "_fd",
        "_mm",
        "begin_phy_offset",
        "begin_timestamp_ms",
        "end_phy_offset",
        "end_timestamp_ms",
        "file_path",
        "file_size_bytes",
        "hash_slot_count",
        "hash_slot_num",
        "index_count",
        "index_num",
    )

    def __init__(
        self,
        file_path: Path,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp_ms: int = 0,
    ) -> None:
        assert hash_slot_num > 0
        assert index_num > 1
        assert is_index_file_name(file_path.name), file_path
        self.file_path = file_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size_bytes = index_file_size_bytes(hash_slot_num, index_num)
        self._entries_base = INDEX_HEADER_SIZE_BYTES + hash_slot_num * HASH_SLOT_SIZE_BYTES
        exists = file_path.exists()
        fd = os.open(file_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if exists:
                actual = os.fstat(fd).st_size
                if actual != self.file_size_bytes:
                    raise OSError(errno.EINVAL, f"{file_path}: size {actual} bytes, expected {self.file_size_bytes}")
            else:
                os.ftruncate(fd, self.file_size_bytes)
                _allocate(fd, 0, self._entries_base + INDEX_ENTRY_SIZE_BYTES)
            self._mm = mmap.mmap(fd, self.file_size_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if not exists:
                file_path.unlink(missing_ok=True)
            raise
        self._fd = fd
        self._address = mapping_address(self._mm)
        header: tuple[int, int, int, int, int, int] = _HEADER.unpack_from(self._mm, 0)
        self.begin_timestamp_ms: int = header[0]
        self.end_timestamp_ms: int = header[1]
        self.begin_phy_offset: int = header[2]
        self.end_phy_offset: int = header[3]
        self.hash_slot_count: int = header[4]
        self.index_count: int = max(header[5], 1)  # IndexHeader#load
        if exists:
            self._adopt_trailing_entries()
        self._allocated_bytes = self._entries_base + (self.index_count + 1) * INDEX_ENTRY_SIZE_BYTES
        if not exists:
            if end_phy_offset > 0:
                self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            if end_timestamp_ms > 0:
                self.begin_timestamp_ms = self.end_timestamp_ms = end_timestamp_ms
            self.write_header()

    def __repr__(self) -> str:
        return f"IndexFile({self.file_path.name}, count={self.index_count}, end_phy={self.end_phy_offset})"

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def has_entries(self) -> bool:
        return self.index_count > 1

    def write_header(self) -> None:
        """Store the header fields (IndexHeader#updateByteBuffer); :meth:`put_key` leaves it to the caller, once
        per batch. Entries written past a stale count are adopted at the next load.
        """
        _HEADER.pack_into(
            self._mm,
            0,
            self.begin_timestamp_ms,
            self.end_timestamp_ms,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def _slot_pos(self, key_hash: int) -> int:
        return INDEX_HEADER_SIZE_BYTES + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE_BYTES

    def _entry_pos(self, number: int) -> int:
        return self._entries_base + number * INDEX_ENTRY_SIZE_BYTES

    # --- write (event loop) ----------------------------------------------------------------------------------

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Append one entry for ``key_hash`` (from :func:`index_key_hash`); False when the file is full.
        The header is updated in memory only: call :meth:`write_header` after a batch.

        Mirrors IndexFile#putKey. Raises OSError when the entry region cannot be preallocated (disk full).
        """
        return self.put_keys((key_hash,), phy_offset, store_timestamp_ms) == 1

    def put_keys(self, key_hashes: Sequence[int], phy_offset: int, store_timestamp_ms: int) -> int:
        """:meth:`put_key` for each of ``key_hashes`` (the keys of one message); returns how many fitted."""
        count = self.index_count
        room = self.index_num - count
        if room <= 0:
            return 0
        if count == 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp_ms = store_timestamp_ms
        begin_ts = self.begin_timestamp_ms
        time_diff = 0
        if begin_ts > 0:
            time_diff = min(max((store_timestamp_ms - begin_ts) // TIME_DIFF_UNIT_MS, 0), _INT_MAX)
        mm = self._mm
        slot_num = self.hash_slot_num
        entry_pos = self._entries_base + count * INDEX_ENTRY_SIZE_BYTES
        first_count = count
        for key_hash in key_hashes[:room]:
            if entry_pos + INDEX_ENTRY_SIZE_BYTES > self._allocated_bytes:
                self._allocate_entries(entry_pos)
            slot_pos = INDEX_HEADER_SIZE_BYTES + (key_hash % slot_num) * HASH_SLOT_SIZE_BYTES
            slot_value = _I32.unpack_from(mm, slot_pos)[0]
            if slot_value <= INVALID_INDEX or slot_value >= count:
                slot_value = INVALID_INDEX
                self.hash_slot_count += 1
            _ENTRY.pack_into(mm, entry_pos, key_hash, phy_offset, time_diff, slot_value)
            _I32.pack_into(mm, slot_pos, count)
            count += 1
            entry_pos += INDEX_ENTRY_SIZE_BYTES
        self.index_count = count
        self.end_phy_offset = phy_offset
        self.end_timestamp_ms = store_timestamp_ms
        if first_count == 1:  # the begin fields anchor every entry's time: on disk before anything relies on them
            self.write_header()
        return count - first_count

    def put_messages_native(
        self, messages: Sequence[object], results: Sequence[object], start: int, last_indexed_phy_offset: int
    ) -> tuple[int, int]:
        """The entries of ``messages[start:]`` (with their put ``results``) written by the C loop
        (native_append.index_messages) while they fit in the preallocated room; returns ``(stop, last indexed
        offset)``: ``stop`` is the first message left to :meth:`put_keys` (a fresh file, a full one).
        The header is updated in memory only. Event loop."""
        stop, count, new_slots, last_phys, last_ts, last_indexed = native_append.index_messages(
            self._mm,
            self.hash_slot_num,
            self.index_count,
            self._native_room(),
            self.begin_timestamp_ms,
            messages,
            results,
            start,
            last_indexed_phy_offset,
        )
        self._after_native(count, new_slots, last_phys, last_ts)
        return stop, last_indexed

    def put_records_native(
        self, log_buf: mmap.mmap, start: int, end: int, file_from_offset: int, last_indexed_phy_offset: int
    ) -> tuple[int, int]:
        """The entries of the v1 records of ``log_buf`` in [start, end) (native_append.index_records) while they fit
        in the preallocated room; returns ``(position of the first record left to the Python path, last indexed
        offset)``. The header is updated in memory only. Event loop."""
        stop, count, new_slots, last_phys, last_ts, last_indexed = native_append.index_records(
            self._mm,
            self.hash_slot_num,
            self.index_count,
            self._native_room(),
            self.begin_timestamp_ms,
            log_buf,
            start,
            end,
            file_from_offset,
            last_indexed_phy_offset,
        )
        self._after_native(count, new_slots, last_phys, last_ts)
        return stop, last_indexed

    def _native_room(self) -> int:
        """Entries the C loops may fill: the file's limit, or less when fewer are preallocated yet."""
        return min(self.index_num, (self._allocated_bytes - self._entries_base) // INDEX_ENTRY_SIZE_BYTES)

    def _after_native(self, count: int, new_slots: int, last_phys: int, last_ts: int) -> None:
        """The in-memory header after a C loop (when it wrote an entry: ``last_phys`` >= 0)."""
        if last_phys >= 0:
            self.index_count = count
            self.hash_slot_count += new_slots
            self.end_phy_offset = last_phys
            self.end_timestamp_ms = last_ts

    def reserve_entries(self, entries: int) -> None:
        """Preallocate room for ``entries`` more entries (capped at the file's end), so that a later
        :meth:`put_keys` cannot meet ENOSPC. Raises OSError (ENOSPC when the disk is full)."""
        need = min(self.file_size_bytes, self._entries_base + (self.index_count + entries) * INDEX_ENTRY_SIZE_BYTES)
        while self._allocated_bytes < need:
            self._allocate_entries(self._allocated_bytes)

    def _allocate_entries(self, entry_pos: int) -> None:
        end = min(self.file_size_bytes, entry_pos + ALLOCATE_STEP_BYTES)
        _allocate(self._fd, entry_pos, end - entry_pos)
        self._allocated_bytes = end

    # --- read (event loop) -----------------------------------------------------------------------------------

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """IndexFile#isTimeMatched: [begin_ms, end_ms] overlaps [beginTimestamp, endTimestamp]."""
        b, e = self.begin_timestamp_ms, self.end_timestamp_ms
        return (begin_ms < b and end_ms > e) or b <= begin_ms <= e or b <= end_ms <= e

    def iter_phy_offsets(self, key_hash: int, begin_ms: int, end_ms: int) -> Iterator[int]:
        """CommitLog offsets of the entries with ``key_hash`` whose time may fall in [begin_ms, end_ms], newest
        first (the slot's chain). Entry times have 1 s granularity, so an entry matches when the message's
        real store time can lie in the range; callers check the message itself. Mirrors
        IndexFile#selectPhyOffset (a generator: the caller decides how many it needs).
        """
        count = self.index_count
        if count <= 1:
            return
        mm = self._mm
        number = _I32.unpack_from(mm, self._slot_pos(key_hash))[0]
        if number <= INVALID_INDEX or number >= count:
            return
        begin_ts = self.begin_timestamp_ms
        while True:
            hash_read, phy, time_diff, prev = _ENTRY.unpack_from(mm, self._entry_pos(number))
            if time_diff < 0:
                return
            time_read = begin_ts + time_diff * TIME_DIFF_UNIT_MS
            too_old = time_read + TIME_DIFF_UNIT_MS <= begin_ms
            if hash_read == key_hash and not too_old and time_read <= end_ms:
                yield phy
            if prev <= INVALID_INDEX or prev >= number or too_old:
                return
            number = prev

    def entries(self) -> Iterator[tuple[int, int, int, int]]:
        """Every entry as (key hash, phy offset, time diff s, prev index), oldest first (tests, tools)."""
        for number in range(1, self.index_count):
            yield _ENTRY.unpack_from(self._mm, self._entry_pos(number))

    def read_bytes(self, pos: int, size: int) -> bytes:
        """Raw bytes of the file (tests, tools)."""
        return self._mm[pos : pos + size]

    # --- recovery --------------------------------------------------------------------------------------------

    def _adopt_trailing_entries(self) -> None:
        """Load: entries written after the last header update (a kill between the two) count again, so the
        slots that already point at them stay valid; recovery then truncates what the CommitLog lost.
        """
        mm = self._mm
        count = self.index_count
        zero = bytes(INDEX_ENTRY_SIZE_BYTES)
        while count < self.index_num:
            pos = self._entry_pos(count)
            if mm[pos : pos + INDEX_ENTRY_SIZE_BYTES] == zero:
                break
            _h, phy, time_diff, _p = _ENTRY.unpack_from(mm, pos)
            self.end_phy_offset = phy
            self.end_timestamp_ms = self.begin_timestamp_ms + time_diff * TIME_DIFF_UNIT_MS
            count += 1
        if count != self.index_count:
            self.index_count = count
            self.write_header()

    def truncate(self, phy_offset: int) -> None:
        """Drop the entries pointing at or past ``phy_offset`` (entries are in CommitLog order). Slots that
        pointed at a dropped entry fall back to its older chain entries. Recovery only; blocking.
        """
        mm = self._mm
        keep = self.index_count
        while keep > 1 and _ENTRY.unpack_from(mm, self._entry_pos(keep - 1))[1] >= phy_offset:
            keep -= 1
        if keep == self.index_count:
            return
        for number in range(self.index_count - 1, keep - 1, -1):
            key_hash = _ENTRY.unpack_from(mm, self._entry_pos(number))[0]
            slot_pos = self._slot_pos(key_hash)
            value = _I32.unpack_from(mm, slot_pos)[0]
            if value < keep:
                continue
            while value >= keep:
                prev = _ENTRY.unpack_from(mm, self._entry_pos(value))[3] if 0 < value < self.index_num else 0
                value = prev if 0 <= prev < value else INVALID_INDEX
            _I32.pack_into(mm, slot_pos, value)
            if value == INVALID_INDEX:
                self.hash_slot_count = max(0, self.hash_slot_count - 1)
        start = self._entry_pos(keep)
        mm[start : self._entry_pos(self.index_count)] = bytes(self._entry_pos(self.index_count) - start)
        self.index_count = keep
        if keep > 1:
            _h, phy, time_diff, _p = _ENTRY.unpack_from(mm, self._entry_pos(keep - 1))
            self.end_phy_offset = phy
            self.end_timestamp_ms = self.begin_timestamp_ms + time_diff * TIME_DIFF_UNIT_MS
        else:
            self.end_phy_offset = self.begin_phy_offset
            self.end_timestamp_ms = self.begin_timestamp_ms
        self.write_header()

    # --- flush (flusher thread) and life cycle -------------------------------------------------------------

    def flush(self) -> None:
        """msync the header, slots and written entries. Flusher thread. Raises OSError when msync fails."""
        if self._fd < 0:
            return
        length = min(self.file_size_bytes, self._entry_pos(self.index_count))
        length = -(-length // OS_PAGE_SIZE_BYTES) * OS_PAGE_SIZE_BYTES
        length = min(length, self.file_size_bytes)
        msync(self._mm, self._address, 0, length, self.file_path)

    def close(self) -> None:
        """Unmap and close (the flusher must be stopped or must not hold this file). Idempotent."""
        if self._fd < 0:
            return
        self._mm.close()
        os.close(self._fd)
        self._fd = -1

    @property
    def is_closed(self) -> bool:
        return self._fd < 0

    def destroy(self) -> None:
        self.close()
        self.file_path.unlink(missing_ok=True)


def _allocate(fd: int, offset: int, length: int) -> None:
    """Reserve disk blocks (posix_fallocate keeps existing data); silently skipped where unsupported."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
