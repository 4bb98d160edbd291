"""The broker's send-time check of a message's type against its topic's ``message.type`` attribute.

RocketMQ checks types in the proxy only (ProducerProcessor with DefaultTopicMessageTypeValidator); its broker has
no such check. Here the broker checks too (``enable_topic_message_type_check``), for topics that declare a type:
a client that talks to the broker without the v2 gateway (v1, Spark) cannot put a DELAY message on a topic declared
FIFO. A topic without the attribute takes every type at the broker, as RocketMQ's broker does (RocketMQ 4.x
clients' delay levels and sharding-key sends work on any topic); the v2 gateway holds such a topic to NORMAL, as
the proxy does. The answer is MESSAGE_ILLEGAL (13), the code the broker gives any message it refuses to store, with
the proxy's remark. SCHEDULE_TOPIC_XXXX, rmq_sys_wheel_timer, %RETRY% and %DLQ% topics are never checked. Pure;
event loop (any thread).
"""

from __future__ import annotations

from collections.abc import Mapping

from mq_common.errors import MQBrokerError
from mq_common.message_type import MESSAGE_TYPE_ATTRIBUTE, topic_message_type
from mq_common.message_type import check_message_type as _remark_of
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode


def check_message_type(config: TopicConfig, properties: Mapping[str, str]) -> None:
    """Raise MQBrokerError(MESSAGE_ILLEGAL 13, "TopicMessageType validate failed, the expected type is <topic
    type>, but actual type is <message type>") when a message with ``properties`` (its decoded property map) may
    not go to the topic of ``config``: the topic declares a type (``attributes["message.type"]``) other than MIXED
    and the message's (mq_common.message_type.message_type_of) differs. Returns None otherwise: always for a topic
    without the attribute and for the unchecked system topics. Mirrors DefaultTopicMessageTypeValidator#validate."""
    if MESSAGE_TYPE_ATTRIBUTE not in config.attributes:
        return
    remark = _remark_of(config.topic_name, topic_message_type(config.attributes), properties)
    if remark is not None:
        raise MQBrokerError(remark, ResponseCode.MESSAGE_ILLEGAL)
