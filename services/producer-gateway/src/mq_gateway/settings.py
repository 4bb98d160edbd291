"""Gateway settings: environment ``MQ_GATEWAY_<FIELD>`` and an optional YAML (``MQ_GATEWAY_CONFIG_FILE``).

Field names mirror DefaultMQProducer's properties (docstrings name them) plus the 5.x proxy's limits.
Read once at start-up on the main thread.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from mq_client.producer.config import MAX_BROKER_BATCH_BYTES, MAX_BROKER_BATCH_MESSAGES, ProducerConfig
from mq_common.auth.settings import AuthSettings
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES
from mq_common.grpc_front import GrpcServerChoice
from mq_common.settings import ServiceSettings, mirrored_field
from pydantic import BeforeValidator, Field
from pydantic_settings import NoDecode, SettingsConfigDict


def _split_list(value: object) -> object:
    """A list setting may also be given as one string, items separated by ',' or ';' (blanks dropped)."""
    if isinstance(value, str):
        return [item.strip() for item in value.replace(";", ",").split(",") if item.strip()]
    return value


# A list of strings read from the environment as "a,b;c" (or from YAML as a list).
StrList = Annotated[list[str], NoDecode, BeforeValidator(_split_list)]


class GatewaySettings(ServiceSettings, AuthSettings):
    """Settings of ``mqgateway`` (with AuthSettings: authentication_enabled, authorization_enabled, auth_*)."""

    model_config: ClassVar[SettingsConfigDict] = SettingsConfigDict(
        env_prefix="MQ_GATEWAY_", extra="forbid", frozen=True
    )

    listen_port: int = Field(default=8081, ge=0, le=65535, description="gRPC port (the 5.x proxy's); 0 picks one.")
    namesrv_addr: str = Field(
        default="127.0.0.1:9876",
        min_length=1,
        description="Name servers, 'host:port' separated by ';' or ',' (ClientConfig.namesrvAddr).",
    )
    producer_group: str = Field(
        default="MQ_GATEWAY_PRODUCER_GROUP", min_length=1, description="DefaultMQProducer.producerGroup."
    )
    send_msg_timeout_ms: int = mirrored_field(ProducerConfig, "send_msg_timeout_ms", gt=0)
    max_send_msg_timeout_ms: int = Field(
        default=60_000, gt=0, description="Largest send_timeout_ms a request may ask for, ms (larger: refused)."
    )
    retry_times_when_send_failed: int = mirrored_field(ProducerConfig, "retry_times_when_send_failed", ge=0, le=16)
    retry_another_broker_when_not_store_ok: bool = mirrored_field(
        ProducerConfig, "retry_another_broker_when_not_store_ok"
    )
    send_latency_fault_enable: bool = mirrored_field(ProducerConfig, "send_latency_fault_enable")
    compress_msg_body_over_howmuch_bytes: int = mirrored_field(
        ProducerConfig, "compress_msg_body_over_howmuch_bytes", ge=0
    )
    max_message_size_bytes: int = mirrored_field(
        ProducerConfig, "max_message_size_bytes", gt=0, le=MAX_MESSAGE_SIZE_BYTES
    )
    poll_name_server_interval_ms: int = mirrored_field(ProducerConfig, "poll_name_server_interval_ms", ge=10)
    default_topic_queue_nums: int = mirrored_field(ProducerConfig, "default_topic_queue_nums", gt=0)
    max_batch_messages: int = Field(
        default=1000,
        gt=0,
        description="Most messages in one v1 SendBatch or v2 SendMessage request (more: INVALID_ARGUMENT, checked "
        "before the request is parsed).",
    )
    shutdown_grace_ms: int = Field(
        default=10_000, ge=0, description="How long in-flight calls may finish on SIGTERM, ms."
    )
    grpc_server: GrpcServerChoice = Field(
        default="auto",
        description="The gRPC server: grpcio (grpc.aio), native (pygrpc-native: HTTP/2 in Rust, plaintext only, "
        "refused with tls_enabled) or auto (native when TLS is off and pygrpc-native is installed, else grpcio; "
        "docs/architecture.md, 'The gRPC front').",
    )
    latency_fault_tables: Literal["4.x", "5.x"] = mirrored_field(ProducerConfig, "latency_fault_tables")
    coalesce_linger_ms: float = Field(
        default=2.0,
        ge=0,
        le=2,
        description=(
            "How long an open per-broker batch waits for more sends while a call to that broker is in flight, ms"
            " (none when the broker has nothing in flight)."
        ),
    )
    coalesce_max_batch_bytes: int = Field(
        default=4 * 1024 * 1024,
        gt=0,
        le=MAX_BROKER_BATCH_BYTES,
        description="Most bytes (bodies + properties + topics) in one coalesced broker call.",
    )
    coalesce_max_batch_messages: int = Field(
        default=256, gt=0, le=MAX_BROKER_BATCH_MESSAGES, description="Most messages in one coalesced broker call."
    )
    max_in_flight_messages: int = mirrored_field(ProducerConfig, "max_in_flight_messages", default=10_000, ge=0)
    max_in_flight_bytes: int = mirrored_field(ProducerConfig, "max_in_flight_bytes", default=256 * 1024 * 1024, ge=0)
    topic_allow_list: StrList = Field(
        default_factory=list,
        description="Topics the gateway sends to (shell patterns, ',' separated); empty = every topic.",
    )
    topic_deny_list: StrList = Field(
        default_factory=list, description="Topics refused with NO_PERMISSION (16) (shell patterns, ',' separated)."
    )
    hook_plugins: StrList = Field(
        default_factory=list,
        description="Extra producer hooks, 'package.module:factory' (CheckForbiddenHook and/or SendMessageHook).",
    )

    # RocketMQ 5 proxy limits for apache.rocketmq.v2.MessagingService (ProxyConfig's names, units in ours).
    max_user_property_size_bytes: int = Field(
        default=16_384,
        gt=0,
        description="Most bytes of user properties + tag + keys of one v2 message (maxUserPropertySize).",
    )
    user_property_max_num: int = Field(
        default=128, gt=0, description="Most user properties of one v2 message (userPropertyMaxNum)."
    )
    max_message_group_size_bytes: int = Field(
        default=64, gt=0, description="A v2 message_group must be shorter than this many bytes (maxMessageGroupSize)."
    )
    max_delay_time_ms: int = Field(
        default=259_200_000,
        gt=0,
        description="Latest delivery_timestamp a v2 message may ask for, ms from now (maxDelayTimeMills; later: "
        "ILLEGAL_DELIVERY_TIME 40012). 3 days, not the proxy's 1 day, so the broker's timer_max_delay_sec (3 days) "
        "is the limit users meet.",
    )
    default_invisible_time_ms: int = Field(
        default=60_000, gt=0, description="Invisible time of auto-renewed v2 receives, ms (defaultInvisibleTimeMills)."
    )
    min_invisible_time_ms_for_recv: int = Field(
        default=10_000, gt=0, description="Smallest invisible_duration of a v2 ReceiveMessage, ms."
    )
    max_invisible_time_ms: int = Field(
        default=43_200_000, gt=0, description="Largest invisible_duration of a v2 call, ms (maxInvisibleTimeMills)."
    )
    long_polling_timeout_min_ms: int = Field(
        default=5_000, gt=0, description="Shortest v2 long poll, ms; a shorter remaining deadline is refused (40018)."
    )
    long_polling_timeout_max_ms: int = Field(default=20_000, gt=0, description="Longest v2 long poll, ms.")
    receive_batch_size_max: int = Field(
        default=32, gt=0, le=32, description="Most messages of one v2 ReceiveMessage (the broker's POP cap)."
    )
    client_idle_timeout_ms: int = Field(
        default=120_000,
        gt=0,
        description="A v2 Telemetry stream that sends nothing this long is closed, ms (grpcClientIdleTimeMills).",
    )
    max_telemetry_sessions: int = Field(
        default=100_000, gt=0, description="Most v2 client sessions (one per client id) kept; the oldest is dropped."
    )
    v2_producer_max_attempts: int = Field(
        default=3, gt=0, description="max_attempts the v2 settings give producers (grpcClientProducerMaxAttempts)."
    )
    enable_topic_message_type_check: bool = Field(
        default=True,
        description="v2 SendMessage refuses a message whose type (NORMAL, FIFO, DELAY, TRANSACTION) the topic's "
        "message.type attribute does not accept (40014), and producers are told to check it too "
        "(ProxyConfig.enableTopicMessageTypeCheck).",
    )

    def namesrv_addrs(self) -> list[str]:
        """``namesrv_addr`` split on ';' and ','; blanks dropped."""
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]
