"""Per-queue state of a lite pull consumer: the messages pulled and not yet polled, and the queue's pull,
consume and seek offsets. Mirrors org.apache.rocketmq.client.impl.consumer.{ProcessQueue, AssignedMessageQueue}
(its MessageQueueState) for a consumer whose caller takes whole pulled batches in order.

Runs on the consumer's asyncio loop; not shared between loops.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from mq_common.codec import MessageExt
from mq_common.protocol import MessageQueue

__all__ = ["AssignedMessageQueues", "ConsumeRequest", "MessageQueueState", "ProcessQueue"]

NO_OFFSET = -1
"""A pull, consume or seek offset that is not set (RocketMQ's -1)."""


class ProcessQueue:
    """Pulled batches of one queue waiting for poll(), in queue-offset order. Mirrors ProcessQueue (msgCount,
    queueOffsetMax, dropped) with RocketMQ's msgTreeMap reduced to batches: poll() takes a batch whole and the
    batches of a queue leave in the order they came.

    Once ``dropped`` (the queue went to another consumer, or a seek replaced this queue) its batches are skipped.
    """

    __slots__ = ("_batches", "dropped", "msg_count", "queue_offset_max")

    def __init__(self) -> None:
        self._batches: deque[tuple[int, int]] = deque()  # (first queue offset, message count)
        self.msg_count = 0
        self.queue_offset_max = NO_OFFSET
        self.dropped = False

    def put_messages(self, messages: Sequence[MessageExt]) -> None:
        """Record one pulled batch (non-empty, ascending queue offsets). Mirrors ProcessQueue#putMessage."""
        self._batches.append((messages[0].queue_offset, len(messages)))
        self.msg_count += len(messages)
        self.queue_offset_max = max(self.queue_offset_max, messages[-1].queue_offset)

    def remove_messages(self, messages: Sequence[MessageExt]) -> int:
        """Take the oldest batch (``messages``) out; the queue's consume offset after it: the first offset still
        buffered, else one past the highest offset ever buffered. Mirrors ProcessQueue#removeMessage."""
        if self._batches:
            _, count = self._batches.popleft()
            self.msg_count -= count
        if self._batches:
            return self._batches[0][0]
        return max(self.queue_offset_max, messages[-1].queue_offset) + 1

    def clear(self) -> None:
        """Forget every buffered batch (seek)."""
        self._batches.clear()
        self.msg_count = 0


@dataclass(frozen=True, slots=True)
class ConsumeRequest:
    """One pulled batch on its way to poll(). Mirrors DefaultLitePullConsumerImpl.ConsumeRequest."""

    messages: tuple[MessageExt, ...]
    mq: MessageQueue
    process_queue: ProcessQueue


class MessageQueueState:
    """One assigned queue: its process queue, pull task and offsets (NO_OFFSET when unset).

    ``pull_offset``: where the next pull starts; ``consume_offset``: one past what poll() returned (what a
    commit stores); ``seek_offset``: set by seek() until the pull task takes it. Mirrors
    AssignedMessageQueue.MessageQueueState.
    """

    __slots__ = ("consume_offset", "mq", "process_queue", "pull_offset", "seek_offset", "task")

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq
        self.process_queue = ProcessQueue()
        self.pull_offset = NO_OFFSET
        self.consume_offset = NO_OFFSET
        self.seek_offset = NO_OFFSET
        self.task: asyncio.Task[None] | None = None

    def replace_process_queue(self) -> ProcessQueue:
        """Drop the current process queue (its buffered batches are skipped by poll) and start a new one."""
        self.process_queue.dropped = True
        self.process_queue.clear()
        self.process_queue = ProcessQueue()
        return self.process_queue

    def stop(self) -> None:
        """Drop the process queue and cancel the pull task (the queue is no longer this consumer's)."""
        self.process_queue.dropped = True
        self.process_queue.clear()
        if self.task is not None:
            self.task.cancel()


class AssignedMessageQueues:
    """The queues this consumer holds, by MessageQueue. Mirrors AssignedMessageQueue."""

    def __init__(self) -> None:
        self._states: dict[MessageQueue, MessageQueueState] = {}

    def get(self, mq: MessageQueue) -> MessageQueueState | None:
        """``mq``'s state, or None when ``mq`` is not assigned."""
        return self._states.get(mq)

    def queues(self, topic: str | None = None) -> list[MessageQueue]:
        """The assigned queues (only ``topic``'s when given), sorted."""
        return sorted(mq for mq in self._states if topic is None or mq.topic == topic)

    def states(self) -> list[MessageQueueState]:
        """Every assigned queue's state."""
        return list(self._states.values())

    def add(self, mq: MessageQueue) -> MessageQueueState:
        """Assign ``mq`` (a new state; the caller starts its pull task)."""
        state = self._states[mq] = MessageQueueState(mq)
        return state

    def remove(self, mqs: Collection[MessageQueue]) -> list[MessageQueueState]:
        """Unassign ``mqs``: their states are stopped (dropped, task cancelled) and returned."""
        removed = [self._states.pop(mq) for mq in mqs if mq in self._states]
        for state in removed:
            state.stop()
        return removed
