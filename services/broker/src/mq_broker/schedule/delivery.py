"""What held messages become when they are due, and how a restarted broker learns which were delivered already.

A held record (SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer) is delivered by storing it again on REAL_TOPIC /
REAL_QID (ScheduleMessageService#messageTimeup, TimerMessageStore#convertMessage). Beyond RocketMQ, which
delivers at least once, the new record carries DELIVERED_FROM_OFFSET = the held record's CommitLog offset: the
delivery and its proof are one record, so after a crash (or on a promoted slave, whose CommitLog is the master's)
:func:`delivered_sources` walks the CommitLog from the last checkpoint and finds every delivery the checkpoint does
not know of — no timer fires twice, none is lost. Event loop (:func:`delivered_message`); :func:`delivered_sources`
reads mapped files only and may run in a worker thread while nothing truncates the CommitLog.
"""

from __future__ import annotations

import time
from typing import Final

from mq_common.codec import MessageExt, host_to_bytes
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.record_layout import BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH, MESSAGE_MAGIC_CODE, TOTAL_AND_MAGIC

from mq_broker.store.commit_log import CommitLog, last_property_value, parse_dispatch
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus

PERMANENT_REFUSALS: Final = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
"""Put statuses a retry cannot change: a held record refused so is skipped (logged), not retried for ever."""
_DELIVERED_NEEDLE: Final = (MessageConst.DELIVERED_FROM_OFFSET + "\x01").encode()
_DROPPED_ON_DELIVERY: Final = (MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID, MessageConst.DELAY_TIME_LEVEL)


def now_ms() -> int:
    """The wall clock, ms since the epoch (due times are wall-clock times)."""
    return time.time_ns() // 1_000_000


class HeldRecordError(ValueError):
    """A held record without a usable REAL_TOPIC / REAL_QID (it is skipped and logged, never delivered)."""


def delivered_message(held: MessageExt, now_ms: int | None) -> MessageExtBrokerInner:
    """The record that delivers ``held`` (a held record as DefaultMessageStore#lookup_message_by_offset decodes it):
    topic REAL_TOPIC, queue REAL_QID, body, flag, born host/time and reconsume times of ``held``; its properties
    minus REAL_TOPIC, REAL_QID and DELAY, plus DELIVERED_FROM_OFFSET (``held``'s CommitLog offset) and, for a timer
    and a ``now_ms``, TIMER_DEQUEUE_MS (a delivery prepared ahead gets it when it is stored); TIMER_OUT_MS and
    TIMER_DELIVER_MS stay (the delivery time a v2 consumer sees). A compressed original is stored inflated. Raises
    HeldRecordError when REAL_TOPIC or REAL_QID is missing or bad."""
    properties = dict(held.properties)
    topic = properties.get(MessageConst.REAL_TOPIC, "")
    queue_text = properties.get(MessageConst.REAL_QUEUE_ID, "")
    if not topic or not queue_text.isdigit():
        raise HeldRecordError(f"held record at {held.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    for name in _DROPPED_ON_DELIVERY:
        properties.pop(name, None)
    properties[MessageConst.DELIVERED_FROM_OFFSET] = str(held.commit_log_offset)
    if now_ms is not None and MessageConst.TIMER_OUT_MS in properties:
        properties[MessageConst.TIMER_DEQUEUE_MS] = str(now_ms)
    return MessageExtBrokerInner.build(
        topic=topic,
        queue_id=int(queue_text),
        body=held.body,
        properties=properties,
        flag=held.flag,
        sys_flag=held.sys_flag & ~MessageSysFlag.COMPRESSED_FLAG,
        born_timestamp_ms=held.born_timestamp_ms,
        born_host=host_to_bytes(*held.born_host),
        reconsume_times=held.reconsume_times,
    )


def delivered_sources(commit_log: CommitLog, from_offset: int) -> set[int]:
    """The DELIVERED_FROM_OFFSET values of the records stored from ``from_offset`` (a record boundary, e.g. a
    checkpoint's CommitLog offset; below the oldest file: from its start) to the CommitLog's end. Stops at bytes that
    are no record (the unwritten tail)."""
    found: set[int] = set()
    queue = commit_log.mapped_file_queue
    offset = max(from_offset, commit_log.min_offset)
    end = commit_log.max_offset
    while offset < end:
        mapped = queue.find_mapped_file_by_offset(offset)
        if mapped is None:
            break
        pos, written = offset - mapped.file_from_offset, mapped.wrote_position
        if written - pos < END_FILE_MIN_BLANK_LENGTH:
            offset = mapped.file_end_offset
            continue
        head = mapped.read(pos, TOTAL_AND_MAGIC.size)
        if len(head) < TOTAL_AND_MAGIC.size:
            break  # the file was deleted meanwhile
        total, magic = TOTAL_AND_MAGIC.unpack(head)
        if magic == BLANK_MAGIC_CODE:
            offset = mapped.file_end_offset
            continue
        if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > written:
            break
        raw = mapped.read(pos, total)
        if _DELIVERED_NEEDLE in raw:
            request = parse_dispatch(raw, offset, check_crc=False)
            value = last_property_value(request.properties, MessageConst.DELIVERED_FROM_OFFSET) if request else None
            if value is not None and value.isdigit():
                found.add(int(value))
        offset += total
    return found
