"""Gateway settings: environment ``MQ_GATEWAY_<FIELD>`` and an optional YAML (``MQ_GATEWAY_CONFIG_FILE``).

Field names mirror DefaultMQProducer's properties (docstrings name them) plus the 5.x proxy's limits.
Read once at start-up on the main thread.
"""

from __future__ import annotations

from typing import ClassVar

from mq_common.constants import DEFAULT_TOPIC_QUEUE_NUMS, MAX_MESSAGE_SIZE_BYTES
from mq_common.settings import ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class GatewaySettings(ServiceSettings):
    """Settings of ``mqgateway``."""

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
    send_msg_timeout_ms: int = Field(
        default=3000, gt=0, description="DefaultMQProducer.sendMsgTimeout: one budget for all attempts, ms."
    )
    max_send_msg_timeout_ms: int = Field(
        default=60_000, gt=0, description="Largest send_timeout_ms a request may ask for, ms (larger: refused)."
    )
    retry_times_when_send_failed: int = Field(
        default=2, ge=0, le=16, description="DefaultMQProducer.retryTimesWhenSendFailed."
    )
    retry_another_broker_when_not_store_ok: bool = Field(
        default=False, description="DefaultMQProducer.retryAnotherBrokerWhenNotStoreOK."
    )
    send_latency_fault_enable: bool = Field(default=False, description="ClientConfig.sendLatencyEnable.")
    compress_msg_body_over_howmuch_bytes: int = Field(
        default=4096, ge=0, description="DefaultMQProducer.compressMsgBodyOverHowmuch, bytes."
    )
    max_message_size_bytes: int = Field(
        default=MAX_MESSAGE_SIZE_BYTES,
        gt=0,
        le=MAX_MESSAGE_SIZE_BYTES,
        description="DefaultMQProducer.maxMessageSize, bytes.",
    )
    poll_name_server_interval_ms: int = Field(
        default=30_000, ge=10, description="ClientConfig.pollNameServerInterval: route refresh period, ms."
    )
    default_topic_queue_nums: int = Field(
        default=DEFAULT_TOPIC_QUEUE_NUMS, gt=0, description="DefaultMQProducer.defaultTopicQueueNums."
    )
    max_batch_messages: int = Field(
        default=1000, gt=0, description="Most messages in one SendBatch request (more: INVALID_ARGUMENT)."
    )
    shutdown_grace_ms: int = Field(
        default=10_000, ge=0, description="How long in-flight calls may finish on SIGTERM, ms."
    )

    def namesrv_addrs(self) -> list[str]:
        """``namesrv_addr`` split on ';' and ','; blanks dropped."""
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]
