"""What the POP processors share: their settings, the broker parts they use, the revive-log writer, the checks
every POP request makes, and the resolution of a receipt handle to its in-flight checkpoint.

Mirrors the checks at the top of org.apache.rocketmq.broker.processor.{PopMessageProcessor, AckMessageProcessor,
ChangeInvisibleTimeProcessor}#processRequest and the revive-topic puts of all three (EscapeBridge#putMessage).
Event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from mq_common.constants import PermName
from mq_common.errors import MQBrokerError, MQError, NoPermissionError, TopicNotExistError
from mq_common.protocol import ReceiptHandle, SubscriptionGroupConfig, TopicConfig
from mq_common.response_code import ResponseCode

from mq_broker.consumer.pop.inflight import InflightCheckPoint, InflightTable
from mq_broker.consumer.pop.order_info import ConsumerOrderInfoManager
from mq_broker.consumer.pop.revive_log import MAX_CHECKPOINT_MESSAGES, AckMsg, CheckPoint, build_record, revive_topic
from mq_broker.store.api import MessageStore
from mq_broker.store.message import PutMessageResult
from mq_broker.topic_config import TopicConfigManager

DEFAULT_REVIVE_QUEUE_NUM: Final = 8
DEFAULT_INVISIBLE_TIME_MAX_MS: Final = 12 * 3600 * 1000
"""The proxy's maxInvisibleTimeMills (12 h): the longest a popped message stays invisible."""
DEFAULT_INVISIBLE_TIME_MIN_MS: Final = 1_000
"""Ours: the broker's shortest invisible time for a pop (RocketMQ's broker has none; its proxy asks 10 s of
SDK clients, which the v2 gateway checks itself). A change of invisible time may ask 0 (visible again at once)."""
POP_ORDER_REVIVE_QUEUE: Final = 999
"""KeyBuilder.POP_ORDER_REVIVE_QUEUE: the revive queue id in the receipt handle of an orderly pop (no checkpoint;
the ack goes to mq_broker.consumer.pop.order_info)."""
LOCAL_HOST: Final = "127.0.0.1"
"""PopAckConstants.LOCAL_HOST: the client host of the broker's own offset commits."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class PopConfig:
    """POP settings (BrokerConfig's names in the field descriptions of mq_broker.settings)."""

    broker_name: str
    cluster_name: str
    broker_ip: str = "127.0.0.1"
    broker_permission: int = PermName.PERM_READ | PermName.PERM_WRITE
    revive_queue_num: int = DEFAULT_REVIVE_QUEUE_NUM
    revive_interval_ms: int = 1_000
    pop_max_batch_num: int = MAX_CHECKPOINT_MESSAGES
    pop_invisible_time_min_ms: int = DEFAULT_INVISIBLE_TIME_MIN_MS
    pop_invisible_time_max_ms: int = DEFAULT_INVISIBLE_TIME_MAX_MS
    pop_poll_time_max_ms: int = 60_000
    pop_from_retry_probability: int = 20
    pop_max_inflight_messages: int = 1_000_000
    init_pop_offset_by_check_msg_in_mem: bool = True

    def __post_init__(self) -> None:
        assert 0 < self.pop_max_batch_num <= MAX_CHECKPOINT_MESSAGES
        assert 0 <= self.pop_invisible_time_min_ms <= self.pop_invisible_time_max_ms
        assert self.revive_queue_num > 0
        assert self.revive_interval_ms > 0

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.cluster_name)


class GroupLookup(Protocol):
    """SubscriptionGroupManager#findSubscriptionGroupConfig (None: unknown and not auto-created)."""

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None: ...

    def contains(self, group: str) -> bool:
        """SubscriptionGroupManager#containsSubscriptionGroup (no auto-creation)."""
        ...


class OffsetStore(Protocol):
    """The ConsumerOffsetManager calls POP makes."""

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None: ...

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...


class ReviveLogWriter:
    """Appends checkpoint and ack records to the revive topic and counts the appends in progress per revive queue
    (the revive offset must not move past a checkpoint whose append has not returned). Event loop."""

    def __init__(self, store: MessageStore, config: PopConfig) -> None:
        self.store = store
        self.config = config
        self._pending = [0] * config.revive_queue_num

    def is_quiet(self, revive_queue_id: int) -> bool:
        """No append to this revive queue is in progress."""
        return self._pending[revive_queue_id] == 0

    async def append(
        self, records: Sequence[tuple[CheckPoint | AckMsg, int]], *, wait: bool = True
    ) -> list[PutMessageResult]:
        """Store ``(record, revive queue id)`` pairs in one put (one group commit); results in order.

        ``wait`` False: the records are written (in the page cache, so a killed broker process keeps them) but
        the put does not wait for the SYNC_FLUSH group commit (``WAIT=false``); the next group commit or the
        flush interval makes them durable. For consumer acks only: an ack lost to a machine crash means one
        redelivery (at-least-once), as RocketMQ's buffered acks (PopBufferMergeService)."""
        inners = [
            build_record(
                r,
                revive_topic_name=self.config.revive_topic,
                revive_queue_id=q,
                store_host=self.store.store_host,
                wait=wait,
            )
            for r, q in records
        ]
        queues = [q for _, q in records]
        for q in queues:
            self._pending[q] += 1
        try:
            return await self.store.put_messages(inners)
        finally:
            for q in queues:
                self._pending[q] -= 1


@dataclass(frozen=True, slots=True)
class PopContext:
    """The broker parts the POP processors and the revive service use."""

    config: PopConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: GroupLookup
    offsets: OffsetStore
    table: InflightTable
    writer: ReviveLogWriter
    order_info: ConsumerOrderInfoManager

    def readable_topic(self, topic: str) -> TopicConfig:
        """The topic's config. Raises NoPermissionError (16) when the broker or the topic is not readable,
        TopicNotExistError (17) for an unknown topic."""
        if not PermName.is_readable(self.config.broker_permission):
            raise NoPermissionError(f"the broker[{self.config.broker_ip}] pop message is forbidden")
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        if not PermName.is_readable(config.perm):
            raise NoPermissionError(f"the topic[{topic}] peeking message is forbidden")
        return config

    def consumable_group(self, group: str) -> SubscriptionGroupConfig:
        """The group's config (auto-created when the broker does so). Raises MQBrokerError
        SUBSCRIPTION_GROUP_NOT_EXIST (26) for an unknown group, NoPermissionError (16) when its consume_enable is
        off."""
        config = self.groups.find_subscription_group_config(group)
        if config is None:
            raise MQBrokerError(
                f"subscription group [{group}] does not exist", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            )
        if not config.consume_enable:
            raise NoPermissionError(f"subscription group no permission, {group}")
        return config

    def resolve(self, text: str, group: str, topic: str) -> tuple[ReceiptHandle, InflightCheckPoint, int]:
        """The handle, its live checkpoint and the message's index there.

        Raises InvalidReceiptHandleError (INVALID_PARAMETER, 29) for text that does not decode, InvalidParameterError
        (29) for a handle of another broker, MQBrokerError NO_MESSAGE (208) when the message is not in flight
        under this group and topic: expired, acked (or being acked), replaced by a change of invisible time, or
        revived."""
        handle = ReceiptHandle.decode(text)
        if handle.broker_name != self.config.broker_name:
            raise MQBrokerError(
                f"receipt handle is invalid: it names broker {handle.broker_name}, this is {self.config.broker_name}",
                ResponseCode.INVALID_PARAMETER,
            )
        now = now_ms()
        key = (handle.real_topic(topic, group), group, handle.queue_id, handle.start_offset, handle.retrieve_time_ms)
        row = self.table.find(key)
        index = -1 if row is None else row.index_of(handle.offset)
        if row is None or index < 0:
            if handle.is_expired(now):
                raise _not_in_flight("receipt handle is expired")
            raise _not_in_flight("receipt handle is not in flight: acked, changed, revived, or of another group/topic")
        if row.deadline_ms <= now:
            raise _not_in_flight("receipt handle is expired")
        if row.is_acked(index):
            raise _not_in_flight("receipt handle was acked already")
        return handle, row, index


def _not_in_flight(remark: str) -> MQError:
    return MQBrokerError(remark, ResponseCode.NO_MESSAGE)
