"""The consumer side's protocol values, shared by the broker and the clients (no protobuf here): subscription
groups, consumer offsets, consume stats, heartbeats and consumer connections, and the request headers of the
consumer-side admin calls.

Mirrors org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig,
org.apache.rocketmq.remoting.protocol.admin.{OffsetWrapper, ConsumeStats},
org.apache.rocketmq.remoting.protocol.heartbeat.{SubscriptionData, ConsumeType, MessageModel, ConsumerData,
HeartbeatData}, org.apache.rocketmq.remoting.protocol.body.{Connection, ConsumerConnection} and the headers of
QUERY_CONSUMER_OFFSET, GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP, INVOKE_BROKER_TO_RESET_OFFSET,
DELETE_SUBSCRIPTIONGROUP and UNREGISTER_CLIENT. Converters: mq_common.protocol.convert.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from mq_common.constants import MixAll

SUB_ALL: Final = "*"
"""SubscriptionData.SUB_ALL: every tag."""


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings on one broker, with RocketMQ's defaults.

    ``retry_queue_nums``: queues of ``%RETRY%<group>``; ``retry_max_times``: deliveries before ``%DLQ%<group>``;
    ``broker_id`` / ``which_broker_when_consume_slowly``: where to pull from normally / when behind;
    ``consume_timeout_minute``: push consumers' consumeTimeout. ``attributes``: RocketMQ 5's group attributes.
    Mirrors org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MixAll.MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's JSON shape (subscriptionGroup.json's subscriptionGroupTable entry)."""
        return {json_name: getattr(self, name) for name, json_name in _SGC_JSON_NAMES} | {
            "attributes": dict(self.attributes)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """The inverse of :meth:`to_json`; missing fields take RocketMQ's defaults. Raises KeyError without
        ``groupName``, ValueError/TypeError for a field of the wrong type."""
        values: dict[str, Any] = {"group_name": str(data["groupName"])}
        for name, json_name in _SGC_JSON_NAMES[1:]:
            if json_name in data:
                kind = type(_SGC_DEFAULTS[name])
                values[name] = _as_bool(data[json_name]) if kind is bool else int(data[json_name])
        values["attributes"] = {str(k): str(v) for k, v in dict(data.get("attributes") or {}).items()}
        return cls(**values)


_SGC_JSON_NAMES: Final = (
    ("group_name", "groupName"),
    ("consume_enable", "consumeEnable"),
    ("consume_from_min_enable", "consumeFromMinEnable"),
    ("consume_broadcast_enable", "consumeBroadcastEnable"),
    ("consume_message_orderly", "consumeMessageOrderly"),
    ("retry_queue_nums", "retryQueueNums"),
    ("retry_max_times", "retryMaxTimes"),
    ("broker_id", "brokerId"),
    ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly"),
    ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable"),
    ("group_sys_flag", "groupSysFlag"),
    ("consume_timeout_minute", "consumeTimeoutMinute"),
)
_SGC_DEFAULTS: Final = {name: getattr(SubscriptionGroupConfig(""), name) for name, _ in _SGC_JSON_NAMES}


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"expected a JSON boolean, got {value!r}")


@dataclass(frozen=True, slots=True)
class ConsumerQueueOffset:
    """One queue's committed offset of one group (the next queue offset to consume). Mirrors
    UpdateConsumerOffsetRequestHeader (consumerGroup, topic, queueId, commitOffset)."""

    consumer_group: str
    topic: str
    queue_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class QueueConsumeStats:
    """One queue of a group's consume stats. ``broker_offset``: the queue's max offset; ``consumer_offset``: the
    group's committed offset; ``last_timestamp_ms``: store time of message ``consumer_offset - 1`` (0 if none);
    ``inflight_count``: popped, not yet acknowledged; ``locked_by``: the client id holding the queue's orderly lock
    (LOCK_BATCH_MQ), empty when nobody does. Mirrors OffsetWrapper keyed by its MessageQueue."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp_ms: int = 0
    inflight_count: int = 0
    locked_by: str = ""

    @property
    def diff(self) -> int:
        """Messages behind (ConsumeStats#computeTotalDiff's term), never negative."""
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A group's consume stats on one broker: one entry per queue, and pulled messages per second over the last
    minute. Mirrors org.apache.rocketmq.remoting.protocol.admin.ConsumeStats."""

    queues: tuple[QueueConsumeStats, ...] = ()
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        """ConsumeStats#computeTotalDiff: messages behind over every queue."""
        return sum(q.diff for q in self.queues)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic a consumer subscribes to and its tag expression (``"*"`` or ``"TagA || TagB"``). Mirrors
    org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData (the part on the wire)."""

    topic: str
    sub_string: str = SUB_ALL


class ConsumeType(Enum):
    """Mirrors org.apache.rocketmq.remoting.protocol.heartbeat.ConsumeType: pull (actively), push (passively),
    POP."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
    CONSUME_POP = "CONSUME_POP"


class MessageModel(Enum):
    """Mirrors org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """A consumer instance's heartbeat for one group: its client id, how it consumes and what it subscribes to.
    Mirrors HeartbeatData (clientID) + ConsumerData (groupName, consumeType, messageModel, subscriptionDataSet)
    + the client's language and version."""

    client_id: str
    consumer_group: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    subscriptions: tuple[SubscriptionData, ...] = ()
    language: str = "PYTHON"
    version: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """One live consumer instance as the broker saw it: ``client_addr`` ``"ip:port"``, last heartbeat time (ms
    since the epoch). Mirrors org.apache.rocketmq.remoting.protocol.body.Connection."""

    client_id: str
    client_addr: str
    language: str
    version: str
    last_update_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerConnectionInfo:
    """A group's live instances (sorted by client id) and subscriptions. Mirrors
    org.apache.rocketmq.remoting.protocol.body.ConsumerConnection."""

    connections: tuple[ConsumerConnection, ...]
    subscriptions: tuple[SubscriptionData, ...]
    consume_type: ConsumeType
    message_model: MessageModel


# --- request headers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14). Mirrors QueryConsumerOffsetRequestHeader."""

    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool = False


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS (208); empty ``topic``: every topic the group has offsets for. Mirrors
    GetConsumeStatsRequestHeader."""

    consumer_group: str
    topic: str = ""


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29); ``timestamp_ms`` ms since the epoch. Mirrors SearchOffsetRequestHeader."""

    topic: str
    queue_id: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): offsets of ``topic`` to those of a store time; ``force`` also moves
    them forward. Mirrors ResetOffsetRequestHeader."""

    consumer_group: str
    topic: str
    timestamp_ms: int
    force: bool = False


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader:
    """DELETE_SUBSCRIPTIONGROUP (207). Mirrors DeleteSubscriptionGroupRequestHeader."""

    group_name: str
    clean_offset: bool = False


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT (35), consumer part. Mirrors UnregisterClientRequestHeader."""

    client_id: str
    consumer_group: str
