"""POP_MESSAGE: hand out up to 32 messages of a topic (and of the group's retry topic), each invisible until acked
or its invisible time ends, with a receipt handle each.

Mirrors org.apache.rocketmq.broker.processor.PopMessageProcessor (non-orderly; #processRequest, #popMsgFromQueue,
#getPopOffset, #getInitOffset, #appendCheckPoint) and PopLongPollingService#polling. Per queue read: the group's
offset (a new group starts at the first offset, or, for ConsumeInitMode.LAST, at the last message, or at 0 while
the queue was never cleaned and its first message is in the page cache: RocketMQ's initPopOffsetByCheckMsgInMem),
a tag-filtered read, ONE checkpoint record on the revive topic (awaited: stored with
the store's flush semantics), then the group's offset moves past what was read. A queue another pop of the same
group is reading is skipped (QueueLockManager#tryLock), as is every queue once the broker holds
pop_max_inflight_messages un-acked messages. Nothing found: the call waits for an arrival on the topic (any queue,
or the one asked) up to the poll time, then answers POLLING_TIMEOUT (210); POLLING_FULL (209) when too many polls
are parked.

Orderly (the request's ``order``, or the group's consume_message_orderly; PopMessageProcessor's isOrder branch and
ConsumerOrderInfoManager, mq_broker.consumer.pop.order_info): no retry topic and no checkpoint; a queue whose last
orderly pop left a message invisible and un-acked is skipped (unless the pop retries that pop's ``attempt_id``:
then the same messages come again); otherwise the queue is read from the group's consume offset, which stays at
the first un-acked message until acks move it, so a message whose invisible time ended comes again first with its
reconsume times one higher. One handed out more than the group's retryMaxTimes times goes to ``%DLQ%<group>``
instead and counts as acked. Receipt handles carry revive queue POP_ORDER_REVIVE_QUEUE (999).

Refusals (code, remark): INVALID_PARAMETER (29) for max_msg_nums outside 1..pop_max_batch_num, an invisible time
outside [pop_invisible_time_min_ms, pop_invisible_time_max_ms], a negative poll time, an unknown init mode or a
queue id past the topic's read queues; ILLEGAL_OPERATION (604) for an orderly pop whose attempt id (``<client
id>/<attempt id>``, as the gateway sends it) is the attempt of a pop by another client that still blocks one of the
queues asked (a replay: the messages stay with the client they went to; nothing is read or changed); NO_PERMISSION
(16) for an unreadable broker or topic or a group whose consume_enable is off; TOPIC_NOT_EXIST (17);
SUBSCRIPTION_GROUP_NOT_EXIST (26); SUBSCRIPTION_PARSE_FAILED (23).

Event loop; the store reads are page-cache copies.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field
from typing import Final

from mq_common.codec import MessageExt, decode_message, encode_message, encode_properties, host_to_bytes
from mq_common.constants import MessageConst, retry_topic
from mq_common.errors import InvalidParameterError, MQBrokerError
from mq_common.logging import get_logger
from mq_common.protocol import (
    ConsumeInitMode,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PoppedMessage,
    ReceiptHandle,
    SubscriptionGroupConfig,
    TopicConfig,
    encode_receipt_handles,
)
from mq_common.protocol.pop import topic_type_of
from mq_common.record_layout import PHYSICAL_OFFSET, PHYSICAL_OFFSET_OFFSET
from mq_common.response_code import ResponseCode

from mq_broker.consumer.long_polling import ANY_QUEUE, LongPollingService, PollingFullError
from mq_broker.consumer.messages_out import MessagesOutObserver
from mq_broker.consumer.pop.context import LOCAL_HOST, POP_ORDER_REVIVE_QUEUE, PopContext, now_ms
from mq_broker.consumer.pop.inflight import InflightCheckPoint
from mq_broker.consumer.pop.order_info import ATTEMPT_SEPARATOR
from mq_broker.consumer.pop.revive_log import CheckPoint
from mq_broker.consumer.retry_dlq import RetryDlqService
from mq_broker.store.message import GetMessageResult, GetMessageStatus
from mq_broker.store.message_filter import SubscriptionData, SubscriptionParseError

log = get_logger("mq_broker.consumer.pop")

_OFFSET_NOT_USABLE: Final = frozenset(
    {GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL}
)
_SKIPPED_PAST: Final = frozenset(
    {
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.OFFSET_FOUND_NULL,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)


@dataclass(slots=True)
class _PopBatch:
    """One pop attempt: what it asked and what it gathered so far."""

    request: PopMessageRequestHeader
    peer: str
    pop_time_ms: int
    revive_queue_id: int
    subscription: SubscriptionData
    messages: list[PoppedMessage] = field(default_factory=list)
    more_left: set[tuple[str, int]] = field(default_factory=set)
    """(topic, queue id) read with progress but not to the end (a full batch, or a filter's scan limit)."""
    order: bool = False
    retry_max_times: int = 16

    @property
    def wanted(self) -> int:
        return self.request.max_msg_nums - len(self.messages)


class PopMessageProcessor:
    """Serves PopMessage over a :class:`PopContext` and the broker's LongPollingService. ``metrics`` (event loop)
    is told about the messages each queue read hands out (the topic asked for, ``is_retry`` for the retry topic's).
    ``retry_dlq`` takes orderly messages past the group's retryMaxTimes (None: they are handed out again)."""

    def __init__(
        self, context: PopContext, long_polling: LongPollingService, retry_dlq: RetryDlqService | None = None
    ) -> None:
        self.context = context
        self.long_polling = long_polling
        self.retry_dlq = retry_dlq
        self._ck_numbers = itertools.count()
        self._random = random.Random()
        self._reading: dict[tuple[str, str, int], bool] = {}
        """(topic, group, queue id) being read -> whether another pop of the group skipped it meanwhile."""
        self.metrics: MessagesOutObserver | None = None

    async def pop(self, request: PopMessageRequestHeader, peer: str = "") -> PopMessageResponseHeader:
        """Check, pop, and long-poll when nothing is there. Raises MQError (see the module docstring) for a
        refused request; nothing found is an answer (POLLING_TIMEOUT / POLLING_FULL), not an error."""
        topic_config, group_config = self._check(request)
        order = request.order or group_config.consume_message_orderly
        max_times = group_config.retry_max_times
        if order and request.attempt_id:
            self._check_attempt(request)
        try:
            subscription = SubscriptionData.build(request.expression)
        except SubscriptionParseError as exc:
            raise MQBrokerError(
                "parse the consumer's subscription failed", ResponseCode.SUBSCRIPTION_PARSE_FAILED
            ) from exc
        poll_ms = min(request.poll_time_ms, self.context.config.pop_poll_time_max_ms)
        deadline = asyncio.get_running_loop().time() + poll_ms / 1000
        queue_ids = None if request.queue_id < 0 else (request.queue_id,)
        while True:
            batch = await self._pop_once(request, topic_config, subscription, peer, order, max_times)
            left_ms = int((deadline - asyncio.get_running_loop().time()) * 1000)
            if batch.messages:
                self._wake_other_polls(batch)
                return _answer(batch)
            if left_ms <= 0:
                return _answer(batch)
            if batch.more_left:  # filtered out so far, the scan stopped before the end: read on
                continue
            try:  # no await between the read that found nothing and parking (LongPollingService's contract)
                arrived = await self.long_polling.wait_for_arrival(
                    request.topic, queue_ids, left_ms, group=request.consumer_group
                )
            except PollingFullError as exc:
                return PopMessageResponseHeader(int(ResponseCode.POLLING_FULL), str(exc))
            if not arrived:  # timed out, or the broker is stopping: one last look
                last = await self._pop_once(
                    request, topic_config, subscription, peer, order, group_config.retry_max_times
                )
                return _answer(last)

    def _check_attempt(self, request: PopMessageRequestHeader) -> None:
        """Refuse (ILLEGAL_OPERATION) an orderly pop replaying the attempt id of a pop that still blocks one of its
        queues under another client id (ConsumerOrderInfoManager.foreign_attempt); nothing is read or changed."""
        queue_ids = None if request.queue_id < 0 else (request.queue_id,)
        order_info = self.context.order_info
        if order_info.foreign_attempt(
            request.attempt_id, request.topic, request.consumer_group, queue_ids, request.invisible_time_ms, now_ms()
        ):
            attempt = request.attempt_id.rpartition(ATTEMPT_SEPARATOR)[2]
            raise MQBrokerError(
                f"the attempt id {attempt} of group {request.consumer_group} on topic {request.topic} was issued to "
                "another client, whose messages are still in flight: only that client may retry it",
                ResponseCode.ILLEGAL_OPERATION,
            )

    def _wake_other_polls(self, batch: _PopBatch) -> None:
        """PopMessageProcessor's restNum > 0 notify: messages are left where this pop stopped, so one more poll of
        the group parked on the topic looks (it wakes the next in turn when it leaves some too)."""
        topic, group = batch.request.topic, batch.request.consumer_group
        for read_topic, queue_id in batch.more_left:
            self.long_polling.notify_group(topic, queue_id if read_topic == topic else ANY_QUEUE, group)

    def _check(self, request: PopMessageRequestHeader) -> tuple[TopicConfig, SubscriptionGroupConfig]:
        cfg = self.context.config
        if not 0 < request.max_msg_nums <= cfg.pop_max_batch_num:
            raise InvalidParameterError(
                f"the broker[{cfg.broker_ip}] pop message's num {request.max_msg_nums} is not in "
                f"[1, {cfg.pop_max_batch_num}]"
            )
        if not cfg.pop_invisible_time_min_ms <= request.invisible_time_ms <= cfg.pop_invisible_time_max_ms:
            raise InvalidParameterError(
                f"invisibleTime {request.invisible_time_ms} ms is not in "
                f"[{cfg.pop_invisible_time_min_ms}, {cfg.pop_invisible_time_max_ms}]"
            )
        if request.poll_time_ms < 0:
            raise InvalidParameterError(f"pollTime {request.poll_time_ms} ms is negative")
        if request.init_mode not in (ConsumeInitMode.LAST, ConsumeInitMode.FIRST):
            raise InvalidParameterError(f"initMode {request.init_mode} is neither 0 (last) nor 1 (first)")
        config = self.context.readable_topic(request.topic)
        if request.queue_id >= config.read_queue_nums:
            raise InvalidParameterError(
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}]"
            )
        return config, self.context.consumable_group(request.consumer_group)

    async def _pop_once(
        self,
        request: PopMessageRequestHeader,
        config: TopicConfig,
        subscription: SubscriptionData,
        peer: str,
        order: bool = False,
        retry_max_times: int = 16,
    ) -> _PopBatch:
        """One pass: maybe the retry topic first (pop_from_retry_probability), the topic's queues from a random
        one (or the queue asked), then the retry topic when the batch is not full (never for an orderly pop)."""
        cfg = self.context.config
        chance = self._random.randrange(100)
        batch = _PopBatch(request, peer, now_ms(), next(self._ck_numbers) % cfg.revive_queue_num, subscription)
        batch.order, batch.retry_max_times = order, retry_max_times
        retry = None if order else self.context.topics.select_topic_config(retry_topic(request.consumer_group))
        retry_first = chance < cfg.pop_from_retry_probability
        if retry is not None and retry_first:
            await self._pop_topic(batch, retry, chance)
        if request.queue_id < 0:
            await self._pop_topic(batch, config, chance)
        else:
            await self._pop_queue(batch, config.topic_name, request.queue_id)
        if retry is not None and not retry_first and batch.wanted > 0:
            await self._pop_topic(batch, retry, chance)
        return batch

    async def _pop_topic(self, batch: _PopBatch, config: TopicConfig, start: int) -> None:
        queues = config.read_queue_nums
        for i in range(queues):
            if batch.wanted <= 0:
                return
            await self._pop_queue(batch, config.topic_name, (start + i) % queues)

    async def _pop_queue(self, batch: _PopBatch, topic: str, queue_id: int) -> None:
        """PopMessageProcessor#popMsgFromQueue for one queue (skipped while another pop of the group reads it)."""
        ctx = self.context
        lock = (topic, batch.request.consumer_group, queue_id)
        if batch.wanted <= 0:
            return
        if lock in self._reading:
            self._reading[lock] = True
            return
        if ctx.table.message_count >= ctx.config.pop_max_inflight_messages:
            log.warning("pop_inflight_full", topic=topic, inflight=ctx.table.message_count)
            return
        self._reading[lock] = False
        try:
            if batch.order:
                await self._read_queue_orderly(batch, topic, queue_id)
            else:
                await self._read_queue(batch, topic, queue_id)
        finally:
            if self._reading.pop(lock):
                self._notify_when_left(batch, topic, queue_id)

    def _notify_when_left(self, batch: _PopBatch, topic: str, queue_id: int) -> None:
        """A pop of the group skipped this queue while it was read here (PopMessageProcessor counts such a queue in
        restNum): when messages are left past the group's offset, one parked poll of the group looks again, so
        a message that arrived during the read waits for no later arrival."""
        group = batch.request.consumer_group
        offset = self.context.offsets.query_offset(group, topic, queue_id)
        if offset < self.context.store.get_max_offset_in_queue(topic, queue_id):
            self.long_polling.notify_group(
                batch.request.topic, queue_id if topic == batch.request.topic else ANY_QUEUE, group
            )

    async def _read_queue(self, batch: _PopBatch, topic: str, queue_id: int) -> None:
        ctx = self.context
        group = batch.request.consumer_group
        offset = self._pop_offset(batch, topic, queue_id)
        is_retry = topic_type_of(topic) != "0"
        # a retry message matched the group's filter when first popped; its topic mixes the group's topics
        message_filter = None if is_retry or batch.subscription.is_sub_all else batch.subscription
        result = ctx.store.get_messages(topic, queue_id, offset, batch.wanted, message_filter)
        if result.status in _OFFSET_NOT_USABLE:
            log.warning("pop_offset_corrected", topic=topic, group=group, queue_id=queue_id, old=offset,
                        new=result.next_begin_offset)  # fmt: skip
            offset = result.next_begin_offset
            ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, offset)
            result = ctx.store.get_messages(topic, queue_id, offset, batch.wanted, message_filter)
        if offset < result.next_begin_offset < result.max_offset:
            batch.more_left.add((topic, queue_id))
        if not result.messages:
            if result.status in _SKIPPED_PAST and result.next_begin_offset > offset:
                ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, result.next_begin_offset)
            return
        row = await self._append_checkpoint(batch, topic, queue_id, offset, result)
        if row is None:
            return
        ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, result.next_begin_offset)
        self._hand_out(batch, row, result, is_retry)
        if self.metrics is not None:
            size = sum(len(record) for record in result.messages)
            self.metrics.on_messages_out(batch.request.topic, group, len(result.messages), size, is_retry=is_retry)

    async def _read_queue_orderly(self, batch: _PopBatch, topic: str, queue_id: int) -> None:
        """PopMessageProcessor#popMsgFromQueue with isOrder (see the module docstring)."""
        ctx = self.context
        request = batch.request
        group = request.consumer_group
        now = now_ms()
        if ctx.order_info.check_block(request.attempt_id, topic, group, queue_id, request.invisible_time_ms, now):
            return
        offset = self._pop_offset(batch, topic, queue_id)
        message_filter = None if batch.subscription.is_sub_all else batch.subscription
        result = ctx.store.get_messages(topic, queue_id, offset, batch.wanted, message_filter)
        if result.status in _OFFSET_NOT_USABLE:
            log.warning("pop_offset_corrected", topic=topic, group=group, queue_id=queue_id, old=offset,
                        new=result.next_begin_offset)  # fmt: skip
            offset = result.next_begin_offset
            ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, offset)
            result = ctx.store.get_messages(topic, queue_id, offset, batch.wanted, message_filter)
        if offset < result.next_begin_offset < result.max_offset:
            batch.more_left.add((topic, queue_id))
        if not result.messages:
            if result.status in _SKIPPED_PAST and result.next_begin_offset > offset:
                ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, result.next_begin_offset)
            return
        previous = ctx.order_info.get(topic, group, queue_id)
        pop_time = batch.pop_time_ms  # distinct from the last pop's: its handles must be told apart
        if previous is not None and previous.pop_time_ms >= pop_time:
            pop_time = previous.pop_time_ms + 1
        counts = ctx.order_info.update(
            request.attempt_id, topic, group, queue_id, pop_time, request.invisible_time_ms, result.queue_offsets, now
        )
        ctx.offsets.commit_offset(batch.peer, group, topic, queue_id, offset)
        wake_when_visible(self.long_polling, topic, queue_id, group, pop_time + request.invisible_time_ms)
        first = ReceiptHandle(offset, pop_time, request.invisible_time_ms, POP_ORDER_REVIVE_QUEUE, topic_type_of(topic),
                              ctx.config.broker_name, queue_id, offset)  # fmt: skip
        handed = 0
        size = 0
        for record, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
            count = counts.get(queue_offset, 0)
            if count > batch.retry_max_times and await self._order_to_dlq(batch, topic, queue_id, record, pop_time):
                continue
            if count:
                record = _with_reconsume_times(record, count)
            physical = PHYSICAL_OFFSET.unpack_from(record, PHYSICAL_OFFSET_OFFSET)[0]
            handle = encode_receipt_handles(first, (queue_offset,), (physical,))[0]
            batch.messages.append(PoppedMessage(record, handle))
            handed += 1
            size += len(record)
        if self.metrics is not None and handed:
            self.metrics.on_messages_out(request.topic, group, handed, size, is_retry=False)

    async def _order_to_dlq(self, batch: _PopBatch, topic: str, queue_id: int, record: bytes, pop_time: int) -> bool:
        """An orderly message handed out more than retryMaxTimes times goes to ``%DLQ%<group>`` and counts as
        acked (the consume offset moves past it when nothing earlier is un-acked); False when it could not be
        stored (it is handed out again)."""
        if self.retry_dlq is None:
            return False
        ctx = self.context
        group = batch.request.consumer_group
        message = decode_message(record, check_crc=False, decompress=False)
        try:
            put = await self.retry_dlq.send_back(
                message, group=group, delay_level=-1, max_reconsume_times=None, client_host=LOCAL_HOST
            )
        except MQBrokerError as exc:
            log.warning("pop_order_dlq_refused", topic=topic, group=group, code=exc.code, remark=exc.remark)
            return False
        if not put.is_ok:
            log.error("pop_order_dlq_not_stored", topic=topic, group=group, status=put.status.value)
            return False
        next_offset = ctx.order_info.commit_and_next(topic, group, queue_id, message.queue_offset, pop_time)
        if next_offset > ctx.offsets.query_offset(group, topic, queue_id):
            ctx.offsets.commit_offset(LOCAL_HOST, group, topic, queue_id, next_offset)
        log.info("pop_order_to_dlq", topic=topic, group=group, queue_id=queue_id, queue_offset=message.queue_offset)
        return True

    def _pop_offset(self, batch: _PopBatch, topic: str, queue_id: int) -> int:
        """PopMessageProcessor#getPopOffset / #getInitOffset (the initial offset is committed at once)."""
        ctx = self.context
        group = batch.request.consumer_group
        offset = ctx.offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        min_offset = ctx.store.get_min_offset_in_queue(topic, queue_id)
        if batch.request.init_mode == ConsumeInitMode.FIRST or topic_type_of(topic) != "0":
            offset = min_offset
        elif (
            ctx.config.init_pop_offset_by_check_msg_in_mem
            and min_offset <= 0
            and ctx.store.check_in_mem_by_consume_offset(topic, queue_id, 0)
        ):
            offset = 0
        else:
            offset = max(0, ctx.store.get_max_offset_in_queue(topic, queue_id) - 1)
        ctx.offsets.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    async def _append_checkpoint(
        self, batch: _PopBatch, topic: str, queue_id: int, offset: int, result: GetMessageResult
    ) -> InflightCheckPoint | None:
        """PopMessageProcessor#appendCheckPoint: store the checkpoint record and track it; None when the store
        refused it (nothing is handed out, the offset stays)."""
        ctx = self.context
        group = batch.request.consumer_group
        pop_time = ctx.table.reserve_pop_time(topic, group, queue_id, offset, batch.pop_time_ms)
        ck = CheckPoint(
            topic, group, queue_id, offset, pop_time, batch.request.invisible_time_ms,
            tuple(q - offset for q in result.queue_offsets), ctx.config.broker_name,
        )  # fmt: skip
        try:
            put = (await ctx.writer.append([(ck, batch.revive_queue_id)]))[0]
        except BaseException:
            ctx.table.release(ck.key)
            raise
        if not put.is_ok:
            ctx.table.release(ck.key)
            log.error("pop_checkpoint_not_stored", topic=topic, group=group, queue_id=queue_id, status=put.status.value)
            return None
        row = InflightCheckPoint(ck, batch.revive_queue_id, put.queue_offset)
        ctx.table.add(row)
        return row

    def _hand_out(self, batch: _PopBatch, row: InflightCheckPoint, result: GetMessageResult, is_retry: bool) -> None:
        first = ReceiptHandle(
            row.start_offset, row.pop_time_ms, row.invisible_time_ms, row.revive_queue_id, topic_type_of(row.topic),
            self.context.config.broker_name, row.queue_id, row.start_offset,
        )  # fmt: skip
        records = result.messages
        physical_offsets = [PHYSICAL_OFFSET.unpack_from(record, PHYSICAL_OFFSET_OFFSET)[0] for record in records]
        handles = encode_receipt_handles(first, result.queue_offsets, physical_offsets)
        if is_retry:
            records = tuple(_with_origin_topic(record, batch.request.topic) for record in records)
        batch.messages.extend(map(PoppedMessage, records, handles))


def wake_when_visible(long_polling: LongPollingService, topic: str, queue_id: int, group: str, at_ms: int) -> None:
    """ConsumerOrderInfoLockManager#updateLockFreeTimestamp: at ``at_ms`` (ms since the epoch), when the orderly
    queue's messages may be visible again, one parked pop of ``group`` looks (a retry-topic read notifies the
    origin topic's pollers, so ``topic`` is the topic popped). Event loop."""
    delay_s = max(0.0, (at_ms - now_ms()) / 1000) + 0.005
    asyncio.get_running_loop().call_later(delay_s, long_polling.notify_group, topic, queue_id, group)


def _answer(batch: _PopBatch) -> PopMessageResponseHeader:
    if not batch.messages:
        return PopMessageResponseHeader(
            int(ResponseCode.POLLING_TIMEOUT),
            GetMessageStatus.NO_MESSAGE_IN_QUEUE.value,
            pop_time_ms=batch.pop_time_ms,
            invisible_time_ms=batch.request.invisible_time_ms,
        )
    return PopMessageResponseHeader(
        int(ResponseCode.SUCCESS),
        GetMessageStatus.FOUND.value,
        tuple(batch.messages),
        batch.pop_time_ms,
        batch.request.invisible_time_ms,
    )


def _with_reconsume_times(record: bytes, reconsume_times: int) -> bytes:
    """An orderly record handed out again, re-encoded with its hand-outs so far as RECONSUMETIMES (RocketMQ's
    broker reports them in the order count info, which the proxy turns into the reconsume times)."""
    msg = decode_message(record, check_crc=False, decompress=False)
    return _reencode(msg, msg.topic, reconsume_times)


def _with_origin_topic(record: bytes, fallback_topic: str) -> bytes:
    """A retry record re-encoded under its original topic (the RETRY_TOPIC property, else ``fallback_topic``), as
    PopMessageProcessor does unless popResponseReturnActualRetryTopic; body, CRC and offsets unchanged."""
    msg = decode_message(record, check_crc=False, decompress=False)
    return _reencode(msg, msg.properties.get(MessageConst.RETRY_TOPIC) or fallback_topic, msg.reconsume_times)


def _reencode(msg: MessageExt, topic: str, reconsume_times: int) -> bytes:
    """``msg`` (decoded without CRC check or inflation) encoded again under ``topic`` with ``reconsume_times``;
    body, CRC and offsets unchanged."""
    return encode_message(
        topic=topic.encode(),
        body=msg.body,
        properties=encode_properties(msg.properties).encode(),
        queue_id=msg.queue_id,
        flag=msg.flag,
        queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset,
        sys_flag=msg.sys_flag,
        born_timestamp_ms=msg.born_timestamp_ms,
        born_host=host_to_bytes(*msg.born_host),
        store_timestamp_ms=msg.store_timestamp_ms,
        store_host=host_to_bytes(*msg.store_host),
        reconsume_times=reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        crc=msg.body_crc,
    )
