"""Name server domain values (no protobuf). Frozen and slotted; built on the service's asyncio loop.

Mirrors org.apache.rocketmq.remoting.protocol.{DataVersion, route.QueueData, route.BrokerData,
route.TopicRouteData, body.ClusterInfo, namesrv.RegisterBrokerResult}, org.apache.rocketmq.common.TopicConfig
and org.apache.rocketmq.namesrv.routeinfo.{BrokerLiveInfo, BrokerAddrInfo}.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from mq_common.constants import MixAll
from mq_common.errors import InvalidParameterError

MAX_PORT: Final = 65_535
MAX_QUEUE_NUMS: Final = 1024 * 64
# host: an IPv4 literal, a DNS name, or a bracketed IPv6 literal ("[::1]").
_HOST_RE: Final = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?)$")


@dataclass(frozen=True, slots=True, order=True)
class DataVersion:
    """Version of a broker's topic config table. Mirrors org.apache.rocketmq.remoting.protocol.DataVersion.

    Two versions are equal when all three fields are equal (DataVersion#equals).
    """

    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's config as registered by a broker. Mirrors org.apache.rocketmq.common.TopicConfig."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = 6
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(frozen=True, slots=True)
class QueueData:
    """Queue counts and permission of a topic on one broker group. Mirrors ...route.QueueData."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @classmethod
    def of(cls, broker_name: str, config: TopicConfig) -> QueueData:
        """RouteInfoManager#createAndUpdateQueueData's QueueData for ``config`` on ``broker_name``."""
        return cls(broker_name, config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag)


@dataclass(frozen=True, slots=True)
class BrokerData:
    """Addresses of one broker group: broker id (0 = master) -> ``"host:port"``. Mirrors ...route.BrokerData."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Route of one topic. Mirrors ...route.TopicRouteData; queue/broker datas sorted by broker name."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str = ""


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address. Mirrors org.apache.rocketmq.namesrv.routeinfo.BrokerLiveInfo.

    Expired when ``last_update_timestamp_ms + heartbeat_timeout_ms < now`` (ms since the epoch).
    """

    broker_addr: str
    last_update_timestamp_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str = ""

    def is_expired(self, now_ms: int) -> bool:
        return self.last_update_timestamp_ms + self.heartbeat_timeout_ms < now_ms


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Snapshot of the broker tables. Mirrors ...body.ClusterInfo plus the live table (keyed by address)."""

    broker_addr_table: Mapping[str, BrokerData]
    cluster_addr_table: Mapping[str, tuple[str, ...]]
    broker_live_table: Mapping[str, BrokerLiveInfo]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One REGISTER_BROKER request. Mirrors RegisterBrokerRequestHeader + TopicConfigSerializeWrapper.

    ``heartbeat_timeout_ms`` 0 means the name server's broker_channel_expired_ms.
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    topic_configs: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()
    ha_server_addr: str = ""
    heartbeat_timeout_ms: int = 0

    def validate(self) -> None:
        """Raise InvalidParameterError (INVALID_PARAMETER, 29) for a request the route table cannot hold."""
        require_name("clusterName", self.cluster_name)
        require_name("brokerName", self.broker_name)
        require_broker_id(self.broker_id)
        validate_addr(self.broker_addr)
        if self.ha_server_addr:
            validate_addr(self.ha_server_addr)
        if self.heartbeat_timeout_ms < 0:
            raise InvalidParameterError(f"heartbeatTimeoutMillis must be >= 0, got {self.heartbeat_timeout_ms}")
        for name, config in self.topic_configs.items():
            validate_topic_config(name, config)


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """Mirrors org.apache.rocketmq.remoting.protocol.namesrv.RegisterBrokerResult (set for slaves only)."""

    ha_server_addr: str = ""
    master_addr: str = ""


def require_name(what: str, value: str) -> None:
    """Raise InvalidParameterError when ``value`` is blank or has whitespace/control characters."""
    if not value or not value.strip():
        raise InvalidParameterError(f"{what} is blank")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidParameterError(f"{what} contains whitespace or control characters: {value!r}")


def require_broker_id(broker_id: int) -> None:
    if broker_id < 0:
        raise InvalidParameterError(f"brokerId must be >= 0 (0 is the master), got {broker_id}")


def validate_addr(addr: str) -> None:
    """Accept ``host:port`` (IPv4, DNS name or ``[IPv6]``, port 1..65535); else raise InvalidParameterError."""
    host, sep, port = addr.rpartition(":")
    if not addr or not sep or not port.isdigit() or not _HOST_RE.fullmatch(host):
        raise InvalidParameterError(f"broker address must be host:port, got {addr!r}")
    if not 0 < int(port) <= MAX_PORT:
        raise InvalidParameterError(f"broker address port out of range: {addr!r}")


def validate_topic_config(name: str, config: TopicConfig) -> None:
    """Raise InvalidParameterError for a blank topic, a key/name mismatch or queue counts out of range."""
    require_name("topic", name)
    if config.topic_name and config.topic_name != name:
        raise InvalidParameterError(f"topic config key {name!r} differs from its topicName {config.topic_name!r}")
    for what, nums in (("readQueueNums", config.read_queue_nums), ("writeQueueNums", config.write_queue_nums)):
        if not 0 <= nums <= MAX_QUEUE_NUMS:
            raise InvalidParameterError(f"{what} of topic {name} out of range [0, {MAX_QUEUE_NUMS}]: {nums}")


def is_master(broker_id: int) -> bool:
    return broker_id == MixAll.MASTER_ID
