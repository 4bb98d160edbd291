"""The store's read and query side: queue offsets, timestamps, pulls and key/offset lookups.

Mirrors the read half of org.apache.rocketmq.store.DefaultMessageStore (#getMessage, #getMinOffsetInQueue,
#getMaxOffsetInQueue, #getMessageStoreTimeStamp, #getOffsetInQueueByTime, #checkInMemByConsumeOffset,
#queryMessage, #selectOneMessageByOffset, #lookMessageByOffset). DefaultMessageStore delegates to one
:class:`QueueReader` built over its CommitLog, IndexService and ConsumeQueue table (the same dict, so queues
created or deleted later are seen). Every method runs on the event loop and never blocks beyond page-cache reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mq_common.codec import MessageExt

from mq_broker.store.commit_log import CommitLog
from mq_broker.store.config import CQ_UNIT_SIZE_BYTES, MessageStoreConfig
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.index_service import MAX_TIMESTAMP_MS, IndexService, QueryMessageResult, read_record
from mq_broker.store.message import GetMessageResult, GetMessageStatus
from mq_broker.store.message_filter import MessageFilter

# ConsumeQueue units read per call while scanning a queue for a pull.
READ_UNITS_CHUNK: Final = 256


class QueueReader:
    """Reads of one store. ``consume_queue_table``: the store's live table, keyed by (topic, queue id)."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        index_service: IndexService,
        consume_queue_table: Mapping[tuple[str, int], ConsumeQueue],
    ) -> None:
        self._config = config
        self._commit_log = commit_log
        self._index_service = index_service
        self._table = consume_queue_table

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._table.get((topic, queue_id))

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id)
        return cq.min_offset_in_queue if cq is not None else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The next queue offset to be written (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id)
        return cq.max_offset_in_queue if cq is not None else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """STORETIMESTAMP (ms) of the message at ``queue_offset``, 0 when there is none."""
        cq = self.find_consume_queue(topic, queue_id)
        return self._store_timestamp(cq, queue_offset) if cq is not None else 0

    def _store_timestamp(self, cq: ConsumeQueue, queue_offset: int) -> int:
        unit = cq.get_unit(queue_offset)
        if unit is None or unit.is_blank:
            return 0
        return self._commit_log.store_timestamp_at(unit.commit_log_offset, unit.size)

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """The message at ``consume_offset`` exists and its bytes are in the page cache (reading it costs no disk
        I/O). A mincore call. Mirrors DefaultMessageStore#checkInMemByConsumeOffset (batch of 1)."""
        cq = self.find_consume_queue(topic, queue_id)
        unit = cq.get_unit(consume_offset) if cq is not None else None
        if unit is None or unit.is_blank:
            return False
        return self._commit_log.is_in_page_cache(unit.commit_log_offset, unit.size)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms`` (ms since the epoch): the
        max offset when every message is older, the min offset when every one is newer (0 for an unknown queue).
        Binary search over the units' STORETIMESTAMPs read from the CommitLog (store times of one queue do not
        decrease); a unit whose message is gone counts as older. O(log n) page-cache reads. Mirrors
        ConsumeQueue#getOffsetInQueueByTime (BoundaryType.LOWER).
        """
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        low, high = cq.min_offset_in_queue, cq.max_offset_in_queue
        while low < high:
            mid = (low + high) // 2
            if self._store_timestamp(cq, mid) < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return low

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryMessageResult:
        """Messages of ``topic`` with ``key`` (a KEYS word or the UNIQ_KEY) stored within [begin_ms, end_ms],
        newest first, at most min(max_num, max_msgs_num_batch); each verified against the stored record.
        Mirrors DefaultMessageStore#queryMessage.
        """
        max_num = max(1, min(max_num, self._config.max_msgs_num_batch))
        return self._index_service.query_messages(self._commit_log, topic, key, max_num, begin_ms, end_ms)

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> QueryMessageResult:
        """Messages whose UNIQ_KEY is ``uniq_key`` (several when a send was retried), newest first, at most
        default_query_max_num (QueryMessageProcessor with UNIQUE_MSG_QUERY_FLAG).
        """
        return self._index_service.query_messages(
            self._commit_log, topic, uniq_key, self._config.default_query_max_num, 0, MAX_TIMESTAMP_MS
        )

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        """The whole record starting at ``commit_log_offset`` (raw, not CRC checked), None when no record starts
        there. Mirrors DefaultMessageStore#selectOneMessageByOffset.
        """
        return read_record(self._commit_log, commit_log_offset)

    def lookup_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The message at a CommitLog offset, CRC checked. Raises mq_common.codec.MessageDecodeError."""
        return self._commit_log.lookup_message(commit_log_offset)

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_nums`` messages (raw v1 records) of one queue from logical ``offset``.

        Statuses as GetMessageStatus: FOUND, NO_MATCHED_MESSAGE (scanned units did not match the filter; the
        next offset moves past them), NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE (queue never written),
        OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE (``offset`` == max: caught up), OFFSET_OVERFLOW_BADLY,
        OFFSET_FOUND_NULL, MESSAGE_WAS_REMOVING. Mirrors DefaultMessageStore#getMessage.
        """
        cq = self.find_consume_queue(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset_in_queue, cq.max_offset_in_queue
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        return self._scan_queue(cq, offset, max_nums, message_filter, min_offset, max_offset)

    def _scan_queue(
        self,
        cq: ConsumeQueue,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None,
        min_offset: int,
        max_offset: int,
    ) -> GetMessageResult:
        cfg = self._config
        max_nums = max(1, min(max_nums, cfg.max_transfer_count_per_pull))
        max_scan = max(cfg.max_filter_message_size_bytes, max_nums * CQ_UNIT_SIZE_BYTES) // CQ_UNIT_SIZE_BYTES
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        next_begin = offset
        messages: list[bytes] = []
        offsets: list[int] = []
        total_bytes = 0
        scanned = 0
        while next_begin < max_offset and scanned < max_scan and len(messages) < max_nums:
            # without a filter every unit is a message (blank ones aside): read no more than are wanted
            wanted = READ_UNITS_CHUNK if message_filter is not None else max_nums - len(messages)
            units = cq.read_units(next_begin, min(READ_UNITS_CHUNK, wanted, max_scan - scanned))
            if units is None:
                if not messages:
                    status = GetMessageStatus.OFFSET_FOUND_NULL
                next_begin = min(cq.roll_next_file(next_begin), max_offset)
                break
            if not units:
                break
            for unit in units:
                full = len(messages) >= max_nums or total_bytes + unit.size > cfg.max_transfer_bytes_per_pull
                if messages and full:
                    return GetMessageResult(status, next_begin, min_offset, max_offset, tuple(messages), tuple(offsets))
                scanned += 1
                next_begin = unit.queue_offset + 1
                if unit.is_blank:
                    continue
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(unit.tags_code):
                    continue
                raw = self._commit_log.get_message(unit.commit_log_offset, unit.size)
                if raw is None:
                    if not messages:
                        status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    continue
                if message_filter is not None and not message_filter.is_matched_by_commit_log(raw):
                    continue
                messages.append(raw)
                offsets.append(unit.queue_offset)
                total_bytes += len(raw)
                status = GetMessageStatus.FOUND
        return GetMessageResult(status, next_begin, min_offset, max_offset, tuple(messages), tuple(offsets))
