"""CommitLog: every message of the broker, appended in RocketMQ's message format v1 to a MappedFileQueue.

Mirrors org.apache.rocketmq.store.CommitLog (putMessage/putMessages, DefaultAppendMessageCallback#doAppend,
getMessage, recoverNormally/recoverAbnormally) with the layout of mq_common.record_layout. When a record does not
fit in the rest of the current file, an END_OF_FILE blank ``[remaining size i32][BLANK magic 0xCBD43194]`` fills
the rest and the record goes to a new file.

Threads: :meth:`put_messages` runs on the event loop and never awaits, so one call is one critical section
(the write lock of RocketMQ's putMessageLock); the flusher thread only reads positions and msyncs. Reads
(:meth:`get_message`, :meth:`lookup_message`) may run on any thread.
"""

from __future__ import annotations

import errno
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_common.codec import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageDecodeError,
    MessageExt,
    decode_message,
    encode_message,
)
from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES, MessageConst
from mq_common.record_layout import (
    BLANK_MAGIC_CODE,
    BODY_LENGTH,
    BODY_LENGTH_BYTES,
    BODY_LENGTH_OFFSETS,
    END_FILE_MIN_BLANK_LENGTH,
    HEAD,
    HOST_V6_FLAGS,
    HOST_V6_SHIFT,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_BYTES,
    PHYSICAL_OFFSET,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_BYTES,
    STORE_TIMESTAMP,
    STORE_TIMESTAMP_OFFSETS,
    SYS_FLAG,
    SYS_FLAG_OFFSET,
    TOPIC_LENGTH_BYTES,
    TOTAL_AND_MAGIC,
    calc_msg_length,
    host_sysflag_bits,
)

from mq_broker.store import native_append
from mq_broker.store.config import MessageStoreConfig
from mq_broker.store.mapped_file import MappedFile
from mq_broker.store.mapped_file_queue import MappedFileQueue
from mq_broker.store.message import (
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    is_dispatchable,
    tags_string_to_tags_code,
)

# TopicValidator / DefaultMessageStore#checkMessage: the TOPICLEN field is one signed byte.
MAX_TOPIC_BYTES: Final = 127
MESSAGE_ILLEGAL_REMARK: Final = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit %dB, msg properties length limit 32KB."
)
# SendMessageProcessor's CREATE_MAPPED_FILE_FAILED remark; with a full disk the put is SERVICE_NOT_AVAILABLE.
CREATE_MAPPED_FILE_FAILED_REMARK: Final = "create mapped file failed, server is busy or broken."
_DISK_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What the ConsumeQueue (and the index) need from one stored record. Mirrors
    org.apache.rocketmq.store.DispatchRequest; ``properties`` (the record's property string, for the index keys)
    is filled when the record is read back (recovery), empty on the put path."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp_ms: int
    queue_offset: int
    sys_flag: int
    properties: str = ""


@dataclass(frozen=True, slots=True)
class _Prepared:
    """One message checked and measured, not written: its encoded topic and properties, SYSFLAG, record bytes."""

    topic: bytes
    properties: bytes
    sys_flag: int
    msg_len: int


@dataclass(frozen=True, slots=True)
class BatchAppend:
    """Where a MessageExtBatch landed: its result, the file and the byte range [start, end) of its records in
    it, and their ConsumeQueue units (20 bytes each, CQ layout, record order)."""

    result: PutMessageResult
    mapped: MappedFile
    start: int
    end: int
    cq_units: bytes


class CommitLog:
    """The broker's append-only message log. ``store_host`` is 8 or 20 bytes (codec.host_to_bytes)."""

    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        assert len(store_host) in (8, 20)
        self.config = config
        self.mapped_file_queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log_bytes)
        self.mapped_file_queue.warm_mapped_file_enable = config.warm_mapped_file_enable
        self.store_host = store_host
        self._msg_id_prefix = store_host.hex().upper()
        # "topic-queueId" -> next queue offset (CommitLog.topicQueueTable).
        self.topic_queue_table: dict[str, int] = {}
        self.last_store_timestamp_ms = 0
        self._putting = False

    # --- write path (event loop) ------------------------------------------------------------------------------

    def put_messages(
        self, batch: Sequence[MessageExtBrokerInner], now_ms: int
    ) -> tuple[list[PutMessageResult], list[DispatchRequest]]:
        """Append every message of ``batch`` (each checked on its own; a bad one fails only itself).

        Fills QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP (= ``now_ms``) and STOREHOST. Returns one result per
        message, in order, and the dispatch requests of the stored ones. Statuses: PUT_OK, MESSAGE_ILLEGAL
        (body over the limit, topic over 127 bytes, record larger than a file), PROPERTIES_SIZE_EXCEEDED
        (properties over 32,767 bytes), CREATE_MAPPED_FILE_FAILED (a new file could not be created),
        SERVICE_NOT_AVAILABLE (a new file could not be allocated: ENOSPC/EDQUOT; nothing of it was written).
        Event loop only; never awaits.
        """
        assert not self._putting, "CommitLog.put_messages is not re-entrant"
        self._putting = True
        try:
            results: list[PutMessageResult] = []
            dispatches: list[DispatchRequest] = []
            index, count = 0, len(batch)
            fast = self.config.native_append_enable and native_append.AVAILABLE
            while index < count:
                if fast:
                    index = self._append_native(batch, index, now_ms, results, dispatches)
                    if index >= count:
                        break
                result, dispatch = self._append_one(batch[index], now_ms)
                results.append(result)
                if dispatch is not None:
                    dispatches.append(dispatch)
                index += 1
            if dispatches:
                self.last_store_timestamp_ms = now_ms
            return results, dispatches
        finally:
            self._putting = False

    def _append_native(
        self,
        batch: Sequence[MessageExtBrokerInner],
        start: int,
        now_ms: int,
        results: list[PutMessageResult],
        dispatches: list[DispatchRequest],
    ) -> int:
        """Append ``batch[start:]`` with the C loop while the records fit in the current file and need no
        refusal; returns the index of the first message left to :meth:`_append_one` (a roll, a limit)."""
        mapped = self.mapped_file_queue.last_mapped_file()
        if mapped is None or mapped.is_full:
            return start
        stop, wrote_position, placed = native_append.append_records(
            mapped.buffer,
            mapped.wrote_position,
            mapped.file_size_bytes,
            mapped.file_from_offset,
            batch,
            start,
            self.topic_queue_table,
            now_ms,
            self.store_host,
            self.config.max_message_size_bytes,
            self.config.max_record_size_bytes,
        )
        mapped.wrote_position = wrote_position
        prefix = self._msg_id_prefix
        ok = PutMessageStatus.PUT_OK
        for msg, (phys, size, queue_offset, tags_code, dispatchable, sys_flag) in zip(
            batch[start:stop], placed, strict=True
        ):
            results.append(PutMessageResult(ok, phys, size, prefix + f"{phys:016X}", queue_offset, now_ms))
            if dispatchable:
                dispatches.append(
                    DispatchRequest(msg.topic, msg.queue_id, phys, size, tags_code, now_ms, queue_offset, sys_flag)
                )
        return stop

    def put_message_batch(
        self, batch: MessageExtBatch, total_record_bytes: int, count: int, now_ms: int
    ) -> BatchAppend:
        """Append every message of ``batch`` (already scanned: well formed, within the limits, ``count`` records
        of ``total_record_bytes``) in one file with the C loop, with consecutive queue offsets; the batch goes
        whole to the next file when it does not fit in the current one. Mirrors CommitLog#asyncPutMessages.
        Raises OSError when a new file cannot be created (nothing written). Event loop only; never awaits.
        """
        assert not self._putting, "CommitLog.put_message_batch is not re-entrant"
        assert native_append.AVAILABLE
        assert total_record_bytes + END_FILE_MIN_BLANK_LENGTH <= self.config.mapped_file_size_commit_log_bytes
        self._putting = True
        try:
            mapped = self._file_with_room(total_record_bytes)
            key = f"{batch.topic}-{batch.queue_id}"
            first = self.topic_queue_table.get(key, 0)
            start = mapped.wrote_position
            end, units, msg_ids = native_append.append_batch(
                mapped.buffer,
                start,
                mapped.file_from_offset,
                batch.body,
                batch.topic,
                batch.queue_id,
                first,
                batch.sys_flag,
                batch.born_timestamp_ms,
                batch.born_host,
                now_ms,
                self.store_host,
                batch.properties_string.encode("utf-8"),
                self._msg_id_prefix,
            )
            assert end - start == total_record_bytes, (end, start, total_record_bytes)
            mapped.wrote_position = end
            self.topic_queue_table[key] = first + count
            self.last_store_timestamp_ms = now_ms
            result = PutMessageResult(
                PutMessageStatus.PUT_OK,
                wrote_offset=mapped.file_from_offset + start,
                wrote_bytes=end - start,
                msg_id=msg_ids,
                queue_offset=first,
                store_timestamp_ms=now_ms,
                msg_num=count,
            )
            return BatchAppend(result, mapped, start, end, units)
        finally:
            self._putting = False

    def _check_limits(self, msg: MessageExtBrokerInner, topic: bytes, properties: bytes) -> PutMessageStatus | None:
        if len(msg.body) > self.config.max_message_size_bytes or len(topic) > MAX_TOPIC_BYTES:
            return PutMessageStatus.MESSAGE_ILLEGAL
        if len(properties) > MAX_PROPERTIES_SIZE_BYTES:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        return None

    def put_messages_whole(
        self, batch: Sequence[MessageExtBrokerInner], now_ms: int
    ) -> tuple[list[PutMessageResult], list[DispatchRequest]]:
        """Append every message of ``batch`` in one file, or none: the Python path of a MessageBatch put, all or
        none like :meth:`put_message_batch`'s C loop. Every message is checked and the whole batch's record bytes
        counted before anything is written; the batch goes whole to the next file when it does not fit in the
        current one. Returns :meth:`put_messages`'s shapes; on a refusal every message carries it and nothing is
        written: MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED (a message over a limit, or records larger than one
        file), CREATE_MAPPED_FILE_FAILED, SERVICE_NOT_AVAILABLE (ENOSPC/EDQUOT) when the next file cannot be
        created. Mirrors CommitLog#asyncPutMessages (MessageExtBatch). Event loop only; never awaits.
        """
        assert not self._putting, "CommitLog.put_messages_whole is not re-entrant"
        self._putting = True
        try:
            prepared: list[_Prepared] = []
            for msg in batch:
                one = self._prepare(msg)
                if isinstance(one, PutMessageResult):
                    return [one] * len(batch), []
                prepared.append(one)
            total = sum(p.msg_len for p in prepared)
            if total + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log_bytes:
                return [self._illegal(PutMessageStatus.MESSAGE_ILLEGAL)] * len(batch), []
            mapped = self._file_with_room_or_refusal(total)
            if isinstance(mapped, PutMessageResult):
                return [mapped] * len(batch), []
            results: list[PutMessageResult] = []
            dispatches: list[DispatchRequest] = []
            for msg, one in zip(batch, prepared, strict=True):
                result, dispatch = self._write(mapped, msg, one, now_ms)
                results.append(result)
                if dispatch is not None:
                    dispatches.append(dispatch)
            if dispatches:
                self.last_store_timestamp_ms = now_ms
            return results, dispatches
        finally:
            self._putting = False

    def _prepare(self, msg: MessageExtBrokerInner) -> _Prepared | PutMessageResult:
        """``msg``'s encoded fields and record length, or its refusal (a limit); writes nothing."""
        if len(msg.born_host) not in (8, 20):
            raise ValueError(f"born_host must be 8 or 20 bytes, got {len(msg.born_host)}")
        topic = msg.topic.encode("utf-8")
        properties = msg.properties_string.encode("utf-8")
        refused = self._check_limits(msg, topic, properties)
        if refused is not None:
            return self._illegal(refused)
        sys_flag = (msg.sys_flag & ~HOST_V6_FLAGS) | host_sysflag_bits(msg.born_host, self.store_host)
        msg_len = calc_msg_length(sys_flag, len(msg.body), len(topic), len(properties))
        file_size = self.config.mapped_file_size_commit_log_bytes
        if msg_len > self.config.max_record_size_bytes or msg_len + END_FILE_MIN_BLANK_LENGTH > file_size:
            return self._illegal(PutMessageStatus.MESSAGE_ILLEGAL)
        return _Prepared(topic, properties, sys_flag, msg_len)

    def _append_one(self, msg: MessageExtBrokerInner, now_ms: int) -> tuple[PutMessageResult, DispatchRequest | None]:
        prepared = self._prepare(msg)
        if isinstance(prepared, PutMessageResult):
            return prepared, None
        mapped = self._file_with_room_or_refusal(prepared.msg_len)
        if isinstance(mapped, PutMessageResult):
            return mapped, None
        return self._write(mapped, msg, prepared, now_ms)

    def _write(
        self, mapped: MappedFile, msg: MessageExtBrokerInner, prepared: _Prepared, now_ms: int
    ) -> tuple[PutMessageResult, DispatchRequest | None]:
        """Encode ``msg`` at ``mapped``'s write position (which has room for it) and advance the queue offset."""
        sys_flag, msg_len = prepared.sys_flag, prepared.msg_len
        dispatchable = is_dispatchable(sys_flag)
        key = f"{msg.topic}-{msg.queue_id}"
        queue_offset = self.topic_queue_table.get(key, 0) if dispatchable else 0
        phys = mapped.file_from_offset + mapped.wrote_position
        record = encode_message(
            topic=prepared.topic,
            body=msg.body,
            properties=prepared.properties,
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=queue_offset,
            physical_offset=phys,
            sys_flag=sys_flag,
            born_timestamp_ms=msg.born_timestamp_ms,
            born_host=msg.born_host,
            store_timestamp_ms=now_ms,
            store_host=self.store_host,
            reconsume_times=msg.reconsume_times,
        )
        assert len(record) == msg_len
        mapped.append_record(record)
        result = PutMessageResult(
            PutMessageStatus.PUT_OK,
            wrote_offset=phys,
            wrote_bytes=msg_len,
            msg_id=self._msg_id_prefix + PHYSICAL_OFFSET.pack(phys).hex().upper(),
            queue_offset=queue_offset,
            store_timestamp_ms=now_ms,
        )
        if not dispatchable:
            return result, None
        self.topic_queue_table[key] = queue_offset + 1
        return result, DispatchRequest(
            msg.topic, msg.queue_id, phys, msg_len, msg.tags_code, now_ms, queue_offset, sys_flag
        )

    def _file_with_room_or_refusal(self, record_bytes: int) -> MappedFile | PutMessageResult:
        """:meth:`_file_with_room`, or the refusal when the next file cannot be created (nothing written):
        SERVICE_NOT_AVAILABLE for ENOSPC/EDQUOT, else CREATE_MAPPED_FILE_FAILED."""
        try:
            return self._file_with_room(record_bytes)
        except OSError as exc:
            if exc.errno in _DISK_FULL_ERRNOS:
                remark = f"{CREATE_MAPPED_FILE_FAILED_REMARK} The broker's disk is full: {exc}"
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=remark)
            return PutMessageResult(
                PutMessageStatus.CREATE_MAPPED_FILE_FAILED, remark=f"{CREATE_MAPPED_FILE_FAILED_REMARK} {exc}"
            )

    def _illegal(self, status: PutMessageStatus) -> PutMessageResult:
        return PutMessageResult(status, remark=MESSAGE_ILLEGAL_REMARK % self.config.max_message_size_bytes)

    def _file_with_room(self, msg_len: int) -> MappedFile:
        """The current file if ``msg_len`` + the 8-byte blank fit, else END_OF_FILE it and roll to a new one."""
        mapped = self.mapped_file_queue.get_last_mapped_file()
        remaining = mapped.remaining_bytes
        if msg_len + END_FILE_MIN_BLANK_LENGTH <= remaining:
            return mapped
        assert remaining >= END_FILE_MIN_BLANK_LENGTH
        mapped.append(TOTAL_AND_MAGIC.pack(remaining, BLANK_MAGIC_CODE))
        mapped.wrote_position = mapped.file_size_bytes
        return self.mapped_file_queue.create_next()

    # --- replication (mq_broker.ha: the slave appends what the master sends; event loop) -------------------------

    def append_data(self, start_offset: int, data: bytes | bytearray | memoryview) -> bool:
        """Append replicated CommitLog bytes at ``start_offset``, which must be the log's max offset (an empty log
        starts its first file there, so it must be a file boundary): the slave's files get the master's bytes at
        the same offsets, END_OF_FILE fillers included, and roll at the same boundaries. Written with pwrite
        (MappedFile.append_by_write: no zero-fill of each new page). Returns False (nothing written) for a gap or
        an overlap. Raises OSError when a new file cannot be created or a write fails.
        Mirrors CommitLog#appendData. Event loop only; never awaits.
        """
        mfq = self.mapped_file_queue
        if mfq.is_empty:
            if start_offset % mfq.mapped_file_size_bytes:
                return False
        elif start_offset != self.max_offset:
            return False
        view = memoryview(data)
        while view:
            mapped = mfq.get_last_mapped_file(start_offset)
            count = min(mapped.remaining_bytes, len(view))
            mapped.append_by_write(view[:count])
            view = view[count:]
        return True

    def transfer_size(self, offset: int, max_bytes: int) -> int:
        """How many written bytes from ``offset`` the master can send in one frame: up to ``max_bytes``, never past
        the end of ``offset``'s file (0: nothing written there yet, or the offset is in no file). Any thread."""
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mapped is None:
            return 0
        return max(0, min(max_bytes, mapped.wrote_position - (offset - mapped.file_from_offset)))

    # --- read path --------------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.mapped_file_queue.min_offset()

    @property
    def max_offset(self) -> int:
        """The offset the next record will be written at (or its file's blank)."""
        return self.mapped_file_queue.max_offset()

    def get_message(self, commit_log_offset: int, size: int) -> bytes | None:
        """The raw ``size`` bytes at ``commit_log_offset`` or None when they are not (fully) written."""
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(commit_log_offset)
        if mapped is None:
            return None
        pos = commit_log_offset - mapped.file_from_offset
        if size <= 0 or pos + size > mapped.wrote_position:
            return None
        raw = mapped.read(pos, size)
        return raw if len(raw) == size else None  # short: the file was deleted by the clean service meanwhile

    def read_into(self, commit_log_offset: int, out: memoryview) -> bool:
        """Copy the ``len(out)`` written bytes at ``commit_log_offset`` (within one file) into ``out``, one memcpy
        (the master's HA frames); False when they are not (fully) written or the file is gone. Any thread."""
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(commit_log_offset)
        if mapped is None:
            return False
        pos = commit_log_offset - mapped.file_from_offset
        size = len(out)
        if size <= 0 or pos + size > mapped.wrote_position:
            return False
        return mapped.read_into(pos, out) == size

    def file_position(self, commit_log_offset: int, size: int) -> tuple[Path, int] | None:
        """The CommitLog file holding the ``size`` written bytes at ``commit_log_offset`` and their position in it
        (the master's HA frames sent with sendfile); None when they are not (fully) written in one file. Any
        thread."""
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(commit_log_offset)
        if mapped is None:
            return None
        pos = commit_log_offset - mapped.file_from_offset
        return (mapped.file_path, pos) if size > 0 and pos + size <= mapped.wrote_position else None

    def is_in_page_cache(self, commit_log_offset: int, size: int) -> bool:
        """The ``size`` bytes at ``commit_log_offset`` are written and in the page cache (MappedFile's check).
        Mirrors DefaultMessageStore#checkInMemByCommitOffset."""
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(commit_log_offset)
        if mapped is None:
            return False
        pos = commit_log_offset - mapped.file_from_offset
        return size > 0 and pos + size <= mapped.wrote_position and mapped.is_in_page_cache(pos, size)

    def lookup_message(self, commit_log_offset: int) -> MessageExt | None:
        """Decode the record at ``commit_log_offset`` with its body CRC checked; None when nothing is there.

        Raises mq_common.codec.MessageDecodeError (CrcMismatchError on a CRC mismatch) for a damaged record.
        Mirrors DefaultMessageStore#lookMessageByOffset.
        """
        header = self.get_message(commit_log_offset, TOTAL_AND_MAGIC.size)
        if header is None:
            return None
        total, magic = TOTAL_AND_MAGIC.unpack(header)
        if magic != MESSAGE_MAGIC_CODE:
            raise MessageDecodeError(f"no message at commit log offset {commit_log_offset} (magic {magic:#x})")
        raw = self.get_message(commit_log_offset, total)
        if raw is None:
            raise MessageDecodeError(f"record at {commit_log_offset} claims {total} bytes past the written end")
        return decode_message(raw, check_crc=True)

    def store_timestamp_at(self, commit_log_offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``commit_log_offset`` (0 when unreadable)."""
        raw = self.get_message(commit_log_offset, size)
        if raw is None or len(raw) < HEAD.size:
            return 0
        sys_flag = SYS_FLAG.unpack_from(raw, SYS_FLAG_OFFSET)[0]
        return int(
            STORE_TIMESTAMP.unpack_from(raw, STORE_TIMESTAMP_OFFSETS[(sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT])[0]
        )

    # --- recovery (start-up, before the flusher runs) -------------------------------------------------------------

    def load(self) -> None:
        """Map the existing files. Raises OSError on a wrong size or a gap."""
        self.mapped_file_queue.load()

    def recover(self, dispatch_from: int, dispatch: Callable[[DispatchRequest], None], *, zero_tail: bool) -> int:
        """Re-read the log from ``min(dispatch_from, start of the last file)``, hand every valid record to
        ``dispatch`` and cut the log at the first invalid one (torn write, CRC mismatch, wrong PHYSICALOFFSET,
        zeros). ``zero_tail`` (after a crash) clears the rest of the cut file. Returns the valid end offset.
        Mirrors CommitLog#recoverNormally/#recoverAbnormally.
        """
        mfq = self.mapped_file_queue
        last = mfq.last_mapped_file()
        if last is None:
            return 0
        start = max(mfq.min_offset(), min(dispatch_from, last.file_from_offset))
        mapped = mfq.find_mapped_file_by_offset(start)
        assert mapped is not None
        end = self._scan(mfq.mapped_files.index(mapped), start - mapped.file_from_offset, dispatch)
        mfq.truncate_dirty_files(end, zero_tail=zero_tail, zero_run_stop_bytes=2 * self.config.max_record_size_bytes)
        return end

    def is_offset_aligned(self, offset: int) -> bool:
        """A valid record (CRC checked), a file's END_OF_FILE blank or the log's end starts at ``offset`` (the log
        may be cut there). Any thread. Mirrors DefaultMessageStore#isOffsetAligned."""
        if offset == self.max_offset:
            return True
        mapped = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mapped is None:
            return False
        pos = offset - mapped.file_from_offset
        if pos >= mapped.wrote_position:
            return False
        size, request = self._check_message_and_return_size(mapped, pos)
        return size == 0 or request is not None

    def _scan(self, index: int, pos: int, dispatch: Callable[[DispatchRequest], None]) -> int:
        files = self.mapped_file_queue.mapped_files
        while index < len(files):
            mapped = files[index]
            while True:
                size, request = self._check_message_and_return_size(mapped, pos)
                if size > 0 and request is not None:
                    dispatch(request)
                    self.last_store_timestamp_ms = request.store_timestamp_ms
                    pos += size
                elif size == 0:
                    break  # END_OF_FILE blank: the next file continues the log
                else:
                    return mapped.file_from_offset + pos
            index += 1
            pos = 0
        return files[-1].file_end_offset

    def _check_message_and_return_size(
        self, mapped: MappedFile, pos: int, *, check_crc: bool | None = None
    ) -> tuple[int, DispatchRequest | None]:
        """(size, request) for a valid record; (0, None) for the END_OF_FILE blank; (-1, None) otherwise."""
        remaining = mapped.file_size_bytes - pos
        if remaining == 0:
            return 0, None
        if remaining < END_FILE_MIN_BLANK_LENGTH:
            return -1, None
        total, magic = TOTAL_AND_MAGIC.unpack_from(mapped.buffer, pos)
        if magic == BLANK_MAGIC_CODE and total == remaining:
            return 0, None
        if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_BYTES or total > remaining:
            return -1, None
        raw = mapped.read(pos, total)
        crc = self.config.check_crc_on_recover if check_crc is None else check_crc
        request = parse_dispatch(raw, mapped.file_from_offset + pos, crc)
        return (total, request) if request is not None else (-1, None)


def parse_dispatch(raw: bytes, expected_phys: int, check_crc: bool) -> DispatchRequest | None:
    """The dispatch request of the whole v1 record ``raw`` stored at ``expected_phys``, or None when a field does not
    add up (PHYSICALOFFSET, lengths, UTF-8 of topic and properties, the body CRC when ``check_crc``)."""
    try:
        total, _magic, crc, queue_id, _flag, queue_offset, phys, sys_flag, _born = HEAD.unpack_from(raw, 0)
        if phys != expected_phys:
            return None
        hosts = (sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT
        store_ts = STORE_TIMESTAMP.unpack_from(raw, STORE_TIMESTAMP_OFFSETS[hosts])[0]
        p = BODY_LENGTH_OFFSETS[hosts]
        body_len = BODY_LENGTH.unpack_from(raw, p)[0]
        p += BODY_LENGTH_BYTES
        if body_len < 0 or p + body_len > total:
            return None
        if check_crc and zlib.crc32(raw[p : p + body_len]) & 0x7FFFFFFF != crc:
            return None
        p += body_len
        topic_len = raw[p]
        p += TOPIC_LENGTH_BYTES
        topic = raw[p : p + topic_len].decode("utf-8")
        p += topic_len
        props_len = PROPERTIES_LENGTH.unpack_from(raw, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        if p + props_len != total:
            return None
        properties = raw[p : p + props_len].decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    tags = last_property_value(properties, MessageConst.TAGS)
    return DispatchRequest(
        topic, queue_id, phys, total, tags_string_to_tags_code(tags), store_ts, queue_offset, sys_flag, properties
    )


def last_property_value(properties: str, name: str) -> str | None:
    """The value of the last ``name`` in a ``k\\x01v\\x02`` property string (the one a decoded map keeps),
    without decoding the rest."""
    needle = name + NAME_VALUE_SEPARATOR
    i = properties.rfind(needle)
    while i > 0 and properties[i - 1] != PROPERTY_SEPARATOR:
        i = properties.rfind(needle, 0, i)
    if i < 0:
        return None
    start = i + len(needle)
    end = properties.find(PROPERTY_SEPARATOR, start)
    return properties[start:] if end < 0 else properties[start:end]
