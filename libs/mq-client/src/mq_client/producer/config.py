"""Producer settings. Mirrors the fields of org.apache.rocketmq.client.producer.DefaultMQProducer and
ClientConfig that the send path reads (names in Python style, units in names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mq_common.config_fields import described
from mq_common.constants import DEFAULT_TOPIC_QUEUE_NUMS, MAX_MESSAGE_SIZE_BYTES, MixAll
from mq_common.errors import RETRIABLE_BROKER_CODES, InvalidParameterError

from mq_client.producer.fault_strategy import LATENCY_TABLES

# One broker RPC of a batch send carries at most this many bytes of bodies + properties (gRPC's limit is
# 64 MiB, mq_common.grpc_server.MAX_GRPC_MESSAGE_BYTES) and this many messages.
MAX_BROKER_BATCH_BYTES: Final = 16 * 1024 * 1024
MAX_BROKER_BATCH_MESSAGES: Final = 1024
assert MAX_BROKER_BATCH_BYTES >= MAX_MESSAGE_SIZE_BYTES * 2


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Settings of one producer. Raises InvalidParameterError (29) for out-of-range values.

    - ``producer_group``: producerGroup (checked at start: Validators#checkGroup, not DEFAULT_PRODUCER).
    - ``send_msg_timeout_ms``: sendMsgTimeout, the ONE budget shared by the route lookup and every attempt.
    - ``retry_times_when_send_failed``: retryTimesWhenSendFailed; SYNC sends make 1 + this many attempts.
    - ``retry_another_broker_when_not_store_ok``: retryAnotherBrokerWhenNotStoreOK; a stored-but-not-SEND_OK
      result (FLUSH_DISK_TIMEOUT, ...) is retried and returned only if no later attempt does better.
    - ``send_latency_fault_enable``: sendLatencyFaultEnable (MQFaultStrategy's latency isolation).
    - ``compress_msg_body_over_howmuch_bytes``: compressMsgBodyOverHowmuch; bodies of at least this many
      bytes are zlib-compressed at ``compress_level`` (rocketmq.message.compressLevel, 5).
    - ``max_message_size_bytes``: maxMessageSize (4 MiB).
    - ``poll_name_server_interval_ms``: pollNameServerInterval, the route refresh period.
    - ``mq_client_api_timeout_ms``: mqClientApiTimeout, each name server query's timeout.
    - ``create_topic_key`` / ``default_topic_queue_nums``: createTopicKey (TBW102) / defaultTopicQueueNums.
    - ``retry_response_codes``: retryResponseCodes, broker codes after which an attempt is retried.
    - ``retry_times_when_send_async_failed``: retryTimesWhenSendAsyncFailed; ASYNC sends make 1 + this many
      attempts, retrying transport failures only (MQClientAPIImpl#onExceptionImpl).
    - ``latency_fault_tables``: which MQFaultStrategy tables isolation uses, "4.x" (default) or "5.x"
      (fault_strategy.LATENCY_TABLES).
    - ``max_in_flight_messages`` / ``max_in_flight_bytes``: backPressureForAsyncSendNum / ...Size, applied to
      every mode: sends (messages, body bytes) admitted and not yet finished; 0 = no limit. A send over the
      limit waits inside its budget, then fails with FlowControlError (FLOW_CONTROL, 215).
    - ``message_batch_enable``: send_batch of one topic (no delay, no transaction, no body to compress) goes as
      RocketMQ's MessageBatch, one queue per chunk (DefaultMQProducer#send of a collection; messages with
      different sharding keys grouped by their key's queue first); False sends every batch message by message,
      each on its own queue.
    """

    producer_group: str
    send_msg_timeout_ms: int = described(3000, "DefaultMQProducer.sendMsgTimeout: one budget for all attempts, ms.")
    retry_times_when_send_failed: int = described(2, "DefaultMQProducer.retryTimesWhenSendFailed.")
    retry_another_broker_when_not_store_ok: bool = described(
        False, "DefaultMQProducer.retryAnotherBrokerWhenNotStoreOK."
    )
    send_latency_fault_enable: bool = described(False, "ClientConfig.sendLatencyEnable.")
    compress_msg_body_over_howmuch_bytes: int = described(4096, "DefaultMQProducer.compressMsgBodyOverHowmuch, bytes.")
    compress_level: int = 5
    max_message_size_bytes: int = described(MAX_MESSAGE_SIZE_BYTES, "DefaultMQProducer.maxMessageSize, bytes.")
    poll_name_server_interval_ms: int = described(
        30_000, "ClientConfig.pollNameServerInterval: route refresh period, ms."
    )
    mq_client_api_timeout_ms: int = 3000
    create_topic_key: str = MixAll.DEFAULT_TOPIC
    default_topic_queue_nums: int = described(DEFAULT_TOPIC_QUEUE_NUMS, "DefaultMQProducer.defaultTopicQueueNums.")
    retry_response_codes: frozenset[int] = RETRIABLE_BROKER_CODES
    max_broker_batch_bytes: int = MAX_BROKER_BATCH_BYTES
    max_broker_batch_messages: int = MAX_BROKER_BATCH_MESSAGES
    retry_times_when_send_async_failed: int = described(
        2, "DefaultMQProducer.retryTimesWhenSendAsyncFailed (SendStream)."
    )
    latency_fault_tables: str = described(
        "4.x", "MQFaultStrategy latencyMax/notAvailableDuration tables: RocketMQ 4.x's or 5.x's."
    )
    max_in_flight_messages: int = described(
        0, "DefaultMQProducer.backPressureForAsyncSendNum for every mode: messages in flight; 0 = no limit."
    )
    max_in_flight_bytes: int = described(
        0, "DefaultMQProducer.backPressureForAsyncSendSize, every mode: body bytes in flight; 0 = no limit."
    )
    message_batch_enable: bool = described(
        True,
        "SendBatch of one topic (no delay, no body to compress) goes to the broker as RocketMQ's MessageBatch: one "
        "SEND_BATCH_MESSAGE to one queue per chunk, messages with sharding keys grouped by their key's queue first; "
        "false: message by message.",
    )

    def __post_init__(self) -> None:
        _at_least("send_msg_timeout_ms", self.send_msg_timeout_ms, 1)
        _at_least("retry_times_when_send_failed", self.retry_times_when_send_failed, 0)
        _at_least("compress_msg_body_over_howmuch_bytes", self.compress_msg_body_over_howmuch_bytes, 0)
        _at_least("max_message_size_bytes", self.max_message_size_bytes, 1)
        _at_least("poll_name_server_interval_ms", self.poll_name_server_interval_ms, 10)
        _at_least("mq_client_api_timeout_ms", self.mq_client_api_timeout_ms, 1)
        _at_least("default_topic_queue_nums", self.default_topic_queue_nums, 1)
        _at_least("max_broker_batch_messages", self.max_broker_batch_messages, 1)
        _at_least("max_broker_batch_bytes", self.max_broker_batch_bytes, 1)
        _at_least("retry_times_when_send_async_failed", self.retry_times_when_send_async_failed, 0)
        _at_least("max_in_flight_messages", self.max_in_flight_messages, 0)
        _at_least("max_in_flight_bytes", self.max_in_flight_bytes, 0)
        if self.latency_fault_tables not in LATENCY_TABLES:
            raise InvalidParameterError(
                f"latency_fault_tables must be one of {sorted(LATENCY_TABLES)}, got {self.latency_fault_tables!r}"
            )
        if not 0 <= self.compress_level <= 9:
            raise InvalidParameterError(f"compress_level must be in [0, 9], got {self.compress_level}")

    @property
    def times_total_sync(self) -> int:
        """Attempts of a SYNC send: 1 + retry_times_when_send_failed."""
        return 1 + self.retry_times_when_send_failed

    @property
    def times_total_async(self) -> int:
        """Attempts of an ASYNC send: 1 + retry_times_when_send_async_failed."""
        return 1 + self.retry_times_when_send_async_failed


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise InvalidParameterError(f"{name} must be at least {minimum}, got {value}")
