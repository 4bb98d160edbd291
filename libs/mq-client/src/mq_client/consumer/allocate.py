"""Queue allocation among the consumers of one group. Mirrors
org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely (and the argument checks of
AbstractAllocateMessageQueueStrategy#check).

Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq_common.protocol import MessageQueue

__all__ = ["allocate_message_queue_averagely"]


def allocate_message_queue_averagely(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """The contiguous slice of ``mq_all`` that consumer ``current_cid`` owns among ``cid_all``.

    Both sequences must be sorted the same way on every consumer of ``consumer_group`` (RebalanceImpl sorts
    queues and client ids first): the consumer at index ``i`` of ``cid_all`` gets ``len(mq_all) // n`` queues,
    one more when ``i`` is below the remainder, so sizes differ by at most one; with more consumers than queues
    the last ones get nothing. An unknown ``current_cid`` gets nothing (RocketMQ logs it as a bug).

    Raises ValueError when ``current_cid`` is empty or ``mq_all`` / ``cid_all`` is empty (RocketMQ's
    IllegalArgumentException).
    """
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        return []
    index = cid_all.index(current_cid)
    base, mod = divmod(len(mq_all), len(cid_all))
    if index < mod:
        start, size = index * (base + 1), base + 1
    else:
        start, size = index * base + mod, base
    return list(mq_all[start : start + size])
