"""Start-up: rebuild the in-flight table from the revive log, so messages popped and not acked before a crash
(SIGKILL included) are revived after it and none is lost.

Mirrors org.apache.rocketmq.broker.processor.PopReviveService#consumeReviveMessage (read each revive queue from the
committed revive offset of ``CID_RMQ_SYS_REVIVE_GROUP``; checkpoints minus their acks are what is in flight). The
revive offset never passes a live checkpoint (PopReviveService.commit_revive_offsets), so acks of checkpoints
before it belong to resolved ones and are ignored. A record that does not parse is logged and skipped.

Runs once on the event loop before the broker serves (the reads are page-cache copies of the store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageDecodeError, decode_message
from mq_common.logging import get_logger

from mq_broker.consumer.pop.context import PopContext
from mq_broker.consumer.pop.inflight import InflightCheckPoint
from mq_broker.consumer.pop.revive_log import REVIVE_GROUP, AckMsg, CheckPoint, ReviveRecordError, parse_record
from mq_broker.store.message import GetMessageStatus

log = get_logger("mq_broker.consumer.pop.recovery")

READ_BATCH: Final = 32
"""Revive records read per store call (PopReviveService#getReviveMessage reads 32)."""


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    """What the scan found: records read, checkpoints still in flight, their un-acked messages, records skipped."""

    records: int
    checkpoints: int
    messages: int
    skipped: int


def recover_inflight(context: PopContext) -> RecoveryStats:
    """Scan every revive queue of ``context`` into its (empty) in-flight table."""
    records = skipped = 0
    for queue_id in range(context.config.revive_queue_num):
        read, bad = _scan_queue(context, queue_id)
        records += read
        skipped += bad
    table = context.table
    stats = RecoveryStats(records, table.checkpoint_count, table.message_count, skipped)
    log.info("pop_inflight_recovered", records=records, checkpoints=stats.checkpoints, messages=stats.messages,
             skipped=skipped)  # fmt: skip
    return stats


def _scan_queue(context: PopContext, queue_id: int) -> tuple[int, int]:
    store = context.store
    topic = context.config.revive_topic
    committed = context.offsets.query_offset(REVIVE_GROUP, topic, queue_id)
    offset = max(committed, store.get_min_offset_in_queue(topic, queue_id))
    read = skipped = 0
    while True:
        result = store.get_messages(topic, queue_id, offset, READ_BATCH)
        if result.status is GetMessageStatus.OFFSET_TOO_SMALL:
            offset = result.next_begin_offset
            continue
        for raw, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
            read += 1
            if not _apply(context, raw, queue_id, queue_offset):
                skipped += 1
        if not result.messages or result.next_begin_offset <= offset:
            return read, skipped
        offset = result.next_begin_offset


def _apply(context: PopContext, raw: bytes, queue_id: int, queue_offset: int) -> bool:
    """Apply one revive record; False when it does not parse."""
    try:
        msg = decode_message(raw)
        record = parse_record(msg.tags, msg.body)
    except (MessageDecodeError, ReviveRecordError) as exc:
        log.warning("pop_revive_record_skipped", revive_queue_id=queue_id, queue_offset=queue_offset, error=str(exc))
        return False
    if isinstance(record, CheckPoint):
        context.table.add(InflightCheckPoint(record, queue_id, queue_offset))
    else:
        _apply_ack(context, record)
    return True


def _apply_ack(context: PopContext, ack: AckMsg) -> None:
    table = context.table
    row = table.find(ack.key)
    if row is None:
        return
    for offset in ack.ack_offsets:
        index = row.index_of(offset)
        if index >= 0 and table.claim(row, index):
            table.settle(row, index, stored=True)
