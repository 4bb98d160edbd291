"""The Settings a v2 client gets back on its Telemetry stream: its own, merged with the server's policy.

Producer: backoff EXPONENTIAL {max_attempts, 10 ms -> 1 s, x2}, publishing.max_body_size = the body limit,
validate_message_type = enable_topic_message_type_check. Consumer: subscription {receive_batch_size,
long_polling_timeout, fifo = the group's consume_message_orderly}, backoff CUSTOMIZED (RocketMQ's 18 delay levels
from 1 s) with max_attempts = retry_max_times + 1. Both: metric{on: false}. Pure functions; any thread.
Mirrors org.apache.rocketmq.proxy.grpc.v2.common.GrpcClientSettingsManager#mergeProducerData/#mergeSubscriptionData.
"""

from __future__ import annotations

from typing import Final

from apache.rocketmq.v2 import definition_pb2
from google.protobuf import duration_pb2
from mq_common.protocol import SubscriptionGroupConfig

from mq_gateway.v2.limits import V2Limits

PRODUCER_BACKOFF_INITIAL_MS: Final = 10
PRODUCER_BACKOFF_MAX_MS: Final = 1_000
PRODUCER_BACKOFF_MULTIPLIER: Final = 2.0
# RocketMQ's message delay levels 3..18 plus the first two (1s 5s 10s 30s 1m ... 2h), in seconds: the
# CUSTOMIZED backoff of a consumer group's retries.
CONSUMER_BACKOFF_S: Final = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
DEFAULT_RETRY_MAX_TIMES: Final = 16


def duration_ms(ms: int) -> duration_pb2.Duration:
    """A protobuf Duration of ``ms`` milliseconds."""
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def has_role(settings: definition_pb2.Settings) -> bool:
    """True when the client's settings say publishing or subscription (else the proxy refuses the stream)."""
    return settings.WhichOneof("pub_sub") is not None


def producer_settings(client: definition_pb2.Settings, limits: V2Limits) -> definition_pb2.Settings:
    """``client`` with the producer policy merged in (a new message; ``client`` is untouched)."""
    merged = definition_pb2.Settings()
    merged.CopyFrom(client)
    policy = merged.backoff_policy
    policy.Clear()
    policy.max_attempts = limits.v2_producer_max_attempts
    backoff = policy.exponential_backoff
    backoff.initial.CopyFrom(duration_ms(PRODUCER_BACKOFF_INITIAL_MS))
    backoff.max.CopyFrom(duration_ms(PRODUCER_BACKOFF_MAX_MS))
    backoff.multiplier = PRODUCER_BACKOFF_MULTIPLIER
    merged.publishing.max_body_size = limits.max_message_size_bytes
    merged.publishing.validate_message_type = limits.enable_topic_message_type_check
    merged.metric.Clear()
    merged.metric.on = False
    return merged


def consumer_settings(
    client: definition_pb2.Settings, limits: V2Limits, group: SubscriptionGroupConfig | None
) -> definition_pb2.Settings:
    """``client`` with the consumer policy of ``group`` merged in (None: the defaults, 16 retries, not orderly)."""
    merged = definition_pb2.Settings()
    merged.CopyFrom(client)
    subscription = merged.subscription
    subscription.receive_batch_size = limits.receive_batch_size_max
    subscription.long_polling_timeout.CopyFrom(duration_ms(limits.long_polling_timeout_max_ms))
    subscription.fifo = group.consume_message_orderly if group is not None else False
    retry_max_times = group.retry_max_times if group is not None else DEFAULT_RETRY_MAX_TIMES
    policy = merged.backoff_policy
    policy.Clear()
    policy.max_attempts = retry_max_times + 1
    policy.customized_backoff.next.extend(duration_ms(s * 1000) for s in CONSUMER_BACKOFF_S)
    merged.metric.Clear()
    merged.metric.on = False
    return merged
