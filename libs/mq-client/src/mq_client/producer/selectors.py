"""Queue selectors for ordered messages. Mirrors org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash
(a selector is any object with MessageQueueSelector#select's signature).

The hash is Java's ``String#hashCode`` (UTF-16 code units, 32-bit signed), so the same key picks the same
queue in every process and in RocketMQ's Java client for the same queue list. Never Python's salted hash().
Pure functions; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq_common.hashing import java_string_hash
from mq_common.protocol import MessageQueue

from mq_client.producer.message import Message


def queue_index_for_key(key: str, queue_count: int) -> int:
    """SelectMessageQueueByHash's index: ``abs(hashCode % n)`` with Java's truncating ``%``.

    Raises ValueError when ``queue_count`` < 1.
    """
    if queue_count < 1:
        raise ValueError("queue_count must be at least 1")
    return abs(java_string_hash(key)) % queue_count


def select_by_sharding_key(queues: Sequence[MessageQueue], key: str) -> MessageQueue:
    """The queue of ``key`` among ``queues`` (the topic's sorted writable queue list). Raises ValueError if empty."""
    return queues[queue_index_for_key(key, len(queues))]


class SelectMessageQueueByHash:
    """Selects by the hash of ``str(arg)``. Mirrors SelectMessageQueueByHash."""

    def select(self, queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
        return select_by_sharding_key(queues, str(arg))
