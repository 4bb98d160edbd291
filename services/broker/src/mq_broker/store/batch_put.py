"""A MessageExtBatch as store messages, and the one PutMessageResult of a batch.

Mirrors the batch half of org.apache.rocketmq.store.CommitLog#asyncPutMessages and MessageExtEncoder#encodeBatch:
the body (mq_common.batch_codec) is split into messages, each gets the batch's properties appended and its own
tag code; the limits are checked for every message before anything is written, so a batch is stored whole or
refused whole. Pure functions; run on the event loop inside DefaultMessageStore#put_message_batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mq_common.batch_codec import decode_batch
from mq_common.codec import MessageDecodeError, decode_properties
from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES, MessageConst
from mq_common.record_layout import BORN_HOST_V6_FLAG, IPV6_HOST_BYTES, STORE_HOST_V6_FLAG, calc_msg_length

from mq_broker.store import native_append
from mq_broker.store.message import (
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    tags_string_to_tags_code,
)

MAX_TOPIC_BYTES = 127
BATCH_DECODE_REMARK = "the batch body is malformed: "
BATCH_TOO_LARGE_REMARK = "the batch's records take %d bytes, more than one CommitLog file holds (%d)"
END_FILE_MIN_BLANK_BYTES = 8


@dataclass(frozen=True, slots=True)
class BatchScan:
    """A checked MessageBatch: its messages, their index keys (UNIQ_KEY + KEYS words) and record bytes."""

    count: int
    index_keys: int
    total_record_bytes: int


def scan_batch(
    batch: MessageExtBatch,
    store_host_len: int,
    *,
    max_message_size_bytes: int,
    max_record_size_bytes: int,
    file_size_bytes: int,
    illegal_remark: str,
) -> BatchScan | PutMessageResult:
    """Check ``batch`` with the C scan (native_append.AVAILABLE): the refusal of the whole batch, as
    :func:`expand_batch`, plus MESSAGE_ILLEGAL when its records do not fit in one CommitLog file (a batch is never
    split across files); else its BatchScan."""
    topic = batch.topic.encode("utf-8")
    if len(topic) > MAX_TOPIC_BYTES:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=illegal_remark)
    flags = batch.sys_flag | (BORN_HOST_V6_FLAG if len(batch.born_host) == IPV6_HOST_BYTES else 0)
    flags |= STORE_HOST_V6_FLAG if store_host_len == IPV6_HOST_BYTES else 0
    fixed = calc_msg_length(flags, 0, len(topic), 0)
    try:
        count, keys, max_body, max_props, max_record, total = native_append.scan_batch(
            batch.body, batch.properties_string.encode("utf-8"), fixed
        )
    except ValueError as exc:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=BATCH_DECODE_REMARK + str(exc))
    if count == 0:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=BATCH_DECODE_REMARK + "no message")
    if max_body > max_message_size_bytes or max_record > max_record_size_bytes:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=illegal_remark)
    if max_props > MAX_PROPERTIES_SIZE_BYTES:
        return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, remark=illegal_remark)
    if total + END_FILE_MIN_BLANK_BYTES > file_size_bytes:
        remark = BATCH_TOO_LARGE_REMARK % (total, file_size_bytes - END_FILE_MIN_BLANK_BYTES)
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=remark)
    return BatchScan(count, keys, total)


def expand_batch(
    batch: MessageExtBatch, max_message_size_bytes: int, illegal_remark: str
) -> list[MessageExtBrokerInner] | PutMessageResult:
    """The store messages of ``batch``, in order, or the refusal of the whole batch: MESSAGE_ILLEGAL (malformed
    body, no message, a body over ``max_message_size_bytes``, a topic over 127 bytes), PROPERTIES_SIZE_EXCEEDED
    (a message's properties with the batch's over 32,767 bytes)."""
    try:
        items = decode_batch(batch.body)
    except MessageDecodeError as exc:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=BATCH_DECODE_REMARK + str(exc))
    if not items:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=BATCH_DECODE_REMARK + "no message")
    if len(batch.topic.encode("utf-8")) > MAX_TOPIC_BYTES:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=illegal_remark)
    extra = batch.properties_string
    out: list[MessageExtBrokerInner] = []
    for item in items:
        text = item.properties + extra
        if len(item.body) > max_message_size_bytes:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=illegal_remark)
        if len(text.encode("utf-8")) > MAX_PROPERTIES_SIZE_BYTES:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, remark=illegal_remark)
        out.append(
            MessageExtBrokerInner(
                topic=batch.topic,
                queue_id=batch.queue_id,
                body=item.body,
                properties_string=text,
                flag=item.flag,
                sys_flag=batch.sys_flag,
                born_timestamp_ms=batch.born_timestamp_ms,
                born_host=batch.born_host,
                tags_code=tags_string_to_tags_code(decode_properties(text).get(MessageConst.TAGS)),
                wait_store_msg_ok=batch.wait_store_msg_ok,
            )
        )
    return out


def merge_results(results: Sequence[PutMessageResult]) -> PutMessageResult:
    """The batch's result from its messages' results: the first failure when any failed, else PUT_OK (or
    FLUSH_DISK_TIMEOUT when the group commit timed out) with the first offsets, the total size and the offset
    message ids joined with commas."""
    failed = next((r for r in results if not r.is_ok), None)
    if failed is not None:
        return failed
    first = results[0]
    status = next((r.status for r in results if r.status is not PutMessageStatus.PUT_OK), PutMessageStatus.PUT_OK)
    return PutMessageResult(
        status,
        wrote_offset=first.wrote_offset,
        wrote_bytes=sum(r.wrote_bytes for r in results),
        msg_id=",".join(r.msg_id for r in results),
        queue_offset=first.queue_offset,
        store_timestamp_ms=first.store_timestamp_ms,
        remark=first.remark,
        msg_num=len(results),
    )
