"""Read a topic back from every queue of every broker and check row identities.

Each published row carries a stable ``row_id`` in its JSON body (0..rows-1). Pulling every readable queue
of the topic from offset 0 to its max offset, :class:`RowIdCheck` counts each row id: ``verified`` row ids
seen at least once, ``missing`` never seen, ``duplicates`` extra copies; messages whose body has no valid
``row_id`` count as ``unexpected``. It also checks that each message key (KEYS, the sharding key) lives on
exactly one queue (the order guarantee of sharding-key sends).

Each extra copy is classified by where it lies against the row's first copy (the same queue, another queue of the
same broker, another broker) and by its UNIQ_KEY: the gateway sets UNIQ_KEY once per message before its own
retries (DefaultMQProducer keeps msgId across retryTimesWhenSendFailed), so a copy with the first copy's UNIQ_KEY
was stored twice by a retry at or below the gateway (a broker attempt that timed out after storing), and a copy
with a new UNIQ_KEY was sent again above it (the writer's re-send, a Spark task retry). ``report`` counts each kind
and names up to DUPLICATE_SAMPLES copies.

Runs on the caller's asyncio loop (mq_client's NameServerClient/BrokerClient); every pull loop is
bounded by the queue's max offset and a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from array import array
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
DUPLICATE_SAMPLES: Final = 10
_OFFSET_BITS: Final = 40
"""A first copy's place, packed in one int64: queue index (into RowIdCheck's queue list) << 40 | queue offset."""


@dataclass(slots=True)
class RowIdCheck:
    """Accumulates pulled messages (one event loop thread)."""

    expected_rows: int
    seen: Counter[int] = field(default_factory=Counter)
    unexpected: int = 0
    messages: int = 0
    per_broker: Counter[str] = field(default_factory=Counter)
    key_queues: defaultdict[str, set[MessageQueue]] = field(default_factory=lambda: defaultdict(set))
    duplicate_kinds: Counter[str] = field(default_factory=Counter)
    duplicate_samples: list[dict[str, Any]] = field(default_factory=list)
    # Per row id: where its first copy lies (_OFFSET_BITS packing; -1 unseen) and its UNIQ_KEY's hash.
    _first_place: array[int] = field(init=False)
    _first_key_hash: array[int] = field(init=False)
    _queues: list[MessageQueue] = field(default_factory=list)
    _queue_index: dict[MessageQueue, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._first_place = array("q", [-1]) * self.expected_rows
        self._first_key_hash = array("q", [0]) * self.expected_rows

    def add(self, queue: MessageQueue, message: MessageExt) -> None:
        self.messages += 1
        self.per_broker[queue.broker_name] += 1
        for key in message.keys:
            self.key_queues[key].add(queue)
        row_id = _row_id(message.body)
        if row_id is None or not 0 <= row_id < self.expected_rows:
            self.unexpected += 1
            return
        self.seen[row_id] += 1
        index = self._queue_index.get(queue)
        if index is None:
            index = self._queue_index[queue] = len(self._queues)
            self._queues.append(queue)
        first = self._first_place[row_id]
        if first < 0:
            self._first_place[row_id] = index << _OFFSET_BITS | message.queue_offset
            self._first_key_hash[row_id] = hash(message.uniq_key)
        else:
            self._add_duplicate(row_id, first, queue, message)

    def _add_duplicate(self, row_id: int, first: int, queue: MessageQueue, message: MessageExt) -> None:
        """Count an extra copy of ``row_id`` by kind (module docstring); keep it as a sample while there is room."""
        first_queue = self._queues[first >> _OFFSET_BITS]
        if first_queue == queue:
            where = "same queue"
        elif first_queue.broker_name == queue.broker_name:
            where = "another queue of the same broker"
        else:
            where = "another broker"
        same_key = hash(message.uniq_key) == self._first_key_hash[row_id]
        self.duplicate_kinds[f"{where}, {'same' if same_key else 'new'} UNIQ_KEY"] += 1
        if len(self.duplicate_samples) < DUPLICATE_SAMPLES:
            first_offset = first & ((1 << _OFFSET_BITS) - 1)
            self.duplicate_samples.append(
                {
                    "row_id": row_id,
                    "first": f"{first_queue} @ {first_offset}",
                    "copy": f"{queue} @ {message.queue_offset}",
                    "uniq_key": message.uniq_key,
                    "same_uniq_key": same_key,
                    "store_timestamp_ms": message.store_timestamp_ms,
                }
            )

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
            "duplicate_kinds": dict(sorted(self.duplicate_kinds.items())),
            "duplicate_samples": self.duplicate_samples,
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
