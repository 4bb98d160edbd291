"""Live consumer instances of one broker, by group, kept alive by heartbeats (memory only).

Mirrors org.apache.rocketmq.broker.client.ConsumerManager (#registerConsumer, #unregisterConsumer,
#scanNotActiveChannel, #findSubscriptionData) and ConsumerGroupInfo. RocketMQ keys an instance by its Netty
channel; over gRPC there is no channel per client, so an instance is its client id, and it expires when it sends
no heartbeat for ``channel_expired_timeout_ms`` (BrokerConfig.channelExpiredTimeout, 120 s; clients beat every
30 s). A group's subscriptions are those of its latest heartbeat (ConsumerGroupInfo#updateSubscription).

Event loop only. Bounded: MAX_CLIENTS_PER_GROUP instances a group, MAX_CONSUMER_GROUPS groups, MAX_SUBSCRIPTIONS
topics a heartbeat; beyond, a heartbeat is refused with SYSTEM_BUSY (2) / INVALID_PARAMETER (29).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final

from mq_common.errors import InvalidParameterError, MQError
from mq_common.logging import get_logger
from mq_common.protocol import (
    ConsumerConnection,
    ConsumerConnectionInfo,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from mq_common.response_code import ResponseCode

log = get_logger("mq_broker.consumer.consumer_manager")

DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS: Final = 120_000
"""BrokerConfig.channelExpiredTimeout."""
SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_MS: Final = 10_000
"""How often the broker runs :meth:`ConsumerManager.scan_not_active_channel` (BrokerController's 10 s task)."""
MAX_CLIENTS_PER_GROUP: Final = 10_000
MAX_CONSUMER_GROUPS: Final = 100_000
MAX_SUBSCRIPTIONS: Final = 1_024
"""Topics one heartbeat may subscribe to."""
assert SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_MS < DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _GroupInfo:
    """ConsumerGroupInfo: a group's instances (client id -> connection) and its latest subscriptions."""

    consume_type: ConsumeType
    message_model: MessageModel
    clients: dict[str, ConsumerConnection] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)


class ConsumerManager:
    """Consumer groups and their live instances (see the module docstring)."""

    def __init__(self, *, channel_expired_timeout_ms: int = DEFAULT_CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        assert channel_expired_timeout_ms > 0
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self._groups: dict[str, _GroupInfo] = {}

    def register_consumer(self, heartbeat: HeartbeatData, client_addr: str, now_ms: int | None = None) -> bool:
        """Record a heartbeat of ``heartbeat.client_id`` (seen at ``client_addr`` ``"ip:port"``); True when the
        group's set of client ids changed (a new instance). Raises InvalidParameterError (29) for a heartbeat of
        more than MAX_SUBSCRIPTIONS topics, MQError SYSTEM_BUSY (2) when the group (or the table) is full.
        Mirrors ConsumerManager#registerConsumer."""
        if len(heartbeat.subscriptions) > MAX_SUBSCRIPTIONS:
            raise InvalidParameterError(f"a heartbeat subscribes to at most {MAX_SUBSCRIPTIONS} topics")
        group = heartbeat.consumer_group
        info = self._groups.get(group)
        if info is None:
            if len(self._groups) >= MAX_CONSUMER_GROUPS:
                raise MQError(
                    f"too many consumer groups online, at most {MAX_CONSUMER_GROUPS}", ResponseCode.SYSTEM_BUSY
                )
            info = _GroupInfo(heartbeat.consume_type, heartbeat.message_model)
        is_new = heartbeat.client_id not in info.clients
        if is_new and len(info.clients) >= MAX_CLIENTS_PER_GROUP:
            raise MQError(
                f"the consumer group[{group}] has {MAX_CLIENTS_PER_GROUP} clients online, no more",
                ResponseCode.SYSTEM_BUSY,
            )
        self._groups[group] = info
        info.consume_type = heartbeat.consume_type
        info.message_model = heartbeat.message_model
        info.clients[heartbeat.client_id] = ConsumerConnection(
            heartbeat.client_id,
            client_addr,
            heartbeat.language,
            heartbeat.version,
            _now_ms() if now_ms is None else now_ms,
        )
        info.subscriptions = {d.topic: d for d in heartbeat.subscriptions}
        if is_new:
            log.info("consumer_registered", group=group, client_id=heartbeat.client_id, client_addr=client_addr)
        return is_new

    def unregister_consumer(self, group: str, client_id: str) -> None:
        """``client_id`` leaves ``group`` (the group goes when it was the last). Mirrors
        ConsumerManager#unregisterConsumer."""
        info = self._groups.get(group)
        if info is None or info.clients.pop(client_id, None) is None:
            return
        log.info("consumer_unregistered", group=group, client_id=client_id)
        if not info.clients:
            del self._groups[group]

    def scan_not_active_channel(self, now_ms: int | None = None) -> int:
        """Drop instances without a heartbeat for longer than channel_expired_timeout_ms (and groups left
        empty); returns how many instances went. Mirrors ConsumerManager#scanNotActiveChannel."""
        now = _now_ms() if now_ms is None else now_ms
        removed = 0
        for group, info in list(self._groups.items()):
            for client_id, conn in list(info.clients.items()):
                if now - conn.last_update_timestamp_ms > self.channel_expired_timeout_ms:
                    del info.clients[client_id]
                    removed += 1
                    log.warning("consumer_expired", group=group, client_id=client_id, client_addr=conn.client_addr)
            if not info.clients:
                del self._groups[group]
        return removed

    def client_ids(self, group: str) -> list[str]:
        """Client ids of ``group``'s live instances, sorted (GET_CONSUMER_LIST_BY_GROUP); empty when none."""
        info = self._groups.get(group)
        return sorted(info.clients) if info is not None else []

    def connection_info(self, group: str) -> ConsumerConnectionInfo | None:
        """``group``'s instances (by client id) and subscriptions, or None when none is online."""
        info = self._groups.get(group)
        if info is None:
            return None
        return ConsumerConnectionInfo(
            connections=tuple(info.clients[c] for c in sorted(info.clients)),
            subscriptions=tuple(info.subscriptions[t] for t in sorted(info.subscriptions)),
            consume_type=info.consume_type,
            message_model=info.message_model,
        )

    def groups(self) -> list[str]:
        """Groups with at least one live instance, sorted."""
        return sorted(self._groups)

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """``group``'s subscription of ``topic``, None when it has none. Mirrors
        ConsumerManager#findSubscriptionData."""
        info = self._groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def groups_by_topic(self, topic: str) -> set[str]:
        """Online groups subscribing to ``topic``. Mirrors ConsumerManager#queryTopicConsumeByWho."""
        return {g for g, info in self._groups.items() if topic in info.subscriptions}
