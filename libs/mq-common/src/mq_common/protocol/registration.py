"""What a broker tells a name server, and what it answers (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.DataVersion,
org.apache.rocketmq.remoting.protocol.header.namesrv.RegisterBrokerRequestHeader (+ TopicConfigSerializeWrapper)
and org.apache.rocketmq.remoting.protocol.namesrv.RegisterBrokerResult.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mq_common.protocol.topic import TopicConfig


@dataclass(frozen=True, slots=True, order=True)
class DataVersion:
    """Version of a broker's topic config table. Mirrors org.apache.rocketmq.remoting.protocol.DataVersion.

    Two versions are equal when all three fields are equal (DataVersion#equals); ``timestamp_ms`` is ms since
    the epoch.
    """

    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0

    def next_version(self) -> DataVersion:
        """DataVersion#nextVersion: counter + 1, timestamp now."""
        return DataVersion(self.state_version, time.time_ns() // 1_000_000, self.counter + 1)

    def to_json(self) -> dict[str, int]:
        """RocketMQ's JSON shape: ``{"stateVersion", "timestamp", "counter"}`` (the ``dataVersion`` of its config
        files)."""
        return {"stateVersion": self.state_version, "timestamp": self.timestamp_ms, "counter": self.counter}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> DataVersion:
        """The inverse of :meth:`to_json`; missing fields (or no object) are 0. Raises ValueError/TypeError for a
        field that is not a number."""
        data = data or {}
        return cls(int(data.get("stateVersion", 0)), int(data.get("timestamp", 0)), int(data.get("counter", 0)))


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One REGISTER_BROKER: identity, address and the whole topic config table with its data version.

    Mirrors RegisterBrokerRequestHeader + TopicConfigSerializeWrapper. ``broker_addr``/``ha_server_addr`` are
    ``"host:port"``; ``heartbeat_timeout_ms`` 0 means the name server's broker_channel_expired_ms (120000).
    Not validated here: the name server checks it (mq_namesrv.model.validate_registration).
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    topic_configs: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    ha_server_addr: str = ""
    heartbeat_timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """The name server's answer to a registration; both set for slaves only.

    Mirrors org.apache.rocketmq.remoting.protocol.namesrv.RegisterBrokerResult.
    """

    ha_server_addr: str = ""
    master_addr: str = ""
