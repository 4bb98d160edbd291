"""Name server checks of what brokers register (no protobuf). The values themselves live in mq_common.protocol.

Mirrors the checks of org.apache.rocketmq.namesrv.processor.DefaultRequestProcessor#registerBroker and
RouteInfoManager (RocketMQ trusts its brokers more; a refused registration gets INVALID_PARAMETER, 29).
"""

from __future__ import annotations

import re
from typing import Final

from mq_common.constants import MixAll, validate_topic
from mq_common.errors import InvalidParameterError
from mq_common.protocol import BrokerRegistration, TopicConfig

MAX_PORT: Final = 65_535
MAX_QUEUE_NUMS: Final = 1024 * 64
# host: an IPv4 literal, a DNS name, or a bracketed IPv6 literal ("[::1]").
_HOST_RE: Final = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?)$")


def validate_registration(reg: BrokerRegistration) -> None:
    """Raise InvalidParameterError (INVALID_PARAMETER, 29) for a registration the route table cannot hold."""
    require_name("clusterName", reg.cluster_name)
    require_name("brokerName", reg.broker_name)
    require_broker_id(reg.broker_id)
    validate_addr(reg.broker_addr)
    if reg.ha_server_addr:
        validate_addr(reg.ha_server_addr)
    if reg.heartbeat_timeout_ms < 0:
        raise InvalidParameterError(f"heartbeatTimeoutMillis must be >= 0, got {reg.heartbeat_timeout_ms}")
    if reg.data_version.state_version < 0:
        raise InvalidParameterError(f"stateVersion must be >= 0, got {reg.data_version.state_version}")
    for name, config in reg.topic_configs.items():
        validate_topic_config(name, config)


def require_name(what: str, value: str) -> None:
    """Raise InvalidParameterError when ``value`` is blank or has whitespace/control characters."""
    if not value or not value.strip():
        raise InvalidParameterError(f"{what} is blank")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidParameterError(f"{what} contains whitespace or control characters: {value!r}")


def require_topic(topic: str) -> None:
    """Raise InvalidParameterError with TopicValidator's remark when ``topic`` is not a legal topic name."""
    remark = validate_topic(topic)
    if remark is not None:
        raise InvalidParameterError(remark)


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
