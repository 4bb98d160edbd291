"""The C loops of the store, when they are built (``mq_broker.store._native``), with their Python types.

The extension is compiled when the broker package is installed (setuptools ``ext-modules``; a C compiler is
needed). Without it, or with ``MQ_NO_EXTENSIONS=1`` (mq_common.extensions), :data:`AVAILABLE` is False and the
store uses its Python path (mq_common.codec.encode_message, IndexFile.put_keys, mq_broker.store.reput's record
walk), which writes the same bytes (tests/broker/test_broker_native_append.py, test_broker_reput.py). Event loop
only.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from typing import Final, NamedTuple, NoReturn, Protocol

from mq_common.extensions import extensions_disabled


class AppendRecords(Protocol):
    """Mirrors CommitLog.DefaultAppendMessageCallback#doAppend for a run of messages.

    Appends ``messages[start:]`` as v1 records into ``buf`` (one mapped file of ``file_size`` bytes at CommitLog
    offset ``file_from_offset``) from ``wrote_position`` while each record fits with room for the 8-byte
    END_OF_FILE blank and needs no refusal (body over ``max_body_bytes``, topic over 127 bytes, properties over
    32,767 bytes, record over ``max_record_bytes``). Returns ``(stop, new wrote_position, placed)``: ``stop`` is
    the first message not appended; ``placed`` has one ``(physical offset, size, queue offset, tags code,
    dispatchable, sys flag)`` per appended message. ``topic_queue_table`` ('topic-queueId' -> next queue offset)
    advances for dispatchable messages. Raises TypeError/ValueError when the message at ``start`` is malformed.
    """

    def __call__(
        self,
        buf: mmap.mmap,
        wrote_position: int,
        file_size: int,
        file_from_offset: int,
        messages: Sequence[object],
        start: int,
        topic_queue_table: dict[str, int],
        store_timestamp_ms: int,
        store_host: bytes,
        max_body_bytes: int,
        max_record_bytes: int,
        /,
    ) -> tuple[int, int, list[tuple[int, int, int, int, bool, int]]]: ...


class IndexMessages(Protocol):
    """Mirrors IndexService#buildIndex for ``messages[start:]`` into one index file mapped at ``buf``.

    RocketMQ's layout: 40-byte header, ``hash_slot_num`` 4-byte slots, 20-byte entries. One entry for the
    UNIQ_KEY and one per KEYS word of each stored message (``results[i].wrote_offset`` >= 0) past
    ``last_indexed_phy_offset``; rolled-back transactions are skipped. Stops before a message whose entries would
    pass ``max_index_count`` or when the file has no entry yet. Returns ``(stop, index count, new hash slots,
    offset of the last message given entries or -1, its store timestamp ms, last indexed offset)``; the header
    is left to the caller.
    """

    def __call__(
        self,
        buf: mmap.mmap,
        hash_slot_num: int,
        index_count: int,
        max_index_count: int,
        begin_timestamp_ms: int,
        messages: Sequence[object],
        results: Sequence[object],
        start: int,
        last_indexed_phy_offset: int,
        /,
    ) -> tuple[int, int, int, int, int, int]: ...


class ScanBatch(Protocol):
    """Walks a MessageBatch body (mq_common.batch_codec) whose messages get ``batch_properties`` appended and
    whose v1 records have ``record_fixed_bytes`` besides body and properties. Returns ``(count, index keys,
    largest body, largest stored properties, largest record, bytes of all records)``. Raises ValueError for a
    malformed body."""

    def __call__(
        self, body: bytes, batch_properties: bytes, record_fixed_bytes: int, /
    ) -> tuple[int, int, int, int, int, int]: ...


class AppendBatch(Protocol):
    """Mirrors MessageExtEncoder#encodeBatch + doAppend(MessageExtBatch): every message of ``body`` as a v1
    record into ``buf`` from ``wrote_position`` (the caller checked the body with ScanBatch and the room), queue
    offsets from ``first_queue_offset``. Returns ``(new wrote_position, ConsumeQueue units (20 bytes each),
    offset msg ids joined with commas)``."""

    def __call__(
        self,
        buf: mmap.mmap,
        wrote_position: int,
        file_from_offset: int,
        body: bytes,
        topic: str,
        queue_id: int,
        first_queue_offset: int,
        sys_flag: int,
        born_timestamp_ms: int,
        born_host: bytes,
        store_timestamp_ms: int,
        store_host: bytes,
        batch_properties: bytes,
        msg_id_prefix: str,
        /,
    ) -> tuple[int, bytes, str]: ...


class IndexRecords(Protocol):
    """IndexMessages for the v1 records of ``log_buf`` (a CommitLog file at ``file_from_offset``) in [start,
    end). Returns ``(position of the first record left, index count, new hash slots, offset of the last record
    given entries or -1, its store timestamp ms, last indexed offset)``."""

    def __call__(
        self,
        buf: mmap.mmap,
        hash_slot_num: int,
        index_count: int,
        max_index_count: int,
        begin_timestamp_ms: int,
        log_buf: mmap.mmap,
        start: int,
        end: int,
        file_from_offset: int,
        last_indexed_phy_offset: int,
        /,
    ) -> tuple[int, int, int, int, int, int]: ...


class ReputRecords(Protocol):
    """Mirrors ReputMessageService#doReput over the v1 records of one CommitLog file (``log_buf``, ``file_size``
    bytes at ``file_from_offset``, written up to ``written``) from ``start`` while a record starts before
    ``limit`` (mq_broker.store.reput). Returns ``(stop position, records walked, last STORETIMESTAMP ms, corrupt,
    [(topic, queue id, first queue offset, ConsumeQueue units)])``."""

    def __call__(
        self, log_buf: mmap.mmap, start: int, written: int, limit: int, file_size: int, file_from_offset: int, /
    ) -> tuple[int, int, int, bool, list[tuple[str, int, int, bytes]]]: ...


class _Functions(NamedTuple):
    append_records: AppendRecords
    index_messages: IndexMessages
    scan_batch: ScanBatch
    append_batch: AppendBatch
    index_records: IndexRecords
    reput_records: ReputRecords


def _not_built(*_args: object) -> NoReturn:
    raise RuntimeError("mq_broker.store._native is not built")


def _load() -> _Functions | None:
    if extensions_disabled():
        return None
    try:
        from mq_broker.store import _native  # type: ignore[attr-defined]  # optional C extension
    except ImportError:
        return None
    return _Functions(
        _native.append_records,
        _native.index_messages,
        _native.scan_batch,
        _native.append_batch,
        _native.index_records,
        _native.reput_records,
    )


_NATIVE: Final = _load()
AVAILABLE: Final = _NATIVE is not None
append_records: Final[AppendRecords] = _NATIVE.append_records if _NATIVE is not None else _not_built
index_messages: Final[IndexMessages] = _NATIVE.index_messages if _NATIVE is not None else _not_built
scan_batch: Final[ScanBatch] = _NATIVE.scan_batch if _NATIVE is not None else _not_built
append_batch: Final[AppendBatch] = _NATIVE.append_batch if _NATIVE is not None else _not_built
index_records: Final[IndexRecords] = _NATIVE.index_records if _NATIVE is not None else _not_built
reput_records: Final[ReputRecords] = _NATIVE.reput_records if _NATIVE is not None else _not_built
