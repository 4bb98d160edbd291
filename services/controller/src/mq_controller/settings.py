"""Controller settings: environment ``MQ_CONTROLLER_<FIELD>`` and an optional YAML (``MQ_CONTROLLER_CONFIG_FILE``).

Mirrors org.apache.rocketmq.common.ControllerConfig (scanNotActiveBrokerInterval, enableElectUncleanMaster) and
the controller's heartbeat timeout (BrokerConfig.controllerHeartBeatTimeoutMills). DLedger/JRaft peers are replaced
by the etcd endpoints the state lives in. Read once at start-up on the main thread.

etcd endpoints are written as etcd's own clients take them (``etcdctl --endpoints``): ``host:port`` or
``http://host:port`` dial plaintext, ``https://host:port`` dial mutual TLS with the service's TLS settings: the CA of
``tls_ca_file`` verifies etcd's server certificate and the controller presents ``tls_client_cert_file`` (default
``tls_cert_file``), as etcd's ``--client-cert-auth`` requires.
"""

from __future__ import annotations

import math
from typing import ClassVar, Final

from mq_common.auth.settings import AuthSettings
from mq_common.settings import ServiceSettings
from mq_common.tls import TlsClientConfig
from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

DEFAULT_CONTROLLER_PORT: Final = 9878
MIN_LEASE_TTL_S: Final = 2
ETCD_SCHEMES: Final = ("http://", "https://")
"""etcd refuses shorter leases in effect (its minimum TTL is 1.5 election timeouts, 1.5 s by default)."""


class ControllerSettings(ServiceSettings, AuthSettings):
    """Settings of ``mqcontroller``."""

    model_config: ClassVar[SettingsConfigDict] = SettingsConfigDict(
        env_prefix="MQ_CONTROLLER_", extra="forbid", frozen=True
    )

    listen_port: int = Field(
        default=DEFAULT_CONTROLLER_PORT,
        ge=0,
        le=65535,
        description="gRPC port (RocketMQ's controller listens on 9878 in its samples); 0 picks a free one.",
    )
    etcd_endpoints: str = Field(
        default="127.0.0.1:2379",
        description="Comma-separated endpoints of the etcd members that hold the controller's state: host:port or "
        "http://host:port (plaintext), https://host:port (mutual TLS with tls_ca_file and the client certificate; "
        "needs tls_enabled). Every endpoint takes the same scheme.",
    )
    etcd_key_prefix: str = Field(
        default="/pyrocketmq/controller",
        description="Prefix of every etcd key the controller writes (several clusters may share one etcd).",
    )
    etcd_call_timeout_ms: int = Field(
        default=2_000, gt=0, description="Deadline of one etcd call (a dead member is skipped after it), ms."
    )
    broker_heartbeat_timeout_ms: int = Field(
        default=3_000,
        gt=0,
        description="A broker silent this long is dead; its liveness lease in etcd lasts "
        "ceil(this / 1000) s, at least 2 s (BrokerConfig.controllerHeartBeatTimeoutMills), ms.",
    )
    scan_not_active_broker_interval_ms: int = Field(
        default=500,
        gt=0,
        description="How often every group's master lease is checked, electing a new master for a dead one "
        "(ControllerConfig.scanNotActiveBrokerInterval), ms.",
    )
    enable_elect_unclean_master: bool = Field(
        default=False,
        description="Elect a live replica outside the SyncStateSet when no in-sync one is alive; may lose "
        "acknowledged messages (ControllerConfig.enableElectUncleanMaster).",
    )
    max_groups: int = Field(default=10_000, gt=0, description="Broker groups one controller tracks at most.")
    shutdown_grace_ms: int = Field(
        default=5_000, ge=0, description="How long in-flight calls may finish on SIGTERM (shutdown hook), ms."
    )

    @field_validator("etcd_endpoints")
    @classmethod
    def _check_endpoints(cls, value: str) -> str:
        endpoints = [e.strip() for e in value.split(",")]
        for endpoint in endpoints:
            host, sep, port = _strip_scheme(endpoint).rpartition(":")
            if not sep or not host or not port.isdigit() or "/" in host:
                raise ValueError(f"etcd endpoint {endpoint!r} is not host:port, http://host:port or https://host:port")
        if len({e.startswith("https://") for e in endpoints}) > 1:
            raise ValueError("etcd endpoints mix https:// with plaintext ones")
        return value

    @model_validator(mode="after")
    def _check_etcd_tls(self) -> ControllerSettings:
        if self.etcd_tls and not self.tls_enabled:
            raise ValueError("https:// etcd endpoints need tls_enabled (the CA and the client certificate)")
        return self

    @property
    def etcd_endpoint_list(self) -> tuple[str, ...]:
        """``host:port`` of every etcd member (the scheme removed)."""
        return tuple(_strip_scheme(e.strip()) for e in self.etcd_endpoints.split(",") if e.strip())

    @property
    def etcd_tls(self) -> bool:
        """True when the etcd endpoints are ``https://``: the controller dials etcd over mutual TLS."""
        return self.etcd_endpoints.strip().startswith("https://")

    def etcd_tls_client_config(self) -> TlsClientConfig | None:
        """What the controller dials etcd with: the service's client TLS (CA, its component certificate, name
        override) for https:// endpoints, None (plaintext) otherwise."""
        return self.tls_client_config() if self.etcd_tls else None

    @property
    def lease_ttl_s(self) -> int:
        """The liveness lease TTL in whole seconds: ceil(broker_heartbeat_timeout_ms / 1000), at least 2."""
        return max(MIN_LEASE_TTL_S, math.ceil(self.broker_heartbeat_timeout_ms / 1000))


def _strip_scheme(endpoint: str) -> str:
    for scheme in ETCD_SCHEMES:
        if endpoint.startswith(scheme):
            return endpoint.removeprefix(scheme)
    return endpoint
