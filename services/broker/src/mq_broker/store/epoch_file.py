"""EpochFileCache: which master epoch wrote which CommitLog range of this broker, kept in ``epochFileCheckpoint``.

Mirrors org.apache.rocketmq.store.ha.autoswitch.EpochFileCache (with common.utils.CheckpointFile and
remoting.protocol.EpochEntry). Each entry is ``(epoch, start_offset)``: the bytes from ``start_offset`` up to the
next entry's start were written while ``epoch``'s master led the group; the last entry runs to the CommitLog's max
offset. Epochs strictly increase, start offsets never decrease (an epoch in which nothing was written is empty).

File layout (RocketMQ's CheckpointFile, UTF-8 text, ``\\n`` line ends)::

    <number of entries>
    <crc32 of the entry lines, & 0x7FFFFFFF; 0 = not checked>
    <epoch>-<start offset>        one line per entry, oldest first

It is rewritten whole on each change through mq_broker.store.atomic_file (temp + fsync + rename, ``.bak`` kept) and
read back from the ``.bak`` when the file is missing or does not check out.

Threads: the reads (:meth:`EpochFileCache.entries`, :meth:`~EpochFileCache.last_entry`,
:meth:`~EpochFileCache.find_consistent_point`, :meth:`~EpochFileCache.wire_form`) only read an immutable tuple:
any thread, the event loop included. The changes (:meth:`~EpochFileCache.append`, the truncations, :meth:`load`)
write and fsync the file under a lock: call them at start-up, from a worker thread or through
``asyncio.to_thread``.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_common.logging import get_logger

from mq_broker.store.atomic_file import BAK_SUFFIX, sibling, write_atomically

log = get_logger("mq_broker.store.epoch")

EPOCH_FILE_NAME: Final = "epochFileCheckpoint"
# EpochEntry's endOffset of the last entry (Long.MAX_VALUE): open-ended, up to the CommitLog's max offset.
OPEN_END_OFFSET: Final = (1 << 63) - 1
# Bound of the table (file and wire form): one entry per election that made this broker's group a new master.
MAX_EPOCH_ENTRIES: Final = 100_000
MAX_EPOCH: Final = (1 << 31) - 1  # EpochEntry.epoch is a Java int
_NOT_CHECKED_CRC: Final = 0


class EpochFileError(ValueError):
    """A refused change (an epoch or start offset going back), or an epoch history that does not add up (a file or a
    wire form: epochs not increasing, offsets going back, ends not meeting the next start, too many entries)."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """CommitLog bytes [start_offset, end_offset) written under ``epoch``. ``end_offset`` is OPEN_END_OFFSET for
    the last entry of a cache (it grows with the CommitLog). Mirrors org.apache.rocketmq.remoting.protocol.EpochEntry.
    """

    epoch: int
    start_offset: int
    end_offset: int = OPEN_END_OFFSET


@dataclass(frozen=True, slots=True)
class EpochEntries:
    """The wire form of an epoch history, as the HA handshake and the controller send it: ``(epoch, start, end)``
    tuples, oldest first, the last one's end being the sender's CommitLog max offset. Mirrors
    org.apache.rocketmq.remoting.protocol.body.EpochEntryCache (its entry list plus maxOffset).
    """

    entries: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, entries: Sequence[EpochEntry], max_offset: int) -> EpochEntries:
        """The wire form of ``entries`` with the last one closed at ``max_offset`` (bytes)."""
        closed = with_last_end(entries, max_offset)
        return cls(tuple((e.epoch, e.start_offset, e.end_offset) for e in closed))

    @property
    def max_offset(self) -> int:
        """The sender's CommitLog max offset (0 for an empty history)."""
        return self.entries[-1][2] if self.entries else 0

    def to_entries(self) -> list[EpochEntry]:
        """The entries, checked (received bytes are untrusted). Raises EpochFileError when they do not add up."""
        entries = [EpochEntry(epoch, start, end) for epoch, start, end in self.entries]
        check_history(entries, closed=True)
        return entries


def with_last_end(entries: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """``entries`` with the last one ending at ``end_offset`` (EpochFileCache#setLastEpochEntryEndOffset; kept as
    is when that would end it before its start)."""
    out = list(entries)
    if out and out[-1].start_offset <= end_offset:
        last = out[-1]
        out[-1] = EpochEntry(last.epoch, last.start_offset, end_offset)
    return out


def check_history(entries: Sequence[EpochEntry], *, closed: bool) -> None:
    """Raise EpochFileError unless epochs strictly increase (0 .. MAX_EPOCH), offsets are >= 0, every entry ends
    where the next starts, and there are at most MAX_EPOCH_ENTRIES. ``closed``: the last entry's end is a real
    offset (>= its start), else it must be OPEN_END_OFFSET."""
    if len(entries) > MAX_EPOCH_ENTRIES:
        raise EpochFileError(f"{len(entries)} epoch entries, at most {MAX_EPOCH_ENTRIES}")
    for i, entry in enumerate(entries):
        if not 0 <= entry.epoch <= MAX_EPOCH or entry.start_offset < 0:
            raise EpochFileError(f"epoch entry {entry} out of range")
        if i + 1 < len(entries):
            after = entries[i + 1]
            if after.epoch <= entry.epoch or after.start_offset < entry.start_offset:
                raise EpochFileError(f"epoch entry {after} does not follow {entry}")
            if entry.end_offset != after.start_offset:
                raise EpochFileError(f"epoch entry {entry} does not end where {after} starts")
        elif closed and not entry.start_offset <= entry.end_offset < OPEN_END_OFFSET:
            raise EpochFileError(f"last epoch entry {entry} has no valid end offset")
        elif not closed and entry.end_offset != OPEN_END_OFFSET:
            raise EpochFileError(f"last epoch entry {entry} must be open-ended")


def find_consistent_point(
    mine: Sequence[EpochEntry], my_max_offset: int, theirs: Sequence[EpochEntry], their_max_offset: int
) -> int:
    """The CommitLog offset up to which two brokers' logs hold the same bytes: for the newest epoch both have with
    the same start offset, the smaller of its two end offsets (each entry ending where the next starts, each
    history's last entry at its max offset); never past either max offset. -1 when no epoch of one history
    starts where the same epoch of the other does (nothing provably agrees). Symmetric. Mirrors
    EpochFileCache#findConsistentPoint.
    """
    mine = with_last_end(_open_last(mine), my_max_offset)
    by_epoch = {e.epoch: e for e in with_last_end(_open_last(theirs), their_max_offset)}
    for entry in reversed(mine):
        other = by_epoch.get(entry.epoch)
        if other is not None and other.start_offset == entry.start_offset:
            return max(-1, min(entry.end_offset, other.end_offset, my_max_offset, their_max_offset))
    return -1


def _open_last(entries: Iterable[EpochEntry]) -> tuple[EpochEntry, ...]:
    """Entries chained end-to-start, the last open-ended (EpochFileCache#initEntries)."""
    ordered = list(entries)
    return tuple(
        EpochEntry(e.epoch, e.start_offset, ordered[i + 1].start_offset if i + 1 < len(ordered) else OPEN_END_OFFSET)
        for i, e in enumerate(ordered)
    )


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    """The file's bytes (CheckpointFile#write layout, see the module docstring)."""
    lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    crc = zlib.crc32(lines.encode("utf-8")) & 0x7FFFFFFF
    return f"{len(entries)}\n{crc}\n{lines}".encode()


def decode_epoch_file(raw: bytes) -> tuple[EpochEntry, ...]:
    """Entries of a file (CheckpointFile#read), last open-ended. Raises EpochFileError for a file that does not
    check out (count, crc32, syntax, ordering)."""
    try:
        head, crc_line, *rest = raw.decode("utf-8").split("\n", 2)
        count, crc = int(head), int(crc_line)
        body = rest[0] if rest else ""
        pairs = [line.split("-") for line in body.split("\n") if line]
        parsed = [EpochEntry(int(epoch), int(start)) for epoch, start in pairs]
    except ValueError as exc:  # also UnicodeDecodeError, a missing line, a line without exactly one '-'
        raise EpochFileError(f"malformed epoch file: {exc}") from exc
    if len(parsed) != count:
        raise EpochFileError(f"epoch file announces {count} entries, holds {len(parsed)}")
    if crc != _NOT_CHECKED_CRC and zlib.crc32(body.encode("utf-8")) & 0x7FFFFFFF != crc:
        raise EpochFileError("epoch file crc32 mismatch")
    entries = _open_last(parsed)
    check_history(entries, closed=False)
    return entries


class EpochFileCache:
    """The epoch history of one broker's store, persisted at ``path``. ``max_offset`` gives the CommitLog's max
    offset (bytes; the end of the last entry) and may be called from any thread.
    """

    def __init__(self, path: Path, max_offset: Callable[[], int]) -> None:
        self.path = path
        self._max_offset = max_offset
        self._entries: tuple[EpochEntry, ...] = ()
        self._lock = threading.Lock()

    # --- start-up ---------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file, else its ``.bak`` (none of either: an empty history). Blocking. Raises OSError when a file
        cannot be read, EpochFileError when neither file checks out. Mirrors EpochFileCache#initCacheFromFile."""
        with self._lock:
            try:
                self._entries = self._read(self.path)
                return
            except FileNotFoundError:
                error: EpochFileError | None = None
            except EpochFileError as exc:
                log.error("epoch_file_corrupt_trying_bak", path=str(self.path), error=str(exc))
                error = exc
            bak = sibling(self.path, BAK_SUFFIX)
            try:
                self._entries = self._read(bak)
            except FileNotFoundError:
                if error is not None:
                    raise EpochFileError(f"{self.path}: {error}; and no {bak.name}") from error
                self._entries = ()
                return
            log.warning("epoch_file_loaded_from_bak", path=str(bak), entries=len(self._entries))

    @staticmethod
    def _read(path: Path) -> tuple[EpochEntry, ...]:
        return decode_epoch_file(path.read_bytes())

    # --- reads (any thread) -------------------------------------------------------------------------------------

    def entries(self) -> tuple[EpochEntry, ...]:
        """Every entry, oldest first; the last one ends at OPEN_END_OFFSET. Mirrors getAllEntries."""
        return self._entries

    def last_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    def last_epoch(self) -> int:
        """The newest epoch, -1 when there is none. Mirrors EpochFileCache#lastEpoch."""
        last = self.last_entry()
        return last.epoch if last is not None else -1

    def wire_form(self) -> EpochEntries:
        """The history to send (HA handshake, controller), the last entry closed at the CommitLog's max offset."""
        return EpochEntries.of(self._entries, self._max_offset())

    def find_consistent_point(self, other_entries: Sequence[EpochEntry] | EpochEntries, other_max_offset: int) -> int:
        """:func:`find_consistent_point` of this history (closed at the CommitLog's max offset) and another one whose
        last entry ends at ``other_max_offset``. A wire form is checked first (raises EpochFileError)."""
        theirs = other_entries.to_entries() if isinstance(other_entries, EpochEntries) else other_entries
        return find_consistent_point(self._entries, self._max_offset(), theirs, other_max_offset)

    # --- changes (blocking: file write + fsync) -------------------------------------------------------------------

    def append(self, epoch: int, start_offset: int) -> bool:
        """Start ``epoch`` at ``start_offset`` (the previous entry ends there). False (nothing written) when
        ``epoch`` is the last epoch already. Raises EpochFileError when ``epoch`` is older than the last one or
        ``start_offset`` is below the last start, OSError when the file cannot be written (the cache is then
        unchanged). Blocking. Mirrors EpochFileCache#appendEntry."""
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if last is not None and epoch == last.epoch:
                return False
            if last is not None and (epoch < last.epoch or start_offset < last.start_offset):
                raise EpochFileError(f"epoch {epoch} at {start_offset} cannot follow {last}")
            self._replace([*self._entries, EpochEntry(epoch, start_offset)])
            return True

    def truncate_suffix(self, offset: int) -> None:
        """Drop every entry starting at or after ``offset`` (the CommitLog was cut there); the entry before becomes
        the open-ended last one. Blocking; raises OSError. Mirrors EpochFileCache#truncateSuffixByOffset."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < offset]
            if len(kept) != len(self._entries):
                self._replace(kept)

    def truncate_prefix(self, min_offset: int) -> None:
        """Drop the entries wholly below ``min_offset`` (their CommitLog files were deleted); the last entry always
        stays. Blocking; raises OSError. Mirrors EpochFileCache#truncatePrefixByOffset."""
        with self._lock:
            kept = [e for e in self._entries if e.end_offset > min_offset]
            if len(kept) != len(self._entries):
                self._replace(kept)

    def _replace(self, entries: Sequence[EpochEntry]) -> None:
        """Persist ``entries`` (re-chained, last open-ended), then make them current. Caller holds the lock."""
        chained = _open_last(entries)
        check_history(chained, closed=False)
        write_atomically(self.path, encode_epoch_file(chained))
        self._entries = chained
        log.info("epoch_file_written", entries=len(chained), last=str(chained[-1]) if chained else None)
