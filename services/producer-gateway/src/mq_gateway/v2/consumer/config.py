"""The v2 consumer side's limits and defaults, filled by the integrator from GatewaySettings.

Mirrors the consumer fields of org.apache.rocketmq.proxy.config.ProxyConfig (defaultInvisibleTimeMills,
minInvisibleTimeMillsForRecv, maxInvisibleTimeMills, grpcClientConsumerMin/MaxLongPollingTimeoutMillis, the
broker's pop batch cap of 32). Frozen value; any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_INVISIBLE_TIME_MS: Final = 60_000
MIN_INVISIBLE_TIME_MS_FOR_RECV: Final = 10_000
MAX_INVISIBLE_TIME_MS: Final = 12 * 3_600_000
LONG_POLLING_TIMEOUT_MIN_MS: Final = 5_000
LONG_POLLING_TIMEOUT_MAX_MS: Final = 20_000
RECEIVE_BATCH_SIZE_MAX: Final = 32
PULL_BATCH_SIZE_MAX: Final = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerActivityConfig:
    """Limits of the v2 consumer RPCs (all times in ms).

    ``default_invisible_time_ms``: what an auto-renew receive pops with (no validation, as the proxy);
    ``min_invisible_time_ms_for_recv`` .. ``max_invisible_time_ms``: the legal invisible duration of a receive
    (ChangeInvisibleDuration allows 0 .. max), else ILLEGAL_INVISIBLE_TIME 40011;
    ``long_polling_timeout_min_ms`` / ``_max_ms``: the clamp of a receive's poll time; a remaining deadline under the
    minimum is ILLEGAL_POLLING_TIME 40018; ``request_timeout_ms``: the client's request timeout assumed when a
    receive names no poll time (poll = remaining - request_timeout / 2, as the proxy); ``poll_reserve_ms``: kept
    between the end of the poll and the client's deadline so the answer arrives in time; ``receive_batch_size_max``
    / ``pull_batch_size_max``: batches are clamped to these (the broker's pop cap is 32);
    ``broker_timeout_ms``: each broker call besides the poll; ``group_config_ttl_ms`` / ``max_cached_groups``: the
    cache of subscription group configs (dead-letter decisions, FIFO assignments);
    ``forward_hold_ms``: how long a message being forwarded to the DLQ is kept invisible (it comes back if the
    forward fails half-way).
    """

    default_invisible_time_ms: int = DEFAULT_INVISIBLE_TIME_MS
    min_invisible_time_ms_for_recv: int = MIN_INVISIBLE_TIME_MS_FOR_RECV
    max_invisible_time_ms: int = MAX_INVISIBLE_TIME_MS
    long_polling_timeout_min_ms: int = LONG_POLLING_TIMEOUT_MIN_MS
    long_polling_timeout_max_ms: int = LONG_POLLING_TIMEOUT_MAX_MS
    request_timeout_ms: int = 3_000
    poll_reserve_ms: int = 500
    receive_batch_size_max: int = RECEIVE_BATCH_SIZE_MAX
    pull_batch_size_max: int = PULL_BATCH_SIZE_MAX
    broker_timeout_ms: int = 3_000
    group_config_ttl_ms: int = 30_000
    max_cached_groups: int = 10_000
    forward_hold_ms: int = 30_000

    def __post_init__(self) -> None:
        if not 0 <= self.min_invisible_time_ms_for_recv <= self.max_invisible_time_ms:
            raise ValueError("min_invisible_time_ms_for_recv must be within 0 .. max_invisible_time_ms")
        if not 0 < self.long_polling_timeout_min_ms <= self.long_polling_timeout_max_ms:
            raise ValueError("long polling bounds must satisfy 0 < min <= max")
        if min(self.receive_batch_size_max, self.pull_batch_size_max, self.broker_timeout_ms) <= 0:
            raise ValueError("batch sizes and broker_timeout_ms must be positive")
        if min(self.group_config_ttl_ms, self.max_cached_groups, self.forward_hold_ms) <= 0:
            raise ValueError("group_config_ttl_ms, max_cached_groups and forward_hold_ms must be positive")
        if self.poll_reserve_ms < 0 or self.poll_reserve_ms >= self.long_polling_timeout_min_ms:
            raise ValueError("poll_reserve_ms must be within 0 .. long_polling_timeout_min_ms")
