"""Admin requests of the broker: create/update a topic, per-queue offsets of a topic.

A create/update request's ``attributes`` are a modification (``{"+message.type": "DELAY", "-key": ""}``,
mq_common.topic_attributes) applied to the topic's stored attributes, which keep the plain keys
(``{"message.type": "DELAY"}``): an update without attributes keeps the topic's type.
Mirrors org.apache.rocketmq.broker.processor.AdminBrokerProcessor (#updateAndCreateTopic,
#getTopicStatsInfo) and TopicConfigManager#updateSingleTopicConfigWithoutPersist (the attribute alteration).
Runs on the event loop; failures raise mq_common.errors types (code + RocketMQ remark).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from mq_common.errors import InvalidParameterError, TopicNotExistError
from mq_common.message_type import MESSAGE_TYPE_ATTRIBUTE, TopicMessageType
from mq_common.protocol import TopicConfig, TopicQueueOffset
from mq_common.topic_attributes import ADD_SIGN, alter_attributes

from mq_broker.store.api import MessageStore
from mq_broker.topic_config import TopicConfigManager, check_topic_config

MIXED_NOT_SUPPORTED_REMARK: Final = "MIXED message type is not supported."


class AdminBrokerProcessor:
    """Topic administration over the topic table and the store. ``enable_mixed_message_type``: whether a topic may
    be declared MIXED (BrokerConfig.enableMixedMessageType, false in RocketMQ; true by default here, where a MIXED
    topic is the way to send every type to one topic)."""

    def __init__(
        self,
        store: MessageStore,
        topic_config_manager: TopicConfigManager,
        broker_name: str,
        *,
        enable_mixed_message_type: bool = True,
    ) -> None:
        self.store = store
        self.topics = topic_config_manager
        self.broker_name = broker_name
        self.enable_mixed_message_type = enable_mixed_message_type

    def create_topic(self, config: TopicConfig) -> bool:
        """Create or replace ``config`` (idempotent); its ``attributes`` alter the stored ones (module docstring).
        Returns False when nothing changed.

        Raises InvalidParameterError (29) for an illegal name, queue count or perm, a system topic name, an
        attribute modification RocketMQ refuses (its AttributeParser/AttributeUtil remark: "unsupported key: k",
        "value is not in set: [...]", "attempt to delete a nonexistent key: k", ...; RocketMQ's broker answers
        those SYSTEM_ERROR, its catch-all, but the request is at fault), or "+message.type=MIXED" when MIXED is
        disabled ("MIXED message type is not supported.").
        """
        remark = check_topic_config(config)
        if remark is not None:
            raise InvalidParameterError(remark)
        if self.topics.is_system_topic(config.topic_name):
            raise InvalidParameterError(f"The topic[{config.topic_name}] is conflict with system topic.")
        mixed = config.attributes.get(ADD_SIGN + MESSAGE_TYPE_ATTRIBUTE) == TopicMessageType.MIXED.value
        if mixed and not self.enable_mixed_message_type:
            raise InvalidParameterError(MIXED_NOT_SUPPORTED_REMARK)
        current = self.topics.select_topic_config(config.topic_name)
        try:
            attributes = alter_attributes(
                current is None, {} if current is None else current.attributes, config.attributes
            )
        except ValueError as exc:
            raise InvalidParameterError(str(exc)) from None
        return self.topics.update_topic_config(replace(config, attributes=attributes))

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
