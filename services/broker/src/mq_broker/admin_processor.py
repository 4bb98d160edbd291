"""Admin requests of the broker: create/update a topic, per-queue offsets of a topic.

Mirrors org.apache.rocketmq.broker.processor.AdminBrokerProcessor (#updateAndCreateTopic,
#getTopicStatsInfo). Runs on the event loop; failures raise mq_common.errors types (code + RocketMQ remark).
"""

from __future__ import annotations

from mq_common.errors import InvalidParameterError, TopicNotExistError
from mq_common.protocol import TopicConfig, TopicQueueOffset

from mq_broker.store.api import MessageStore
from mq_broker.topic_config import TopicConfigManager, check_topic_config


class AdminBrokerProcessor:
    """Topic administration over the topic table and the store."""

    def __init__(self, store: MessageStore, topic_config_manager: TopicConfigManager, broker_name: str) -> None:
        self.store = store
        self.topics = topic_config_manager
        self.broker_name = broker_name

    def create_topic(self, config: TopicConfig) -> bool:
        """Create or replace ``config`` (idempotent); returns False when nothing changed.

        Raises InvalidParameterError (29) for an illegal name, queue count or perm, or a system topic name.
        """
        remark = check_topic_config(config)
        if remark is not None:
            raise InvalidParameterError(remark)
        if self.topics.is_system_topic(config.topic_name):
            raise InvalidParameterError(f"The topic[{config.topic_name}] is conflict with system topic.")
        return self.topics.update_topic_config(config)

    def update_topic(self, config: TopicConfig) -> bool:
        """Like :meth:`create_topic` for a known topic. Raises TopicNotExistError (17) for an unknown one."""
        if self.topics.select_topic_config(config.topic_name) is None:
            raise TopicNotExistError(f"topic[{config.topic_name}] not exist")
        return self.create_topic(config)

    def get_topic_stats(self, topic: str) -> list[TopicQueueOffset]:
        """Min/max offset and last store time of every write queue. Raises TopicNotExistError (17)."""
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        out: list[TopicQueueOffset] = []
        for queue_id in range(config.write_queue_nums):
            max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
            last_ms = self.store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            out.append(
                TopicQueueOffset(
                    self.broker_name,
                    queue_id,
                    self.store.get_min_offset_in_queue(topic, queue_id),
                    max_offset,
                    last_ms,
                )
            )
        return out
