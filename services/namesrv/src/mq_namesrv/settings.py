"""Name server settings: environment ``MQ_NAMESRV_<FIELD>`` and an optional YAML (``MQ_NAMESRV_CONFIG_FILE``).

Mirrors org.apache.rocketmq.common.namesrv.NamesrvConfig and the name server's NettyServerConfig; the
authentication fields (``MQ_NAMESRV_AUTHENTICATION_ENABLED``, ``MQ_NAMESRV_INIT_AUTHENTICATION_USER``,
``MQ_NAMESRV_INNER_CLIENT_AUTHENTICATION_CREDENTIALS``, ...) are mq_common.auth's AuthSettings: with authentication
on, the RPCs that change routes need a component certificate or a call signed by one of those super users
(mq_common.auth.admin_access). Read once at start-up on the main thread.
"""

from __future__ import annotations

from typing import ClassVar, Final

from mq_common.auth.settings import AuthSettings
from mq_common.settings import ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict

DEFAULT_MAX_TOPICS_PER_REGISTRATION: Final = 20_000


class NamesrvSettings(ServiceSettings, AuthSettings):
    """Settings of ``mqnamesrv``."""

    model_config: ClassVar[SettingsConfigDict] = SettingsConfigDict(
        env_prefix="MQ_NAMESRV_", extra="forbid", frozen=True
    )

    listen_port: int = Field(
        default=9876, ge=0, le=65535, description="gRPC port (NettyServerConfig.listenPort); 0 picks a free one."
    )
    scan_not_active_broker_interval_ms: int = Field(
        default=10_000,
        gt=0,
        description="How often expired brokers are removed (NamesrvConfig.scanNotActiveBrokerInterval), ms.",
    )
    broker_channel_expired_ms: int = Field(
        default=120_000,
        gt=0,
        description=(
            "Heartbeat timeout for registrations that carry none "
            "(RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME), ms."
        ),
    )
    shutdown_grace_ms: int = Field(
        default=5_000, ge=0, description="How long in-flight calls may finish on SIGTERM (shutdown hook), ms."
    )
    # --- hostile input (docs/security.md, "Hostile input and limits") ---
    max_topics_per_registration: int = Field(
        default=DEFAULT_MAX_TOPICS_PER_REGISTRATION,
        gt=0,
        description="Topics one RegisterBroker may carry; more: INVALID_ARGUMENT before the request is parsed, "
        "the broker's earlier registration stays.",
    )
