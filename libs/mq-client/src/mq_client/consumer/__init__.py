"""Consumers: the minimal :class:`PullConsumer` (caller-held offsets) and its building blocks.

Mirrors org.apache.rocketmq.client.consumer (DefaultMQPullConsumer, DefaultLitePullConsumer, rebalance
strategies, offset stores). No module of this package touches protobuf: broker calls go through
mq_client.broker_client and mq_client.consumer_calls.
"""

from mq_client.consumer.allocate import allocate_message_queue_averagely
from mq_client.consumer.pull_consumer import (
    DEFAULT_CONSUMER_GROUP,
    DEFAULT_PULL_TIMEOUT_MS,
    MAX_PULL_NUMS,
    SUB_ALL,
    PullConsumer,
    filter_by_tags,
    parse_subscription,
)

__all__ = [
    "DEFAULT_CONSUMER_GROUP",
    "DEFAULT_PULL_TIMEOUT_MS",
    "MAX_PULL_NUMS",
    "SUB_ALL",
    "PullConsumer",
    "allocate_message_queue_averagely",
    "filter_by_tags",
    "parse_subscription",
]
