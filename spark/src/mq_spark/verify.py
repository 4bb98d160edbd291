"""Read a topic back from every queue of every broker and check row identities.

Each published row carries a stable ``row_id`` in its JSON body (0..rows-1). Pulling every readable queue
of the topic from offset 0 to its max offset, :class:`RowIdCheck` counts each row id: ``verified`` row ids
seen at least once, ``missing`` never seen, ``duplicates`` extra copies; messages whose body has no valid
``row_id`` count as ``unexpected``. It also checks that each message key (KEYS, the sharding key) lives on
exactly one queue (the order guarantee of sharding-key sends).

Runs on the caller's asyncio loop (mq_client's NameServerClient/BrokerClient); every pull loop is
bounded by the queue's max offset and a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

from mq_client.consumer import PullConsumer
from mq_common.codec import MessageExt
from mq_common.errors import MQClientError
from mq_common.protocol import MessageQueue, PullStatus
from mq_common.response_code import ResponseCode

PULL_BATCH: Final = 1024
VERIFY_CONSUMER_GROUP: Final = "mq_spark_verify"


@dataclass(slots=True)
class RowIdCheck:
    """Accumulates pulled messages (one event loop thread)."""

    expected_rows: int
    seen: Counter[int] = field(default_factory=Counter)
    unexpected: int = 0
    messages: int = 0
    per_broker: Counter[str] = field(default_factory=Counter)
    key_queues: defaultdict[str, set[MessageQueue]] = field(default_factory=lambda: defaultdict(set))

    def add(self, queue: MessageQueue, message: MessageExt) -> None:
        self.messages += 1
        self.per_broker[queue.broker_name] += 1
        for key in message.keys:
            self.key_queues[key].add(queue)
        row_id = _row_id(message.body)
        if row_id is None or not 0 <= row_id < self.expected_rows:
            self.unexpected += 1
        else:
            self.seen[row_id] += 1

    @property
    def verified(self) -> int:
        return len(self.seen)

    @property
    def missing(self) -> int:
        return self.expected_rows - len(self.seen)

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.seen.values())

    @property
    def keys_on_many_queues(self) -> int:
        return sum(1 for queues in self.key_queues.values() if len(queues) > 1)

    def report(self) -> dict[str, Any]:
        return {
            "rows": self.expected_rows,
            "messages": self.messages,
            "verified": self.verified,
            "missing": self.missing,
            "duplicates": self.duplicates,
            "unexpected": self.unexpected,
            "keys": len(self.key_queues),
            "keys_on_many_queues": self.keys_on_many_queues,
            "per_broker_stored": dict(sorted(self.per_broker.items())),
        }


def _row_id(body: bytes) -> int | None:
    try:
        value = json.loads(body).get("row_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


async def pull_queue(consumer: PullConsumer, queue: MessageQueue, check: RowIdCheck, deadline: float) -> int:
    """Pull ``queue`` from offset 0 to its max offset into ``check``; returns messages read.

    Raises MQClientError (SYSTEM_ERROR) when the deadline (time.monotonic) passes first.
    """
    offset, read = 0, 0
    result = await consumer.pull(queue, 0, PULL_BATCH)
    max_offset = result.max_offset
    for _ in range(max_offset + 1):  # at least one message per FOUND pull
        if result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
            offset = result.next_begin_offset  # the queue starts later (min offset moved)
        elif result.status is not PullStatus.FOUND:
            break
        else:
            for message in result.messages:
                check.add(queue, message)
            read += len(result.messages)
            offset = result.next_begin_offset
        if offset >= max_offset:
            break
        if time.monotonic() > deadline:
            raise MQClientError(
                f"pulling {queue} did not finish in time (at {offset}/{max_offset})", ResponseCode.SYSTEM_ERROR
            )
        result = await consumer.pull(queue, offset, PULL_BATCH)
    return read


async def read_back(namesrv_addr: str, topic: str, expected_rows: int, max_seconds: float = 600.0) -> RowIdCheck:
    """Pull every readable queue of ``topic`` (route from the name server) into a RowIdCheck.

    Raises TopicNotExistError (17) when the name server has no route, RemotingError on transport failure.
    """
    check = RowIdCheck(expected_rows)
    deadline = time.monotonic() + max_seconds
    async with PullConsumer([namesrv_addr], VERIFY_CONSUMER_GROUP) as consumer:
        queues = await consumer.fetch_subscribe_message_queues(topic)
        await asyncio.gather(*(pull_queue(consumer, q, check, deadline) for q in queues))
    return check
