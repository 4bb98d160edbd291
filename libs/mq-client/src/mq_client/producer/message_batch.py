"""RocketMQ's own batch send: messages of one topic as MessageBatches, each one SEND_BATCH_MESSAGE to one queue.

Mirrors DefaultMQProducer#send(Collection<Message>) -> #batch (MessageBatch.generateFromList + encode) sent by
DefaultMQProducerImpl#sendDefaultImpl: a MessageBatch is one message to the send loop — one queue per attempt
from MQFaultStrategy (avoiding the broker of the last failed attempt; a sharding key pins the key's queue), the
fault item updated with the attempt's latency, the whole batch retried on a retriable failure within one budget
(1 + retryTimesWhenSendFailed attempts), retryAnotherBrokerWhenNotStoreOK. A batch whose encoded body passes
max_message_size_bytes (4 MiB, as RocketMQ's limit on a batch) or holds more than max_broker_batch_messages is
split into chunks, sent concurrently (in order, one after another, when they share a sharding key).

:func:`qualifies` says when a batch can go this way: one topic, no delay level (RocketMQ refuses delayed
batches), no transaction, one sharding key or none, and no body large enough to be compressed (compression is
per message, on the mixed path of batch.py). Runs on the producer's asyncio loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from mq_common.batch_codec import BATCH_ITEM_OVERHEAD_BYTES
from mq_common.constants import MessageConst
from mq_common.errors import MQError

from mq_client.producer.config import ProducerConfig
from mq_client.producer.errors import SendFailedError
from mq_client.producer.fault_strategy import ClockMs, MQFaultStrategy
from mq_client.producer.kernel import OutgoingMessage, SendBudget, SendKernel, is_retriable, prepare_message
from mq_client.producer.message import Message
from mq_client.producer.selectors import select_by_sharding_key
from mq_client.producer.send_result import CommunicationMode, SendResult, SendStatus
from mq_client.producer.topic_publish_info import TopicPublishInfo
from mq_client.producer.validators import check_message
from mq_client.route import MessageQueue

Outcome = SendResult | MQError
FindPublishInfo = Callable[[str, SendBudget], Awaitable[TopicPublishInfo]]
_NOT_IN_BATCH = (MessageConst.DELAY_TIME_LEVEL, MessageConst.TRANSACTION_PREPARED)


def qualifies(msgs: Sequence[Message], config: ProducerConfig) -> bool:
    """True when ``msgs`` can be sent as MessageBatches (see the module docstring) and
    ``config.message_batch_enable``."""
    if not msgs or not config.message_batch_enable:
        return False
    first = msgs[0]
    threshold = config.compress_msg_body_over_howmuch_bytes
    for msg in msgs:
        if msg is None or msg.topic != first.topic or msg.sharding_key != first.sharding_key:
            return False
        if msg.body is not None and len(msg.body) >= threshold:
            return False
        if msg.properties and any(name in msg.properties for name in _NOT_IN_BATCH):
            return False
    return True


class MessageBatchSender:
    """Runs :meth:`send` for DefaultMQProducer#send_batch when :func:`qualifies` holds."""

    def __init__(self, kernel: SendKernel, fault_strategy: MQFaultStrategy, clock_ms: ClockMs) -> None:
        self._kernel = kernel
        self._fault = fault_strategy
        self._clock_ms = clock_ms

    async def send(
        self, msgs: Sequence[Message], budget: SendBudget, find_publish_info: FindPublishInfo
    ) -> list[Outcome]:
        """One outcome per message, in order: a message refused by the validators gets its error, the others
        the route lookup's error, or their chunk's SendResults or final error. Never raises for a message."""
        config = self._kernel.config
        outcomes: list[Outcome | None] = [None] * len(msgs)
        ready: list[tuple[int, OutgoingMessage]] = []
        for i, msg in enumerate(msgs):
            try:
                check_message(msg, config.max_message_size_bytes)
                ready.append((i, prepare_message(msg, config)))
            except MQError as exc:
                outcomes[i] = exc
        if not ready:
            return [o for o in outcomes if o is not None]
        try:
            tp_info = await find_publish_info(msgs[0].topic, budget)
        except MQError as exc:
            _fill(ready, exc, outcomes)
            return [o for o in outcomes if o is not None]
        chunks = _chunks(ready, config.max_message_size_bytes, config.max_broker_batch_messages)
        key = msgs[0].sharding_key
        fixed = select_by_sharding_key(tp_info.message_queues, key) if key else None
        if key:
            for chunk in chunks:
                await self._send_chunk(chunk, tp_info, fixed, budget, outcomes)
        else:
            await asyncio.gather(*(self._send_chunk(c, tp_info, None, budget, outcomes) for c in chunks))
        assert all(o is not None for o in outcomes)
        return [o for o in outcomes if o is not None]

    async def _send_chunk(
        self,
        chunk: list[tuple[int, OutgoingMessage]],
        tp_info: TopicPublishInfo,
        fixed_mq: MessageQueue | None,
        budget: SendBudget,
        outcomes: list[Outcome | None],
    ) -> None:
        """sendDefaultImpl for one MessageBatch; fills the chunk's outcomes."""
        kernel = self._kernel
        outs = [out for _, out in chunk]
        brokers_sent: list[str] = []
        mq: MessageQueue | None = None
        last_error: MQError | None = None
        stored: list[SendResult] | None = None
        budget_spent = False
        for _ in range(kernel.config.times_total_sync):
            mq = fixed_mq or self._fault.select_one_message_queue(tp_info, None if mq is None else mq.broker_name)
            remaining = budget.remaining_ms()
            if remaining <= 0:
                budget_spent = True
                break
            brokers_sent.append(mq.broker_name)
            begin_ms = self._clock_ms()
            try:
                results = await kernel.send_message_batch(outs, mq, remaining, CommunicationMode.SYNC)
            except MQError as exc:
                retriable = is_retriable(exc, kernel.config.retry_response_codes)
                self._fault.update_fault_item(mq.broker_name, self._clock_ms() - begin_ms, retriable)
                last_error = exc
                if retriable:
                    continue
                _fill(chunk, stored or exc, outcomes)
                return
            self._fault.update_fault_item(mq.broker_name, self._clock_ms() - begin_ms, False)
            if (
                results[0].send_status is not SendStatus.SEND_OK
                and kernel.config.retry_another_broker_when_not_store_ok
            ):
                stored = results
                continue
            _fill(chunk, results, outcomes)
            return
        if stored is not None:
            _fill(chunk, stored, outcomes)
            return
        error = SendFailedError(
            times=len(brokers_sent),
            cost_ms=budget.elapsed_ms(),
            topic=outs[0].topic,
            brokers_sent=brokers_sent,
            cause=last_error,
            budget_spent=budget_spent or budget.remaining_ms() <= 0,
        )
        _fill(chunk, error, outcomes)


def _fill(
    chunk: list[tuple[int, OutgoingMessage]], outcome: list[SendResult] | MQError, outcomes: list[Outcome | None]
) -> None:
    if isinstance(outcome, MQError):
        for i, _ in chunk:
            outcomes[i] = outcome
        return
    for (i, _), result in zip(chunk, outcome, strict=True):
        outcomes[i] = result


def _chunks(
    ready: list[tuple[int, OutgoingMessage]], max_body_bytes: int, max_messages: int
) -> list[list[tuple[int, OutgoingMessage]]]:
    """Consecutive runs whose encoded batch body (items of 22 bytes + body + properties) stays within
    ``max_body_bytes`` and whose length stays within ``max_messages``; a single message always fits."""
    chunks: list[list[tuple[int, OutgoingMessage]]] = []
    current: list[tuple[int, OutgoingMessage]] = []
    size = 0
    for item in ready:
        out = item[1]
        props = out.properties
        props_bytes = len(props) if props.isascii() else len(props.encode("utf-8"))
        item_bytes = BATCH_ITEM_OVERHEAD_BYTES + len(out.body) + props_bytes
        if current and (size + item_bytes > max_body_bytes or len(current) >= max_messages):
            chunks.append(current)
            current, size = [], 0
        current.append(item)
        size += item_bytes
    if current:
        chunks.append(current)
    return chunks
