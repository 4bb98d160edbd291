"""ACK_MESSAGE / BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME: resolve popped messages by receipt handle.

Mirrors org.apache.rocketmq.broker.processor.AckMessageProcessor (#appendAck: one ``ack`` record per checkpoint, a
``bAck`` when it acks several of its messages) and ChangeInvisibleTimeProcessor (#appendCheckPointThenAckOrigin: a new
one-message checkpoint from now, and an ack of the old one, stored in one put). Records are written before the answer;
an ack's records do not wait for the SYNC_FLUSH group commit (``WAIT=false``: a killed process keeps them in the page
cache, a machine crash may lose them, which only redelivers the messages), a change of invisible time waits for its new
checkpoint. An ack's bit is set while its record is written, so a replay in the meantime is refused too, and cleared
again when the store refuses the record.

An orderly pop's handle (revive queue POP_ORDER_REVIVE_QUEUE) has no checkpoint: its ack marks the message in
mq_broker.consumer.pop.order_info (ConsumerOrderInfoManager#commitAndNext) and moves the group's consume offset to the
first un-acked message of the queue's last orderly pop, then wakes one parked pop of the group (AckMessageProcessor
#ackOrderly); a change of its invisible time moves only that message's next visible time, under the same pop time
(ChangeInvisibleTimeProcessor#processChangeInvisibleTimeForOrder). NO_MESSAGE (208) for a handle of an earlier pop of
the queue (the message was handed out again since) or an offset not in the last pop.

Refusals, per handle (see mq_common.protocol.pop for the mapping to INVALID_RECEIPT_HANDLE): INVALID_PARAMETER (29)
for a handle that does not decode or names another broker; NO_MESSAGE (208) "receipt handle is expired" once the
message's invisible time has passed (RocketMQ's proxy refuses those; revive will redeliver it), NO_MESSAGE "... not
in flight" / "... acked already" for a replay, a handle replaced by a change of invisible time, a revived message,
or another group's or topic's handle; SYSTEM_ERROR (1) when the store refused the record. Request-level:
TOPIC_NOT_EXIST (17), NO_MESSAGE (208) for an ack without handles, INVALID_PARAMETER (29) for more than
MAX_ACK_HANDLES handles or an invisible time outside [0, pop_invisible_time_max_ms].

Event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from mq_common.errors import InvalidParameterError, MQBrokerError, MQError
from mq_common.logging import get_logger
from mq_common.protocol import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ReceiptHandle,
)
from mq_common.response_code import ResponseCode

from mq_broker.consumer.long_polling import LongPollingService
from mq_broker.consumer.pop.context import LOCAL_HOST, POP_ORDER_REVIVE_QUEUE, PopContext, now_ms
from mq_broker.consumer.pop.inflight import InflightCheckPoint
from mq_broker.consumer.pop.order_info import COMMIT_NOT_FOUND, COMMIT_POP_TIME_MISMATCH
from mq_broker.consumer.pop.pop_processor import wake_when_visible
from mq_broker.consumer.pop.revive_log import AckMsg, CheckPoint
from mq_broker.store.message import PutMessageResult

log = get_logger("mq_broker.consumer.pop")

MAX_ACK_HANDLES: Final = 1_024
"""Receipt handles one AckMessage may carry (32 pops of 32 messages)."""
_Claims = dict[int, tuple[InflightCheckPoint, list[tuple[int, int]]]]
"""id(row) -> (row, [(position in the request, message index)])."""
_ORDER_QID: Final = str(POP_ORDER_REVIVE_QUEUE)


def is_order_handle(text: str) -> bool:
    """The handle text names revive queue POP_ORDER_REVIVE_QUEUE (ExtraInfoUtil#isOrder); a malformed text is not."""
    parts = text.split(" ", 4)
    return len(parts) == 5 and parts[3] == _ORDER_QID


def _decode_order_handle(context: PopContext, text: str) -> ReceiptHandle:
    """Raises InvalidReceiptHandleError / InvalidParameterError (29) as PopContext.resolve does."""
    handle = ReceiptHandle.decode(text)
    if handle.broker_name != context.config.broker_name:
        raise MQBrokerError(
            f"receipt handle is invalid: it names broker {handle.broker_name}, this is {context.config.broker_name}",
            ResponseCode.INVALID_PARAMETER,
        )
    return handle


class AckMessageProcessor:
    """Serves AckMessage over a :class:`PopContext`; ``long_polling`` is woken by orderly acks."""

    def __init__(self, context: PopContext, long_polling: LongPollingService | None = None) -> None:
        self.context = context
        self.long_polling = long_polling

    async def ack(self, request: AckMessageRequestHeader) -> AckMessageResponseHeader:
        """Ack every handle it can; one code and remark per handle. Raises MQError for a refused request (see the
        module docstring)."""
        self.context.readable_topic(request.topic)
        handles = request.receipt_handles
        if not handles:
            return AckMessageResponseHeader(int(ResponseCode.NO_MESSAGE), "no receipt handle to ack")
        if len(handles) > MAX_ACK_HANDLES:
            raise InvalidParameterError(f"{len(handles)} receipt handles, at most {MAX_ACK_HANDLES}")
        codes = [int(ResponseCode.SUCCESS)] * len(handles)
        remarks = [""] * len(handles)
        claims: _Claims = {}
        for position, text in enumerate(handles):
            if is_order_handle(text):
                codes[position], remarks[position] = self._ack_orderly(text, request.consumer_group, request.topic)
                continue
            try:
                _handle, row, index = self.context.resolve(text, request.consumer_group, request.topic)
            except MQError as exc:
                codes[position], remarks[position] = int(exc.code), exc.remark
                continue
            self.context.table.claim(row, index)
            claims.setdefault(id(row), (row, []))[1].append((position, index))
        await self._append_acks(claims, codes, remarks)
        return _ack_answer(codes, remarks)

    def _ack_orderly(self, text: str, group: str, topic: str) -> tuple[int, str]:
        """AckMessageProcessor#ackOrderly for one handle: (code, remark)."""
        ctx = self.context
        try:
            handle = _decode_order_handle(ctx, text)
        except MQError as exc:
            return int(exc.code), exc.remark
        real_topic = handle.real_topic(topic, group)
        queue_id = handle.queue_id
        next_offset = ctx.order_info.commit_and_next(
            real_topic, group, queue_id, handle.offset, handle.retrieve_time_ms
        )
        if next_offset == COMMIT_POP_TIME_MISMATCH:
            return int(ResponseCode.NO_MESSAGE), "receipt handle is of an earlier pop: the message was handed out again"
        if next_offset == COMMIT_NOT_FOUND:
            return int(ResponseCode.NO_MESSAGE), "receipt handle is not in flight: not in the queue's last orderly pop"
        if next_offset > ctx.offsets.query_offset(group, real_topic, queue_id):
            ctx.offsets.commit_offset(LOCAL_HOST, group, real_topic, queue_id, next_offset)
        if self.long_polling is not None:
            self.long_polling.notify_group(topic, queue_id, group)
        return int(ResponseCode.SUCCESS), ""

    async def _append_acks(self, claims: _Claims, codes: list[int], remarks: list[str]) -> None:
        """One ack record per checkpoint, all in one put (not waiting for the flush); settle every claim with the
        put's outcome."""
        if not claims:
            return
        ctx = self.context
        broker = ctx.config.broker_name
        entries = list(claims.values())
        records: list[tuple[CheckPoint | AckMsg, int]] = [
            (row.ack_of(tuple(row.start_offset + row.offset_diff[i] for _, i in claimed), broker), row.revive_queue_id)
            for row, claimed in entries
        ]
        try:
            results = await ctx.writer.append(records, wait=False)  # a lost ack is a redelivery, not a loss
        except BaseException:
            for row, claimed in entries:
                for _, index in claimed:
                    ctx.table.settle(row, index, stored=False)
            raise
        for (row, claimed), put in zip(entries, results, strict=True):
            for position, index in claimed:
                ctx.table.settle(row, index, stored=put.is_ok)
                if not put.is_ok:
                    codes[position], remarks[position] = int(ResponseCode.SYSTEM_ERROR), _not_stored("ack", put)


class ChangeInvisibleTimeProcessor:
    """Serves ChangeInvisibleTime over a :class:`PopContext`; ``long_polling`` is woken when an orderly message
    becomes visible again."""

    def __init__(self, context: PopContext, long_polling: LongPollingService | None = None) -> None:
        self.context = context
        self.long_polling = long_polling

    async def change_invisible_time(
        self, request: ChangeInvisibleTimeRequestHeader
    ) -> ChangeInvisibleTimeResponseHeader:
        """The message of the handle becomes invisible for ``invisible_time_ms`` from now, under a new handle;
        the old one is then refused. Raises MQError (see the module docstring)."""
        ctx = self.context
        limit = ctx.config.pop_invisible_time_max_ms
        if not 0 <= request.invisible_time_ms <= limit:
            raise InvalidParameterError(f"invisibleTime {request.invisible_time_ms} ms is not in [0, {limit}]")
        ctx.readable_topic(request.topic)
        if is_order_handle(request.receipt_handle):
            return self._change_orderly(request)
        handle, row, index = ctx.resolve(request.receipt_handle, request.consumer_group, request.topic)
        offset = row.start_offset + row.offset_diff[index]
        pop_time = ctx.table.reserve_pop_time(row.topic, row.group, row.queue_id, offset, now_ms())
        ck = CheckPoint(row.topic, row.group, row.queue_id, offset, pop_time, request.invisible_time_ms, (0,),
                        ctx.config.broker_name)  # fmt: skip
        ctx.table.claim(row, index)
        try:
            put_ck, put_ack = await ctx.writer.append(
                [(ck, row.revive_queue_id), (row.ack_of((offset,), ctx.config.broker_name), row.revive_queue_id)]
            )
        except BaseException:
            ctx.table.settle(row, index, stored=False)
            ctx.table.release(ck.key)
            raise
        if not put_ck.is_ok:
            ctx.table.settle(row, index, stored=False)
            ctx.table.release(ck.key)
            raise MQBrokerError(_not_stored("checkpoint", put_ck), ResponseCode.SYSTEM_ERROR)
        if not put_ack.is_ok:  # the new checkpoint rules; the old one may be revived after a restart (a duplicate)
            log.error("change_invisible_ack_not_stored", topic=row.topic, offset=offset, status=put_ack.status.value)
        ctx.table.settle(row, index, stored=True)
        ctx.table.add(InflightCheckPoint(ck, row.revive_queue_id, put_ck.queue_offset))
        new_handle = ReceiptHandle(
            offset, pop_time, request.invisible_time_ms, row.revive_queue_id, handle.topic_type,
            ctx.config.broker_name, row.queue_id, offset, handle.commit_log_offset,
        )  # fmt: skip
        return ChangeInvisibleTimeResponseHeader(
            int(ResponseCode.SUCCESS), "", new_handle.encode(), pop_time, request.invisible_time_ms
        )

    def _change_orderly(self, request: ChangeInvisibleTimeRequestHeader) -> ChangeInvisibleTimeResponseHeader:
        """ChangeInvisibleTimeProcessor#processChangeInvisibleTimeForOrder: the message is visible again at now +
        the invisible time; its handle keeps the pop time (its invisible time grows). A message before the group's
        consume offset (acked) is answered SUCCESS unchanged. Raises MQBrokerError NO_MESSAGE (208) for a handle of
        an earlier pop or an offset not in the last one, InvalidParameterError (29) for a malformed handle."""
        ctx = self.context
        group = request.consumer_group
        handle = _decode_order_handle(ctx, request.receipt_handle)
        topic = handle.real_topic(request.topic, group)
        if handle.offset < ctx.offsets.query_offset(group, topic, handle.queue_id):
            return ChangeInvisibleTimeResponseHeader(
                int(ResponseCode.SUCCESS), "", request.receipt_handle, handle.retrieve_time_ms, handle.invisible_time_ms
            )
        next_visible = now_ms() + request.invisible_time_ms
        if not ctx.order_info.update_next_visible_time(
            topic, group, handle.queue_id, handle.offset, handle.retrieve_time_ms, next_visible
        ):
            raise MQBrokerError(
                "receipt handle is not in flight: not in the queue's last orderly pop", ResponseCode.NO_MESSAGE
            )
        if self.long_polling is not None:
            wake_when_visible(self.long_polling, request.topic, handle.queue_id, group, next_visible)
        invisible = next_visible - handle.retrieve_time_ms
        new_handle = dataclasses.replace(handle, invisible_time_ms=invisible)
        return ChangeInvisibleTimeResponseHeader(
            int(ResponseCode.SUCCESS), "", new_handle.encode(), handle.retrieve_time_ms, invisible
        )


def _ack_answer(codes: list[int], remarks: list[str]) -> AckMessageResponseHeader:
    failed = next((i for i, c in enumerate(codes) if c != ResponseCode.SUCCESS), None)
    code, remark = (int(ResponseCode.SUCCESS), "") if failed is None else (codes[failed], remarks[failed])
    return AckMessageResponseHeader(code, remark, tuple(codes), tuple(remarks))


def _not_stored(what: str, put: PutMessageResult) -> str:
    return f"the {what} record was not stored: {put.status.value} {put.remark}".rstrip()
