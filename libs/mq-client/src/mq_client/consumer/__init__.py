"""Consumers: the minimal :class:`PullConsumer` (caller-held offsets) and :class:`LitePullConsumer` (group
offsets on the brokers, queues shared by rebalancing), with their building blocks.

Mirrors org.apache.rocketmq.client.consumer (DefaultMQPullConsumer, DefaultLitePullConsumer, rebalance
strategies, offset stores). No module of this package touches protobuf: broker calls go through
mq_client.broker_client and mq_client.consumer_calls.
"""

from mq_client.consumer.allocate import allocate_message_queue_averagely
from mq_client.consumer.config import ConsumeFromWhere, LitePullConsumerConfig
from mq_client.consumer.lite_pull_consumer import LitePullConsumer
from mq_client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
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
    "ConsumeFromWhere",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "PullConsumer",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "allocate_message_queue_averagely",
    "filter_by_tags",
    "parse_subscription",
]
