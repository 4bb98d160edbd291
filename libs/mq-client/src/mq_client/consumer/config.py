"""Settings of the lite pull consumer, with RocketMQ's names and defaults. Mirrors
org.apache.rocketmq.client.consumer.DefaultLitePullConsumer's fields, ClientConfig's intervals and
org.apache.rocketmq.common.consumer.ConsumeFromWhere.

Pure values; any thread.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass
from enum import Enum
from typing import Final

from mq_common.errors import MQClientError
from mq_common.response_code import ResponseCode

__all__ = ["ConsumeFromWhere", "LitePullConsumerConfig", "build_client_id"]

PULL_THRESHOLD_FOR_QUEUE: Final = 1000
"""DefaultLitePullConsumer.pullThresholdForQueue: buffered messages of one queue before its pulls back off."""
PULL_THRESHOLD_FOR_ALL: Final = 10_000
"""DefaultLitePullConsumer.pullThresholdForAll: buffered messages of every queue before pulls back off."""
MAX_PULL_BATCH_SIZE: Final = 1024
"""MessageStoreConfig.maxTransferCountOnMessageInMemory: the most a broker answers in one pull."""
MIN_AUTO_COMMIT_INTERVAL_MS: Final = 1000
"""DefaultLitePullConsumer.MIN_AUTOCOMMIT_INTERVAL_MILLIS."""
CONSUME_TIMESTAMP_DEFAULT_AGE_MS: Final = 30 * 60 * 1000
"""DefaultLitePullConsumer.consumeTimestamp's default: half an hour before the consumer was made."""

_instance_index = itertools.count()


class ConsumeFromWhere(Enum):
    """Where a group with no committed offset on a queue starts. Mirrors ConsumeFromWhere (the three kept)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def build_client_id() -> str:
    """``host@pid#index#nanos``: ClientConfig#buildMQClientId with the instance name changed to the pid as
    #changeInstanceNameToPID does (``pid#nanoTime``), plus a per-process index so that two consumers of one
    process never share an id."""
    return f"{socket.gethostname()}@{os.getpid()}#{next(_instance_index)}#{time.monotonic_ns()}"


@dataclass(frozen=True, slots=True)
class LitePullConsumerConfig:
    """One lite pull consumer's settings (all times in ms).

    - ``pull_batch_size``: messages per pull (pullBatchSize); ``poll_timeout_ms``: poll()'s default wait
      (pollTimeoutMillis);
    - ``auto_commit`` / ``auto_commit_interval_ms``: poll() records what the previous polls returned as consumed
      every interval (autoCommit, autoCommitIntervalMillis) and the offsets go to the brokers every interval
      (ClientConfig.persistConsumerOffsetInterval);
    - ``heartbeat_interval_ms`` (heartbeatBrokerInterval), ``rebalance_interval_ms`` (the RebalanceService wait);
    - ``broker_suspend_max_time_ms``: how long a broker holds a pull that found nothing (brokerSuspendMaxTimeMillis);
      ``consumer_timeout_ms_when_suspend``: the deadline of such a pull (consumerTimeoutMillisWhenSuspend);
    - ``pull_threshold_for_queue`` / ``pull_threshold_for_all``: buffered messages before pulls back off;
    - ``consume_from_where`` / ``consume_timestamp_ms``: where a group with no offset starts;
    - ``pull_time_delay_ms_when_exception`` (pullTimeDelayMillsWhenException): pause of a queue's pulls after an error;
    - ``orderly``: own queues through broker-side locks (lockBatchMQ on allocation, renewed every rebalance,
      unlockBatchMQ when a queue is dropped and at close): a queue is pulled by one consumer of the group at a time,
      even while a rebalance moves it (what RocketMQ's orderly push consumer does, RebalanceImpl#lockAll).
    """

    consumer_group: str
    client_id: str
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int = 0
    pull_batch_size: int = 32
    poll_timeout_ms: int = 5000
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    heartbeat_interval_ms: int = 30_000
    rebalance_interval_ms: int = 20_000
    broker_suspend_max_time_ms: int = 15_000
    consumer_timeout_ms_when_suspend: int = 30_000
    pull_threshold_for_queue: int = PULL_THRESHOLD_FOR_QUEUE
    pull_threshold_for_all: int = PULL_THRESHOLD_FOR_ALL
    pull_time_delay_ms_when_exception: int = 1000
    orderly: bool = False

    def check(self) -> None:
        """Refuse inconsistent settings. Mirrors DefaultLitePullConsumerImpl#checkConfig.

        Raises MQClientError (INVALID_PARAMETER, 29) naming the setting."""
        problems = [
            (not self.consumer_group, "consumerGroup is blank"),
            (not 0 < self.pull_batch_size <= MAX_PULL_BATCH_SIZE, f"pullBatchSize out of [1, {MAX_PULL_BATCH_SIZE}]"),
            (self.auto_commit_interval_ms < MIN_AUTO_COMMIT_INTERVAL_MS, "autoCommitIntervalMillis below 1000"),
            (
                self.consumer_timeout_ms_when_suspend < self.broker_suspend_max_time_ms,
                "Long polling mode, the consumer consumerTimeoutMillisWhenSuspend must greater than "
                "brokerSuspendMaxTimeMillis",
            ),
            (min(self.heartbeat_interval_ms, self.rebalance_interval_ms) <= 0, "intervals must be positive"),
            (self.pull_threshold_for_queue <= 0 or self.pull_threshold_for_all <= 0, "pull thresholds must be > 0"),
        ]
        for failed, remark in problems:
            if failed:
                raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)
