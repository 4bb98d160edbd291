"""IndexService: the IndexFiles of a store (``<store>/index/``), key extraction and message queries.

Mirrors org.apache.rocketmq.store.index.IndexService (buildIndex, queryOffset, getAndCreateLastIndexFile,
load, deleteExpiredFile) and DefaultMessageStore#queryMessage. Each stored message gets one entry for its
UNIQ_KEY and one per KEYS word (space separated), under the key ``"topic#key"`` (IndexService#buildKey);
rolled-back transaction messages get none.

Threads: :meth:`IndexService.build_index` and the queries run on the event loop (right after the CommitLog
put, with the ConsumeQueue dispatch); :meth:`IndexService.flush` on the flusher thread; :meth:`load` and
:meth:`truncate` at start-up. A new file is created on the event loop when the last one is full (the full
one is msynced by the next flush).
"""

from __future__ import annotations

import mmap
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_common.codec import MessageDecodeError, decode_message
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.logging import get_logger
from mq_common.record_layout import (
    BODY_LENGTH,
    BODY_LENGTH_OFFSETS,
    BODY_OFFSETS,
    HOST_V6_FLAGS,
    HOST_V6_SHIFT,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_BYTES,
    SYS_FLAG,
    SYS_FLAG_OFFSET,
    TOPIC_LENGTH_BYTES,
    TOTAL_AND_MAGIC,
)

from mq_broker.store import native_append
from mq_broker.store.commit_log import CommitLog
from mq_broker.store.index_file import TIME_DIFF_UNIT_MS, IndexFile, index_key_hash, is_index_file_name
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult

log = get_logger("mq_broker.store.index")

MAX_TIMESTAMP_MS: Final = (1 << 63) - 1
# How many index candidates one query inspects at most (hash collisions, time misses) before it stops.
MAX_QUERY_CANDIDATES: Final = 4096
_NAME_SEP: Final = "\x01"
_PROP_SEP: Final = "\x02"
_UNIQ_KEY: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def property_value(properties: str, name: str) -> str | None:
    """The value of ``name`` in RocketMQ's ``k\\x01v\\x02`` property string, without decoding all of it."""
    needle = name + _NAME_SEP
    i = properties.find(needle)
    while i > 0 and properties[i - 1] != _PROP_SEP:
        i = properties.find(needle, i + 1)
    if i < 0:
        return None
    start = i + len(needle)
    end = properties.find(_PROP_SEP, start)
    return properties[start:] if end < 0 else properties[start:end]


def record_properties(raw: bytes) -> str:
    """The properties string of a whole v1 record (recovery re-indexing). Raises MessageDecodeError."""
    try:
        hosts = (SYS_FLAG.unpack_from(raw, SYS_FLAG_OFFSET)[0] & HOST_V6_FLAGS) >> HOST_V6_SHIFT
        p = BODY_OFFSETS[hosts] + BODY_LENGTH.unpack_from(raw, BODY_LENGTH_OFFSETS[hosts])[0]
        p += TOPIC_LENGTH_BYTES + raw[p]
        props_len = PROPERTIES_LENGTH.unpack_from(raw, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        return raw[p : p + props_len].decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MessageDecodeError(f"record properties do not decode: {exc}") from exc


def read_record(commit_log: CommitLog, commit_log_offset: int) -> bytes | None:
    """The whole record starting at ``commit_log_offset`` (raw bytes), None when no record starts there."""
    if commit_log_offset < 0:
        return None
    header = commit_log.get_message(commit_log_offset, TOTAL_AND_MAGIC.size)
    if header is None:
        return None
    total, magic = TOTAL_AND_MAGIC.unpack(header)
    if magic != MESSAGE_MAGIC_CODE or total <= TOTAL_AND_MAGIC.size:
        return None
    return commit_log.get_message(commit_log_offset, total)


def _index_file_name(now_ms: int, last: str | None) -> str:
    """UtilAll#timeMillisToHumanString (local time, ms); bumped past ``last`` so names stay unique and sorted."""
    t = time.localtime(now_ms / 1000)
    name = time.strftime("%Y%m%d%H%M%S", t) + f"{now_ms % 1000:03d}"
    if last is not None and name <= last:
        name = f"{int(last) + 1:017d}"
    return name


@dataclass(frozen=True, slots=True)
class QueryMessageResult:
    """Messages found by key (whole v1 records). Mirrors org.apache.rocketmq.store.QueryMessageResult.

    ``index_last_update_timestamp_ms`` / ``index_last_update_phy_offset``: end of the newest index file.
    """

    messages: tuple[bytes, ...]
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0

    @property
    def message_count(self) -> int:
        return len(self.messages)


class IndexService:
    """The index files under ``index_dir``, each of ``hash_slot_num`` slots and ``index_num`` entries.

    Raises OSError on file errors (load, create, preallocate, msync).
    """

    def __init__(self, index_dir: Path, hash_slot_num: int, index_num: int) -> None:
        assert hash_slot_num > 0
        assert index_num > 1
        self.index_dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.index_files: list[IndexFile] = []
        # CommitLog offset of the last message indexed (-1: none); messages at or below it are skipped.
        self.last_indexed_phy_offset = -1
        self._files_lock = threading.Lock()  # flusher vs. deletion of expired files
        self._flushed_full: set[str] = set()  # names of full files already msynced for good
        self._dirty_headers: set[IndexFile] = set()

    # --- start-up --------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Map every index file in name (= creation) order. Mirrors IndexService#load."""
        if not self.index_dir.is_dir():
            return
        for path in sorted(p for p in self.index_dir.iterdir() if is_index_file_name(p.name)):
            self.index_files.append(IndexFile(path, self.hash_slot_num, self.index_num))
        self._update_last_indexed()

    def _update_last_indexed(self) -> None:
        self.last_indexed_phy_offset = -1
        for f in reversed(self.index_files):
            if f.has_entries:
                self.last_indexed_phy_offset = f.end_phy_offset
                return

    def truncate(self, phy_offset: int) -> None:
        """Drop every entry pointing at or past ``phy_offset``; files left empty (but the first) are deleted.
        Recovery: what is dropped is rebuilt by re-dispatching the CommitLog from ``phy_offset``.
        """
        for f in list(reversed(self.index_files)):
            if f.has_entries and f.end_phy_offset < phy_offset:
                break
            f.truncate(phy_offset)
            if not f.has_entries and len(self.index_files) > 1:
                f.destroy()
                self.index_files.remove(f)
        self._update_last_indexed()

    def truncate_files(self, phy_offset: int) -> None:
        """While serving: :meth:`truncate` at ``phy_offset`` under the files lock, and every file flushed again from
        then on (a full file cut below its end is written anew). The caller keeps the flusher off meanwhile; a
        query running at the same time may miss entries (it checks each candidate against the CommitLog, so it
        never returns a message past the cut). Blocking (worker thread). Raises OSError.
        No RocketMQ counterpart: DefaultMessageStore#truncateDirtyFiles leaves such entries dangling.
        """
        with self._files_lock:
            self.truncate(phy_offset)
            self._flushed_full.clear()

    # --- build (event loop) ----------------------------------------------------------------------------------

    def build_index(
        self,
        topic: str,
        commit_log_offset: int,
        store_timestamp_ms: int,
        sys_flag: int,
        properties: str,
        *,
        write_header: bool = True,
    ) -> int:
        """Index the UNIQ_KEY and KEYS of one stored message; returns the number of entries written.
        Like :meth:`build_indexes` with one message; ``write_header`` False leaves the headers to a later
        :meth:`write_headers` (recovery writes them once after the scan).
        """
        written = self._index_one(topic, commit_log_offset, store_timestamp_ms, sys_flag, properties)
        if write_header:
            self._write_headers()
        return written

    def write_headers(self) -> None:
        """Write the headers of the files changed since the last write (event loop / start-up)."""
        self._write_headers()

    def build_indexes(self, messages: Iterable[tuple[str, int, int, int, str]]) -> int:
        """Index each ``(topic, commit log offset, store timestamp ms, sys flag, properties string)``, in
        CommitLog order; the file headers are written once at the end. Returns the entries written.

        Skips messages at or below the last indexed offset (recovery re-dispatch) and rolled-back transaction
        messages. Mirrors IndexService#buildIndex. Raises OSError when a new file cannot be created.
        """
        written = 0
        try:
            for topic, offset, timestamp_ms, sys_flag, properties in messages:
                written += self._index_one(topic, offset, timestamp_ms, sys_flag, properties)
        finally:
            self._write_headers()
        return written

    def build_indexes_for_batch(
        self, messages: Sequence[MessageExtBrokerInner], results: Sequence[PutMessageResult], *, native: bool
    ) -> None:
        """:meth:`build_indexes` for one put batch (``results[i]`` is the put result of ``messages[i]``), with the
        C loop of native_append when ``native`` and it is built; the Python path handles what it leaves (the first
        entry of a file, a roll). Event loop. Raises OSError when a new file cannot be created."""
        if not (native and native_append.AVAILABLE):
            self.build_indexes(
                (m.topic, r.wrote_offset, r.store_timestamp_ms, m.sys_flag, m.properties_string)
                for m, r in zip(messages, results, strict=True)
                if r.is_ok
            )
            return
        index, count = 0, len(messages)
        try:
            while index < count:
                f = self.index_files[-1] if self.index_files else None
                stop = index  # no file yet or a full one: the Python path creates the next
                if f is not None and not f.is_write_full:
                    stop, self.last_indexed_phy_offset = f.put_messages_native(
                        messages, results, index, self.last_indexed_phy_offset
                    )
                    if stop > index:
                        self._dirty_headers.add(f)
                if stop >= count:
                    break
                m, r = messages[stop], results[stop]
                if r.is_ok:
                    self._index_one(m.topic, r.wrote_offset, r.store_timestamp_ms, m.sys_flag, m.properties_string)
                index = stop + 1
        finally:
            self._write_headers()

    def build_indexes_for_records(self, log_buf: mmap.mmap, start: int, end: int, file_from_offset: int) -> None:
        """:meth:`build_indexes` for the v1 records of one CommitLog file mapped at ``log_buf`` in [start, end)
        (a stored MessageBatch), with the C loop; the Python path takes the record it stops at (a fresh or full
        index file). Event loop. Raises OSError when a new file cannot be created."""
        pos = start
        try:
            while pos < end:
                f = self.index_files[-1] if self.index_files else None
                stop = pos
                if f is not None and not f.is_write_full:
                    stop, self.last_indexed_phy_offset = f.put_records_native(
                        log_buf, pos, end, file_from_offset, self.last_indexed_phy_offset
                    )
                    if stop > pos:
                        self._dirty_headers.add(f)
                if stop >= end:
                    break
                raw = log_buf[stop : stop + int.from_bytes(log_buf[stop : stop + 4], "big")]
                msg = decode_message(raw, check_crc=False)
                properties = record_properties(raw)
                self._index_one(msg.topic, file_from_offset + stop, msg.store_timestamp_ms, msg.sys_flag, properties)
                pos = stop + msg.store_size
        finally:
            self._write_headers()

    def _index_one(self, topic: str, offset: int, timestamp_ms: int, sys_flag: int, properties: str) -> int:
        if offset <= self.last_indexed_phy_offset:
            return 0
        if sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            return 0
        hashes: list[int] = []
        uniq_key = property_value(properties, _UNIQ_KEY)
        if uniq_key:
            hashes.append(index_key_hash(topic, uniq_key))
        keys = property_value(properties, MessageConst.KEYS)
        if keys:
            hashes.extend(index_key_hash(topic, k) for k in keys.split(MessageConst.KEY_SEPARATOR) if k)
        written = 0
        while written < len(hashes):
            f = self._last_file_with_room()
            self._dirty_headers.add(f)
            put = f.put_keys(hashes[written:] if written else hashes, offset, timestamp_ms)
            if put == 0:
                raise OSError(f"index file {f.file_path} refused a key right after its creation")
            written += put
        self.last_indexed_phy_offset = offset
        return written

    def _write_headers(self) -> None:
        dirty, self._dirty_headers = self._dirty_headers, set()
        for f in dirty:
            if not f.is_closed:
                f.write_header()

    def reserve(self, entries: int) -> None:
        """Make room for ``entries`` more entries in the last file (creating it if needed) before the
        CommitLog append, so a full disk refuses the put instead of failing the index afterwards.
        Event loop. Raises OSError (ENOSPC)."""
        self._last_file_with_room().reserve_entries(entries)

    def _last_file_with_room(self) -> IndexFile:
        """IndexService#getAndCreateLastIndexFile: the last file, or a new one continuing the full one."""
        last = self.index_files[-1] if self.index_files else None
        if last is not None and not last.is_write_full:
            return last
        if last is not None:
            last.write_header()
        self.index_dir.mkdir(parents=True, exist_ok=True)
        name = _index_file_name(int(time.time() * 1000), last.file_path.name if last is not None else None)
        f = IndexFile(
            self.index_dir / name,
            self.hash_slot_num,
            self.index_num,
            end_phy_offset=last.end_phy_offset if last is not None else 0,
            end_timestamp_ms=last.end_timestamp_ms if last is not None else 0,
        )
        self.index_files.append(f)
        log.info("index_file_created", file=name)
        return f

    # --- query (event loop) ----------------------------------------------------------------------------------

    def iter_phy_offsets(self, topic: str, key: str, begin_ms: int, end_ms: int) -> Iterator[int]:
        """Candidate CommitLog offsets for ``key`` of ``topic`` stored within [begin_ms, end_ms], newest first
        (files newest to oldest, each file's chain newest to oldest). Hash collisions included: check the
        message. Mirrors IndexService#queryOffset.
        """
        key_hash = index_key_hash(topic, key)
        for f in list(reversed(self.index_files)):
            if f.is_closed:
                continue
            # A truncated file's end time is its last entry's (whole seconds): widen by just under 1 s.
            if f.is_time_matched(begin_ms - TIME_DIFF_UNIT_MS + 1, end_ms):
                try:
                    yield from f.iter_phy_offsets(key_hash, begin_ms, end_ms)
                except ValueError:  # deleted (closed) by the clean service meanwhile
                    continue
            if f.begin_timestamp_ms < begin_ms:
                return

    def query_messages(
        self, commit_log: CommitLog, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> QueryMessageResult:
        """Up to ``max_num`` messages of ``topic`` having ``key`` among their KEYS or as UNIQ_KEY, stored within
        [begin_ms, end_ms], newest first. Each candidate is read back (CRC checked) and kept only when its
        topic, key and store time really match (hashes collide). Mirrors DefaultMessageStore#queryMessage.
        """
        found: list[bytes] = []
        seen: set[int] = set()
        for inspected, phy in enumerate(self.iter_phy_offsets(topic, key, begin_ms, end_ms)):
            if len(found) >= max_num or inspected >= MAX_QUERY_CANDIDATES:
                break
            if phy in seen:
                continue
            seen.add(phy)
            raw = read_record(commit_log, phy)
            if raw is not None and _matches(raw, phy, topic, key, begin_ms, end_ms):
                found.append(raw)
        last = self.index_files[-1] if self.index_files else None
        return QueryMessageResult(
            tuple(found),
            index_last_update_timestamp_ms=last.end_timestamp_ms if last is not None else 0,
            index_last_update_phy_offset=last.end_phy_offset if last is not None else 0,
        )

    # --- flush (flusher thread) and clean-up -------------------------------------------------------------------

    def flush(self) -> int:
        """msync every file (the full ones once more is cheap: nothing dirty). Returns the newest entry's store
        timestamp (for the checkpoint's indexMsgTimestamp). Flusher thread. Raises OSError.
        """
        with self._files_lock:
            files = list(self.index_files)
            end_ts = files[-1].end_timestamp_ms if files else 0
            for f in files:
                name = f.file_path.name
                if name in self._flushed_full:
                    continue
                full = f.is_write_full  # read before the msync: a file full now stays unchanged
                f.flush()
                if full:
                    self._flushed_full.add(name)
        return end_ts

    def delete_expired_file(self, min_commit_log_offset: int) -> int:
        """Delete the files (never the last) whose every entry points below ``min_commit_log_offset`` (the
        CommitLog's first file was deleted). Returns the number deleted. Mirrors IndexService#deleteExpiredFile.
        """
        deleted = 0
        with self._files_lock:
            while len(self.index_files) > 1 and self.index_files[0].end_phy_offset < min_commit_log_offset:
                f = self.index_files.pop(0)
                self._flushed_full.discard(f.file_path.name)
                f.destroy()
                deleted += 1
        if deleted:
            log.info("index_files_deleted", count=deleted, min_commit_log_offset=min_commit_log_offset)
        return deleted

    def close(self) -> None:
        with self._files_lock:
            for f in self.index_files:
                f.close()


def _matches(raw: bytes, phy: int, topic: str, key: str, begin_ms: int, end_ms: int) -> bool:
    try:
        msg = decode_message(raw, check_crc=True, decompress=False)
    except MessageDecodeError as exc:
        log.warning("query_message_unreadable", commit_log_offset=phy, error=str(exc))
        return False
    if msg.topic != topic or not begin_ms <= msg.store_timestamp_ms <= end_ms:
        return False
    return msg.uniq_key == key or key in msg.keys
