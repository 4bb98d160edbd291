"""One assigned queue's pull loop: long-polling pulls into the consumer's bounded buffer of pulled batches.
Mirrors org.apache.rocketmq.client.impl.consumer.DefaultLitePullConsumerImpl.PullTaskImpl#run (flow control,
nextPullOffset, pull, FOUND -> consume request, pull offset update, delays after errors) with
DefaultMQPushConsumerImpl#pullMessage's piggy-backed commit offset.

One asyncio task per assigned queue on the consumer's loop; cancelled when the queue is dropped or sought.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol import PullResult, PullStatus
from mq_common.response_code import ResponseCode

from mq_client.consumer.config import LitePullConsumerConfig
from mq_client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from mq_client.consumer.process_queue import NO_OFFSET, ConsumeRequest, MessageQueueState, ProcessQueue
from mq_client.consumer.pull_consumer import SUB_ALL, PullConsumer
from mq_client.consumer.rebalance import RebalanceLitePull

__all__ = ["PullTaskContext", "run_pull_task"]

_log = get_logger("mq_client.consumer.pull_task")

PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL: Final = 50
"""PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL: pause while the buffer is over a threshold."""
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL: Final = 20
"""PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL: pause after a broker's FLOW_CONTROL answer."""
PULL_TIME_DELAY_MS_ON_EXCEPTION: Final = 3000
"""PULL_TIME_DELAY_MILLS_ON_EXCEPTION: pause when the start offset could not be computed."""


@dataclass(frozen=True, slots=True)
class PullTaskContext:
    """What every pull task of one consumer shares: settings, the pulling client, the group's offsets, the
    rebalance (initial offsets), the buffer of pulled batches and the subscriptions (topic -> expression)."""

    config: LitePullConsumerConfig
    queues: PullConsumer
    offsets: RemoteBrokerOffsetStore
    rebalance: RebalanceLitePull
    requests: asyncio.Queue[ConsumeRequest]
    subscriptions: dict[str, str]


async def run_pull_task(state: MessageQueueState, ctx: PullTaskContext) -> None:
    """Pull ``state.mq`` until its process queue (the one current when the task starts) is dropped.

    Never raises MQError (errors pause the queue's pulls, as RocketMQ reschedules the task); ends with
    CancelledError when cancelled."""
    pq = state.process_queue
    while not pq.dropped:
        try:
            delay_ms = await _pull_once(state, pq, ctx)
        except Exception as exc:  # a bug must not stop the queue's pulls for good
            _log.error("pull_task_crashed", mq=str(state.mq), error=repr(exc))
            delay_ms = PULL_TIME_DELAY_MS_ON_EXCEPTION
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)


def _flow_controlled(pq: ProcessQueue, ctx: PullTaskContext) -> bool:
    config = ctx.config
    if ctx.requests.qsize() * config.pull_batch_size > config.pull_threshold_for_all:
        return True
    return pq.msg_count > config.pull_threshold_for_queue


async def _next_pull_offset(state: MessageQueueState, ctx: PullTaskContext) -> int:
    """The seek offset once (it becomes the consume offset), else the pull offset, else the group's start.
    Mirrors DefaultLitePullConsumerImpl#nextPullOffset."""
    if state.seek_offset != NO_OFFSET:
        offset, state.seek_offset = state.seek_offset, NO_OFFSET
        state.consume_offset = offset
        return offset
    if state.pull_offset != NO_OFFSET:
        return state.pull_offset
    offset = await ctx.rebalance.compute_pull_from_where(state.mq)
    if state.consume_offset == NO_OFFSET:
        state.consume_offset = offset
    return offset


async def _pull_once(state: MessageQueueState, pq: ProcessQueue, ctx: PullTaskContext) -> int:
    """One round of the loop; the pause (ms) before the next one."""
    if _flow_controlled(pq, ctx):
        return PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL
    try:
        offset = await _next_pull_offset(state, ctx)
    except MQError as exc:
        _log.error("next_pull_offset_failed", mq=str(state.mq), error=str(exc))
        return PULL_TIME_DELAY_MS_ON_EXCEPTION
    if pq.dropped:
        return 0
    try:
        result = await _pull(state, offset, ctx)
    except MQError as exc:
        if exc.code == ResponseCode.FLOW_CONTROL:
            return PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL
        _log.warning("pull_failed", mq=str(state.mq), offset=offset, error=str(exc))
        return ctx.config.pull_time_delay_ms_when_exception
    if pq.dropped:
        return 0
    if result.status is PullStatus.FOUND and result.messages and state.seek_offset == NO_OFFSET:
        pq.put_messages(result.messages)
        await ctx.requests.put(ConsumeRequest(result.messages, state.mq, pq))
    elif result.status is PullStatus.OFFSET_ILLEGAL:
        _log.warning("pull_offset_illegal", mq=str(state.mq), offset=offset, next_begin=result.next_begin_offset)
    if state.seek_offset == NO_OFFSET and state.process_queue is pq:
        state.pull_offset = result.next_begin_offset
    return 0


async def _pull(state: MessageQueueState, offset: int, ctx: PullTaskContext) -> PullResult:
    """A long-polling pull; the group's offset of the queue in memory rides along when positive (as
    DefaultMQPushConsumerImpl#pullMessage's commitOffsetEnable)."""
    config = ctx.config
    committed = await ctx.offsets.read_offset(state.mq, ReadOffsetType.READ_FROM_MEMORY)
    return await ctx.queues.pull(
        state.mq,
        offset,
        config.pull_batch_size,
        ctx.subscriptions.get(state.mq.topic, SUB_ALL),
        commit_offset=committed if committed > 0 else None,
        suspend_timeout_ms=config.broker_suspend_max_time_ms,
        timeout_ms=config.consumer_timeout_ms_when_suspend,
    )
