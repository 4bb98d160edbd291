"""ReputMessageService of a slave: the ConsumeQueue units and index entries of replicated CommitLog bytes.

Mirrors org.apache.rocketmq.store.DefaultMessageStore.ReputMessageService#doReput (with
CommitLogDispatcherBuildConsumeQueue and CommitLogDispatcherBuildIndex). The bytes of one mapped file are walked a
run at a time: :func:`scan_records` gathers the ConsumeQueue units of every topic-queue of the run (the C loop
``_native.reput_records`` when the extension is built and ``native_append_enable`` is on, else its Python twin
here, which gives the same :class:`ReputRun`; tests/broker/test_broker_reput.py compares them), then each queue's
units are written with one call and the index entries of the run with the C index loop (Python: per record).

An END_OF_FILE filler moves the walk to the next file once the filler is fully written; a record not fully written
yet ends the walk (the next frame completes it). Event loop only: the mapped files must not change under a walk.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mq_common.record_layout import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_BYTES,
    TOTAL_AND_MAGIC,
)

from mq_broker.store import native_append
from mq_broker.store.commit_log import CommitLog, DispatchRequest, parse_dispatch
from mq_broker.store.config import MessageStoreConfig
from mq_broker.store.consume_queue import CQ_UNIT, ConsumeQueue
from mq_broker.store.index_service import IndexService
from mq_broker.store.mapped_file import MappedFile
from mq_broker.store.message import is_dispatchable

MAX_QUEUES_PER_RUN: Final = 256
"""Topic-queues one run gathers (the C loop's table); a run stops before the record of one more."""


@dataclass(frozen=True, slots=True)
class QueueUnits:
    """The ConsumeQueue units of one topic-queue in a run: 20 bytes each (commit log offset i64, size i32, tags
    code i64, big-endian) for consecutive queue offsets from ``first_queue_offset``."""

    topic: str
    queue_id: int
    first_queue_offset: int
    units: bytes


@dataclass(frozen=True, slots=True)
class ReputRun:
    """What one walk over a file found: ``stop`` (file position of the first byte not walked: an END_OF_FILE
    filler, a record not fully written, the limit, a record for the next run, or the corrupt bytes), the number of
    ``records`` walked and the last one's STORETIMESTAMP, ``corrupt`` (bytes that are no record at their offset),
    and the units per topic-queue in the order of their first record. ``requests``: the Python walk's parsed
    records (for the index), None from the C loop."""

    stop: int
    records: int
    last_store_timestamp_ms: int
    corrupt: bool
    queues: tuple[QueueUnits, ...]
    requests: tuple[DispatchRequest, ...] | None = field(default=None, compare=False)


def scan_records(
    buf: mmap.mmap, start: int, written: int, limit: int, file_size: int, file_from_offset: int, *, native: bool
) -> ReputRun:
    """Walk the v1 records of one CommitLog file (``buf``, ``file_size`` bytes at ``file_from_offset``, written up
    to ``written``) from ``start`` while a record starts before ``limit``; the C loop when ``native`` (the caller
    checked native_append.AVAILABLE), else the Python one. Raises ValueError for a range outside ``buf``."""
    if native:
        stop, records, last_ts, corrupt, queues = native_append.reput_records(
            buf, start, written, limit, file_size, file_from_offset
        )
        return ReputRun(stop, records, last_ts, corrupt, tuple(QueueUnits(*q) for q in queues))
    return _scan_python(buf, start, written, limit, file_size, file_from_offset)


def _record_at(buf: mmap.mmap, pos: int, written: int, file_size: int) -> int:
    """1: a whole record to walk; 0: stop before it (filler, not fully written, < 8 bytes); -1: no record."""
    if written - pos < END_FILE_MIN_BLANK_LENGTH:
        return 0
    total, magic = TOTAL_AND_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE and total == file_size - pos:
        return 0
    if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_BYTES:
        return -1
    if pos + total > written:
        return -1 if total > file_size - pos else 0
    return 1


@dataclass(slots=True)
class _Gathered:
    first_queue_offset: int
    next_queue_offset: int
    units: list[bytes]


def _scan_python(
    buf: mmap.mmap, start: int, written: int, limit: int, file_size: int, file_from_offset: int
) -> ReputRun:
    if not 0 <= start <= written <= file_size <= len(buf):
        raise ValueError("the range passes the commit log file")
    pos, corrupt = start, False
    queues: dict[tuple[str, int], _Gathered] = {}
    requests: list[DispatchRequest] = []
    while pos < limit:
        at = _record_at(buf, pos, written, file_size)
        if at == 0:
            break
        total = TOTAL_AND_MAGIC.unpack_from(buf, pos)[0]
        request = parse_dispatch(buf[pos : pos + total], file_from_offset + pos, check_crc=False) if at > 0 else None
        if request is None:
            corrupt = True
            break
        if is_dispatchable(request.sys_flag) and not _gather(queues, request):
            break
        requests.append(request)
        pos += total
    return ReputRun(
        pos,
        len(requests),
        requests[-1].store_timestamp_ms if requests else 0,
        corrupt,
        tuple(QueueUnits(t, q, g.first_queue_offset, b"".join(g.units)) for (t, q), g in queues.items()),
        tuple(requests),
    )


def _gather(queues: dict[tuple[str, int], _Gathered], request: DispatchRequest) -> bool:
    """Add ``request``'s unit to its queue; False (nothing added) for a run's 257th queue or a queue offset that
    does not follow its queue's last one."""
    key = (request.topic, request.queue_id)
    gathered = queues.get(key)
    if gathered is None:
        if len(queues) == MAX_QUEUES_PER_RUN:
            return False
        gathered = queues[key] = _Gathered(request.queue_offset, request.queue_offset, [])
    elif request.queue_offset != gathered.next_queue_offset:
        return False
    gathered.units.append(CQ_UNIT.pack(request.commit_log_offset, request.msg_size, request.tags_code))
    gathered.next_queue_offset = request.queue_offset + 1
    return True


class ReputMessageService:
    """The slave's dispatch of replicated records into ``consume_queue(topic, queue_id)`` (created on demand) and
    the index. Event loop."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        index_service: IndexService,
        consume_queue: Callable[[str, int], ConsumeQueue],
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.index_service = index_service
        self._consume_queue = consume_queue

    def do_reput(self, from_offset: int, max_bytes: int, arrived: set[tuple[str, int]]) -> int:
        """Dispatch the whole records from ``from_offset`` (those starting within ``max_bytes``); returns the offset
        reached and adds each (topic, queue id) given units to ``arrived``. Raises ValueError for bytes that are no
        record (a corrupt replica; the records before them are dispatched) and OSError when a ConsumeQueue or index
        file cannot be created."""
        native = self.config.native_append_enable and native_append.AVAILABLE
        offset, limit = from_offset, from_offset + max_bytes
        while offset < limit:
            mapped = self.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
            if mapped is None:
                break
            pos, written, size = offset - mapped.file_from_offset, mapped.wrote_position, mapped.file_size_bytes
            if written - pos < END_FILE_MIN_BLANK_LENGTH:
                break
            if _is_filler(mapped, pos):
                if written < size:
                    break  # the filler's zeros are still coming
                offset = mapped.file_end_offset
                continue
            run = scan_records(mapped.buffer, pos, written, pos + limit - offset, size, mapped.file_from_offset,
                               native=native)  # fmt: skip
            self._dispatch(mapped, pos, run, arrived)
            offset = mapped.file_from_offset + run.stop
            if run.corrupt:
                raise ValueError(f"no valid record at replicated commit log offset {offset}")
            if run.stop == pos:
                break  # the rest of the record is in the next frame
        return offset

    def _dispatch(self, mapped: MappedFile, pos: int, run: ReputRun, arrived: set[tuple[str, int]]) -> None:
        if run.records == 0:
            return
        table = self.commit_log.topic_queue_table
        for q in run.queues:
            cq = self._consume_queue(q.topic, q.queue_id)
            cq.put_units_raw(q.first_queue_offset, q.units)
            cq.mapped_file_queue.after_write()
            table[f"{q.topic}-{q.queue_id}"] = q.first_queue_offset + len(q.units) // CQ_UNIT.size
            arrived.add((q.topic, q.queue_id))
        if self.config.message_index_enable:
            index = self.index_service
            if run.requests is None:
                index.build_indexes_for_records(mapped.buffer, pos, run.stop, mapped.file_from_offset)
            else:
                index.build_indexes(
                    (r.topic, r.commit_log_offset, r.store_timestamp_ms, r.sys_flag, r.properties) for r in run.requests
                )
        self.commit_log.last_store_timestamp_ms = run.last_store_timestamp_ms


def _is_filler(mapped: MappedFile, pos: int) -> bool:
    """An END_OF_FILE filler ``[remaining size][BLANK magic]`` starts at ``pos`` (at least 8 bytes are written)."""
    total, magic = TOTAL_AND_MAGIC.unpack_from(mapped.buffer, pos)
    return bool(magic == BLANK_MAGIC_CODE and total == mapped.file_size_bytes - pos)
