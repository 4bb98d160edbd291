"""Batch send: many messages, one budget, one broker RPC per broker (and chunk), retries of the failed ones.

The batch counterpart of DefaultMQProducerImpl#sendDefaultImpl (RocketMQ's own batch, MessageBatch, needs one
topic and one queue; this one takes any mix): each message gets its queue (sharding key hash, else the fault
strategy's round robin avoiding the message's last broker), messages are grouped per broker, each broker gets
its chunks (<= max_broker_batch_messages and max_broker_batch_bytes) in order, brokers concurrently. Then the
messages whose attempt failed retriably are sent again, each on a new queue (sharding-keyed ones on their
key's queue), until none is left, the attempts run out (1 + retry_times_when_send_failed) or the budget is
spent. Messages with one sharding key keep their order inside one call; a retry can reorder them relative to
messages of that key that succeeded earlier (RocketMQ's orderly send does not retry at all).
Runs on the producer's asyncio loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from mq_common.errors import MQError, RemotingTimeoutError
from mq_common.protocol import MessageQueue

from mq_client.producer.errors import SendFailedError
from mq_client.producer.fault_strategy import ClockMs, MQFaultStrategy
from mq_client.producer.kernel import OutgoingMessage, SendBudget, SendKernel, is_retriable, prepare_message
from mq_client.producer.message import Message
from mq_client.producer.selectors import select_by_sharding_key
from mq_client.producer.send_result import SendResult, SendStatus
from mq_client.producer.topic_publish_info import TopicPublishInfo
from mq_client.producer.validators import check_message

FindPublishInfo = Callable[[str, SendBudget], Awaitable[TopicPublishInfo]]
Outcome = SendResult | MQError


@dataclass(slots=True)
class _Pending:
    """Send state of one message of the batch."""

    index: int
    out: OutgoingMessage
    tp_info: TopicPublishInfo
    fixed_mq: MessageQueue | None
    mq: MessageQueue | None = None
    brokers_sent: list[str] = field(default_factory=list)
    last_error: MQError | None = None
    stored: SendResult | None = None
    done: bool = False


class BatchSender:
    """Runs :meth:`send` for DefaultMQProducer#send_batch."""

    def __init__(self, kernel: SendKernel, fault_strategy: MQFaultStrategy, clock_ms: ClockMs) -> None:
        self._kernel = kernel
        self._fault = fault_strategy
        self._clock_ms = clock_ms

    async def send(
        self, msgs: Sequence[Message], budget: SendBudget, find_publish_info: FindPublishInfo
    ) -> list[Outcome]:
        """One outcome per message, in order. Never raises for one message's failure."""
        outcomes: list[Outcome | None] = [None] * len(msgs)
        pending = await self._prepare(msgs, budget, find_publish_info, outcomes)
        budget_spent = False
        for _ in range(self._kernel.config.times_total_sync):
            if not pending:
                break
            remaining = budget.remaining_ms()
            if remaining <= 0:
                budget_spent = True
                break
            await self._attempt(pending, remaining, outcomes)
            pending = [p for p in pending if not p.done]
        for p in pending:
            outcomes[p.index] = p.stored or SendFailedError(
                times=len(p.brokers_sent),
                cost_ms=budget.elapsed_ms(),
                topic=p.out.topic,
                brokers_sent=p.brokers_sent,
                cause=p.last_error,
                budget_spent=budget_spent or budget.remaining_ms() <= 0,
            )
        assert all(o is not None for o in outcomes)
        return [o for o in outcomes if o is not None]

    async def _prepare(
        self,
        msgs: Sequence[Message],
        budget: SendBudget,
        find_publish_info: FindPublishInfo,
        outcomes: list[Outcome | None],
    ) -> list[_Pending]:
        config = self._kernel.config
        valid: list[int] = []
        for i, msg in enumerate(msgs):
            try:
                check_message(msg, config.max_message_size_bytes)
            except MQError as exc:
                outcomes[i] = exc
            else:
                valid.append(i)
        topics = list(dict.fromkeys(msgs[i].topic for i in valid))
        found = await asyncio.gather(*(find_publish_info(t, budget) for t in topics), return_exceptions=True)
        infos: dict[str, TopicPublishInfo | MQError] = {}
        for topic, info in zip(topics, found, strict=True):
            if isinstance(info, BaseException) and not isinstance(info, MQError):
                raise info
            infos[topic] = info
        pending: list[_Pending] = []
        for i in valid:
            msg = msgs[i]
            info = infos[msg.topic]
            if isinstance(info, MQError):
                outcomes[i] = info
                continue
            try:
                out = prepare_message(msg, config)
            except MQError as exc:
                outcomes[i] = exc
                continue
            fixed = select_by_sharding_key(info.message_queues, msg.sharding_key) if msg.sharding_key else None
            pending.append(_Pending(i, out, info, fixed))
        return pending

    async def _attempt(self, pending: list[_Pending], timeout_ms: int, outcomes: list[Outcome | None]) -> None:
        groups: dict[str, list[_Pending]] = {}
        for p in pending:
            last_broker = None if p.mq is None else p.mq.broker_name
            p.mq = p.fixed_mq or self._fault.select_one_message_queue(p.tp_info, last_broker)
            groups.setdefault(p.mq.broker_name, []).append(p)
        deadline_ms = self._clock_ms() + timeout_ms
        await asyncio.gather(
            *(self._send_to_broker(name, group, deadline_ms, outcomes) for name, group in groups.items())
        )

    async def _send_to_broker(
        self, broker_name: str, group: list[_Pending], deadline_ms: int, outcomes: list[Outcome | None]
    ) -> None:
        kernel = self._kernel
        codes = kernel.config.retry_response_codes
        begin_ms = self._clock_ms()
        first = group[0].mq
        assert first is not None
        try:
            addr = await kernel.broker_addr(first, deadline_ms - begin_ms)
        except MQError as exc:
            self._fault.update_fault_item(broker_name, self._clock_ms() - begin_ms, is_retriable(exc, codes))
            for p in group:
                p.brokers_sent.append(broker_name)
                self._record(p, exc, outcomes)
            return
        for chunk in self._chunks(group):
            begin_ms = self._clock_ms()
            timeout_ms = deadline_ms - begin_ms
            if timeout_ms <= 0:
                spent = RemotingTimeoutError(f"send timeout budget spent before sending to {broker_name}")
                for p in chunk:
                    self._record(p, spent, outcomes)
                continue
            results = await kernel.send_group(addr, [(p.out, p.mq) for p in chunk if p.mq is not None], timeout_ms)
            failed = [r for r in results if isinstance(r, MQError)]
            isolation = len(failed) == len(results) and all(is_retriable(e, codes) for e in failed)
            self._fault.update_fault_item(broker_name, self._clock_ms() - begin_ms, isolation)
            for p, outcome in zip(chunk, results, strict=True):
                p.brokers_sent.append(broker_name)
                self._record(p, outcome, outcomes)

    def _chunks(self, group: list[_Pending]) -> list[list[_Pending]]:
        config = self._kernel.config
        chunks: list[list[_Pending]] = []
        current: list[_Pending] = []
        size = 0
        for p in group:
            if current and (
                len(current) >= config.max_broker_batch_messages
                or size + p.out.wire_size_bytes > config.max_broker_batch_bytes
            ):
                chunks.append(current)
                current, size = [], 0
            current.append(p)
            size += p.out.wire_size_bytes
        if current:
            chunks.append(current)
        return chunks

    def _record(self, p: _Pending, outcome: Outcome, outcomes: list[Outcome | None]) -> None:
        config = self._kernel.config
        if isinstance(outcome, SendResult):
            if outcome.send_status is not SendStatus.SEND_OK and config.retry_another_broker_when_not_store_ok:
                p.stored = outcome
                return
            outcomes[p.index] = outcome
            p.done = True
            return
        p.last_error = outcome
        if is_retriable(outcome, config.retry_response_codes):
            return
        outcomes[p.index] = p.stored or outcome
        p.done = True
