"""Topic message types: what a topic accepts (its ``message.type`` attribute) and what a message is (its
properties). One definition, used by the broker's send check, the gateway's v2 SendMessage and QueryRoute, and the
name server's route. Pure functions; any thread.

Mirrors org.apache.rocketmq.common.attribute.TopicMessageType (#parseFromMessageProperty),
org.apache.rocketmq.common.TopicConfig#getTopicMessageType,
org.apache.rocketmq.proxy.processor.validator.DefaultTopicMessageTypeValidator and
org.apache.rocketmq.proxy.grpc.v2.route.RouteActivity#parseTopicMessageType.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from mq_common.constants import SCHEDULE_TOPIC, TIMER_TOPIC, MessageConst, MixAll

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
"""TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE's name (changeable; absent means NORMAL)."""


class TopicMessageType(StrEnum):
    """A topic's message type, or a message's. Mirrors org.apache.rocketmq.common.attribute.TopicMessageType.

    UNSPECIFIED is in RocketMQ's value set too: a topic declared UNSPECIFIED accepts no message (the proxy's
    validator refuses every type against it); a message is never UNSPECIFIED.
    """

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"

    @property
    def metrics_value(self) -> str:
        """TopicMessageType#getMetricsValue: the lower-case name (``normal``, ``fifo``, ...)."""
        return self.value.lower()


_BY_VALUE: Final[Mapping[str, TopicMessageType]] = {t.value: t for t in TopicMessageType}
_CONCRETE: Final = (
    TopicMessageType.NORMAL,
    TopicMessageType.FIFO,
    TopicMessageType.DELAY,
    TopicMessageType.TRANSACTION,
)
_DELAY_PROPERTIES: Final = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
    MessageConst.TIMER_OUT_MS,  # the due time a delivered timer keeps (clients may not set it: the broker refuses)
)
UNCHECKED_TOPICS: Final = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})
"""Topics whose sends are never type-checked (besides every %RETRY% / %DLQ% topic): the broker's own re-puts."""


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """The type of a message with these properties: TRAN_MSG "true" -> TRANSACTION; a delay level (DELAY) or a
    timer (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, or TIMER_OUT_MS on a delivered one) -> DELAY; a
    sharding key (__SHARDINGKEY) -> FIFO; else NORMAL. Mirrors TopicMessageType#parseFromMessageProperty (same
    precedence)."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if any(name in properties for name in _DELAY_PROPERTIES):
        return TopicMessageType.DELAY
    if MessageConst.SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def parse_topic_message_type(value: str) -> TopicMessageType:
    """The type named by a ``message.type`` value: '' -> NORMAL (the attribute's default), a known name -> that
    type, anything else -> UNSPECIFIED (accepts nothing; the broker refuses such a value when it is set, so only a
    route from a foreign broker can carry one)."""
    if not value:
        return TopicMessageType.NORMAL
    return _BY_VALUE.get(value, TopicMessageType.UNSPECIFIED)


def topic_message_type(attributes: Mapping[str, str]) -> TopicMessageType:
    """A topic's type from its stored attributes (``{"message.type": "DELAY"}``); NORMAL without the attribute.
    Mirrors TopicConfig#getTopicMessageType (which throws for an unknown value; UNSPECIFIED here)."""
    return parse_topic_message_type(attributes.get(MESSAGE_TYPE_ATTRIBUTE, ""))


def accepted_message_types(topic_type: TopicMessageType) -> tuple[TopicMessageType, ...]:
    """What a topic of ``topic_type`` accepts: MIXED -> (NORMAL, FIFO, DELAY, TRANSACTION), a concrete type ->
    itself, UNSPECIFIED -> (UNSPECIFIED,) (nothing real). Mirrors RouteActivity#parseTopicMessageType (v2
    QueryRoute's ``accept_message_types``)."""
    if topic_type is TopicMessageType.MIXED:
        return _CONCRETE
    return (topic_type,)


def accepts(topic_type: TopicMessageType, message_type: TopicMessageType) -> bool:
    """Whether a topic of ``topic_type`` takes a message of ``message_type``: equal types, or a MIXED topic (never
    an UNSPECIFIED message). Mirrors DefaultTopicMessageTypeValidator#validate."""
    if message_type is TopicMessageType.UNSPECIFIED:
        return False
    return topic_type is TopicMessageType.MIXED or topic_type is message_type


def mismatch_remark(topic_type: TopicMessageType, message_type: TopicMessageType) -> str:
    """The proxy's remark for a refused message (DefaultTopicMessageTypeValidator's ``errorInfo``)."""
    return (
        f"TopicMessageType validate failed, the expected type is {topic_type.value}, "
        f"but actual type is {message_type.value}"
    )


def is_type_checked_topic(topic: str) -> bool:
    """False for the topics a send is never type-checked on: SCHEDULE_TOPIC_XXXX, rmq_sys_wheel_timer and every
    %RETRY% / %DLQ% topic (ProducerProcessor#sendMessage skips retry and DLQ topics; the schedule and timer topics
    take the broker's own re-puts)."""
    if topic in UNCHECKED_TOPICS:
        return False
    return not topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX))


def check_message_type(topic: str, topic_type: TopicMessageType, properties: Mapping[str, str]) -> str | None:
    """The proxy's remark when a message with ``properties`` may not go to ``topic`` of ``topic_type``, else None
    (always None for the unchecked topics of :func:`is_type_checked_topic`). Callers raise their own code with it
    (v2 MESSAGE_PROPERTY_CONFLICT_WITH_TYPE 40014; the broker MESSAGE_ILLEGAL 13)."""
    if not is_type_checked_topic(topic):
        return None
    message_type = message_type_of(properties)
    if accepts(topic_type, message_type):
        return None
    return mismatch_remark(topic_type, message_type)
