"""Collects concurrent one-message sends of one topic into one producer batch (batching above the producer core).

The official RocketMQ 5 SDKs send ONE message per SendMessage call (v1 ``Send`` is the same shape). Sent one by
one, each pays the producer core (validation, budget, route, MQFaultStrategy, retries) and one broker frame. A
:class:`SendAccumulator` offers the producer's ``send(msg, timeout_ms)`` and keeps one lane per topic and sharding
key (message group):

- A message that can go in a RocketMQ MessageBatch (message batches enabled, body 1 .. below the compression
  threshold, no delay level, not transactional) joins its lane's open batch; any other goes straight to
  ``producer.send`` (as before). Validation (Validators#checkMessage) runs first, so bad input is refused with
  the same error before it joins.
- When the lane has no batch in flight, its open batch goes out at the end of the current loop iteration (a lone
  send on an idle gateway waits for no timer) — or, when the lane is busy (its last batch had several messages),
  ``linger_ms`` after its first message. While a batch is in flight the open one grows and goes when the flight
  returns or, in a lane without a sharding key, ``linger_ms`` after its first message at the latest (so a stuck
  broker holds up no more than that: the next batch picks its queue anew). A batch is closed at
  ``max_batch_messages`` / ``max_batch_bytes`` (bodies) and goes at once. A lane WITH a sharding key keeps one
  batch in flight at a time, so a message group is stored in the order its sends arrived, across batches too.
- A batch of one message goes through ``producer.send`` (exactly the old path); larger ones through
  ``producer.send_message_batch`` (one route lookup, one queue choice, one retry loop and one broker frame per
  chunk / queue group; the in-flight limiter admits the batch as a whole). Each caller gets its own outcome: its
  SendResult (own msg id, queue, queue offset) or its chunk's error. A batch the producer refuses as a
  MessageBatch (e.g. a property text holding \\x01) is sent message by message (per message group in order).
- Deadlines: the batch's budget ends at the EARLIEST deadline of its members (the members arrived within about
  ``linger_ms`` of each other, so the others lose little), so every caller gets the producer's own outcome by its
  deadline. A caller whose deadline passes while its message still waits in a lane leaves with SendFailedError
  (RPC_TIME_OUT -1006, as a spent producer budget); a caller that left (deadline or cancellation) before its
  batch went out is dropped from it, so it is not stored behind its back.
- Bounds: at most ``max_pending_messages`` messages wait in lanes (then FlowControlError 215, nothing sent);
  lanes exist only while they have waiting or in-flight sends (batches in flight hold the producer's in-flight
  permits). A caller whose deadline passes while its message still waits and the in-flight limits are full gets
  FlowControlError, what the limiter would have said. :meth:`close` sends every waiting message and
  waits for the batches in flight (call it after the server stopped taking calls, before the producer shuts).

Hooks see a batch as one send (its first message), as for SendBatch. Runs on the gateway's one asyncio loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final, Protocol

from mq_client.producer import (
    FlowControlError,
    Message,
    MessageBatch,
    MessageBatchResult,
    ProducerConfig,
    SendFailedError,
    SendResult,
)
from mq_client.producer.backpressure import InFlightLimiter
from mq_client.producer.message_batch import ChunkOutcome
from mq_client.producer.validators import check_message
from mq_common.constants import MessageConst
from mq_common.errors import MQError

MAX_PENDING_MESSAGES: Final = 65_536
_NOT_IN_BATCH: Final = (MessageConst.DELAY_TIME_LEVEL, MessageConst.TRANSACTION_PREPARED)


class BatchingProducer(Protocol):
    """The part of mq_client.producer.DefaultMQProducer the accumulator uses."""

    @property
    def config(self) -> ProducerConfig: ...

    @property
    def limiter(self) -> InFlightLimiter: ...

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult: ...

    async def send_message_batch(
        self, batch: MessageBatch, timeout_ms: int | None = None
    ) -> list[ChunkOutcome] | None: ...


@dataclass(slots=True)
class _Pending:
    message: Message
    deadline_s: float
    future: asyncio.Future[SendResult]
    handed_over: bool = False


_LaneKey = tuple[str, str]  # (topic, sharding key)


@dataclass(slots=True)
class _Lane:
    """The sends of one topic and sharding key: the open batch, closed (full) batches behind it, batches in flight.
    ``ordered`` (a sharding key): one batch in flight at a time."""

    ordered: bool
    open: list[_Pending] = field(default_factory=list)
    open_bytes: int = 0
    open_since_s: float = 0.0
    closed: deque[list[_Pending]] = field(default_factory=deque)
    in_flight: int = 0
    timer: asyncio.Handle | None = None  # uvloop answers call_at of a past time with a plain Handle
    timer_at_s: float = 0.0
    busy: bool = False  # the last batch sent had company: the next one lingers


@dataclass(frozen=True, slots=True)
class AccumulatorStats:
    """Counters since start: ``sends`` that joined a lane, ``batches`` sent (a lone message counts as one)."""

    sends: int
    batches: int


class SendAccumulator:
    """``send(msg, timeout_ms)`` of DefaultMQProducer, batched per topic and sharding key (see the module docstring).

    Raises ValueError for non-positive bounds.
    """

    def __init__(
        self,
        producer: BatchingProducer,
        *,
        max_batch_messages: int,
        max_batch_bytes: int,
        max_pending_messages: int = MAX_PENDING_MESSAGES,
        linger_ms: float = 0.0,
    ) -> None:
        if min(max_batch_messages, max_batch_bytes, max_pending_messages) < 1:
            raise ValueError("max_batch_messages, max_batch_bytes and max_pending_messages must be at least 1")
        self.producer = producer
        self.max_batch_messages = max_batch_messages
        self.max_batch_bytes = max_batch_bytes
        self.max_pending_messages = max_pending_messages
        self.linger_s = linger_ms / 1000.0
        self._lanes: dict[_LaneKey, _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._sends = 0
        self._batches = 0

    @property
    def stats(self) -> AccumulatorStats:
        return AccumulatorStats(self._sends, self._batches)

    @property
    def pending(self) -> int:
        """Messages waiting in lanes (not yet handed to the producer)."""
        return self._pending

    def _batchable(self, msg: Message) -> bool:
        config = self.producer.config
        body = msg.body
        return (
            config.message_batch_enable
            and body is not None
            and len(body) < config.compress_msg_body_over_howmuch_bytes
            and not (msg.properties and any(name in msg.properties for name in _NOT_IN_BATCH))
        )

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult:
        """SYNC send of ``msg`` within ``timeout_ms`` (default send_msg_timeout_ms), batched with concurrent sends
        of its topic. Returns its SendResult; raises what DefaultMQProducer.send raises for it (MessageIllegalError
        13 before batching; its batch chunk's MQError), FlowControlError (215) when ``max_pending_messages`` wait
        already, SendFailedError (RPC_TIME_OUT) when its deadline passes first."""
        if not self._batchable(msg):
            return await self.producer.send(msg, timeout_ms)
        config = self.producer.config
        check_message(msg, config.max_message_size_bytes)
        if self._pending >= self.max_pending_messages:
            raise FlowControlError(f"{self._pending} sends are waiting for a batch, max is {self.max_pending_messages}")
        budget_ms = config.send_msg_timeout_ms if timeout_ms is None else timeout_ms
        loop = asyncio.get_running_loop()
        pending = _Pending(msg, loop.time() + budget_ms / 1000.0, loop.create_future())
        self._join((msg.topic, msg.sharding_key), pending)
        timer = loop.call_at(pending.deadline_s, self._expire, pending, budget_ms)
        try:
            return await pending.future
        finally:
            timer.cancel()

    def _expire(self, pending: _Pending, budget_ms: int) -> None:
        """The caller's deadline: a message still waiting for its batch leaves with :meth:`_late`'s error (a
        handed-over one gets the producer's outcome, due by then: its batch's budget ends at this deadline)."""
        if not pending.future.done() and not pending.handed_over:
            pending.future.set_exception(self._late(pending, budget_ms))

    def _late(self, pending: _Pending, budget_ms: int) -> MQError:
        """The error of a caller whose deadline passed while its message waited for a batch: FlowControlError when
        the in-flight limits are full (what the limiter would have said), else SendFailedError."""
        limiter = self.producer.limiter
        body_bytes = len(pending.message.body or b"")
        if (limiter.max_messages and limiter.in_flight_messages + 1 > limiter.max_messages) or (
            limiter.max_bytes and limiter.in_flight_bytes + body_bytes > limiter.max_bytes
        ):
            messages = f"{limiter.in_flight_messages}/{limiter.max_messages or 'unlimited'} messages"
            size = f"{limiter.in_flight_bytes}/{limiter.max_bytes or 'unlimited'} bytes"
            return FlowControlError(
                f"send refused by flow control: in flight {messages}, {size}; waited {budget_ms} ms"
            )
        topic = pending.message.topic
        return SendFailedError(times=0, cost_ms=budget_ms, topic=topic, brokers_sent=(), cause=None, budget_spent=True)

    def _join(self, key: _LaneKey, pending: _Pending) -> None:
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(ordered=bool(key[1]))
        loop = asyncio.get_running_loop()
        if not lane.open:
            lane.open_since_s = loop.time()
        lane.open.append(pending)
        lane.open_bytes += len(pending.message.body or b"")
        self._pending += 1
        self._sends += 1
        if len(lane.open) >= self.max_batch_messages or lane.open_bytes >= self.max_batch_bytes:
            lane.closed.append(lane.open)
            lane.open, lane.open_bytes = [], 0
        self._schedule(key, lane, loop)

    def _schedule(self, key: _LaneKey, lane: _Lane, loop: asyncio.AbstractEventLoop) -> None:
        """Set the lane's timer for when its next batch may go: at once (a closed batch, or an idle quiet lane),
        ``linger_s`` after the open batch's first message (a busy lane, or a batch of a keyless lane in flight),
        or no timer (a keyed lane waits for its batch in flight)."""
        held = lane.ordered and lane.in_flight > 0
        if held or not (lane.open or lane.closed):
            return
        at_once = lane.closed or (lane.in_flight == 0 and not lane.busy)
        when = 0.0 if at_once else lane.open_since_s + self.linger_s
        if lane.timer is not None:
            if lane.timer_at_s <= when:
                return
            lane.timer.cancel()
        lane.timer, lane.timer_at_s = loop.call_at(when, self._next, key), when

    def _next(self, key: _LaneKey, *, force: bool = False) -> None:
        """Send what may go now (``force``: whatever is waiting, as far as a keyed lane's order allows); forget the
        lane when nothing waits and nothing is in flight."""
        lane = self._lanes.get(key)
        if lane is None:
            return
        if lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        loop = asyncio.get_running_loop()
        while lane.closed and not (lane.ordered and lane.in_flight):
            self._launch(key, lane, lane.closed.popleft())
        if lane.open and not (lane.ordered and lane.in_flight):
            lingered = loop.time() >= lane.open_since_s + self.linger_s
            if force or lingered or (lane.in_flight == 0 and not lane.busy):
                batch, lane.open, lane.open_bytes = lane.open, [], 0
                self._launch(key, lane, batch)
        if lane.open or lane.closed:
            self._schedule(key, lane, loop)
        elif lane.in_flight == 0:
            del self._lanes[key]

    def _launch(self, key: _LaneKey, lane: _Lane, batch: list[_Pending]) -> None:
        self._pending -= len(batch)
        live = [p for p in batch if not p.future.done()]
        if not live:
            return
        for p in live:
            p.handed_over = True
        lane.busy = self.linger_s > 0 and len(live) > 1
        lane.in_flight += 1
        task = asyncio.get_running_loop().create_task(self._send(live))
        self._tasks.add(task)
        task.add_done_callback(partial(self._sent, key))

    def _sent(self, key: _LaneKey, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        lane = self._lanes.get(key)
        if lane is not None:
            lane.in_flight -= 1
            self._next(key)

    async def _send(self, batch: list[_Pending]) -> None:
        self._batches += 1
        try:
            await self._send_batch(batch)
        except Exception as exc:  # the whole batch failed (state, flow control, ...): every caller gets it
            for p in batch:
                _settle(p, exc)

    async def _send_batch(self, batch: list[_Pending]) -> None:
        loop = asyncio.get_running_loop()
        timeout_ms = max(1, int((min(p.deadline_s for p in batch) - loop.time()) * 1000.0))
        if len(batch) == 1:
            await _send_each(self.producer, batch, timeout_ms)
            return
        chunks = await self.producer.send_message_batch(
            MessageBatch.from_messages([p.message for p in batch]), timeout_ms
        )
        if chunks is None:
            await _send_each(self.producer, batch, timeout_ms)
            return
        for chunk in chunks:
            result = chunk.result
            outcomes: Sequence[SendResult | MQError] = (
                result.results() if isinstance(result, MessageBatchResult) else [result] * len(chunk)
            )
            for position, outcome in zip(chunk.indices(), outcomes, strict=True):
                _settle(batch[position], outcome)

    async def close(self) -> None:
        """Send every waiting message now and wait until no batch is in flight."""
        while self._lanes or self._tasks:
            for key in list(self._lanes):
                self._next(key, force=True)
            if self._tasks:
                await asyncio.wait(set(self._tasks))
            await asyncio.sleep(0)  # let the done callbacks of those batches run


def _settle(pending: _Pending, outcome: SendResult | BaseException) -> None:
    if pending.future.done():
        return
    if isinstance(outcome, BaseException):
        pending.future.set_exception(outcome)
    else:
        pending.future.set_result(outcome)


async def _send_each(producer: BatchingProducer, batch: list[_Pending], timeout_ms: int) -> None:
    """Message by message through ``producer.send``: messages of one sharding key one after another (their
    order), the others concurrently."""
    groups: dict[str, list[_Pending]] = {}
    singles: list[list[_Pending]] = []
    for p in batch:
        key = p.message.sharding_key
        if key:
            groups.setdefault(key, []).append(p)
        else:
            singles.append([p])

    async def in_order(members: list[_Pending]) -> None:
        for p in members:
            try:
                _settle(p, await producer.send(p.message, timeout_ms))
            except Exception as exc:
                _settle(p, exc)

    await asyncio.gather(*(in_order(members) for members in [*groups.values(), *singles]))
