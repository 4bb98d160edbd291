"""Message, topic, group and property checks done before a send. Mirrors org.apache.rocketmq.client.Validators.

Pure functions; safe from any thread. Every refusal raises
:class:`mq_common.errors.MessageIllegalError` (MESSAGE_ILLEGAL, 13) with RocketMQ's remark, except the
producer group check, which raises :class:`mq_common.errors.MQClientError` (a configuration error).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Final

from mq_common.constants import MessageConst, MixAll, is_client_forbidden_send_topic, validate_topic
from mq_common.errors import MessageIllegalError, MQClientError

from mq_client.producer.message import Message

CHARACTER_MAX_LENGTH: Final = 255
_VALID_NAME: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")
# The property string codec's separators (name \x01 value \x02): a name or value holding one would be
# decoded into other properties by the broker and every consumer.
_NAME_VALUE_SEPARATOR: Final = "\x01"
_PROPERTY_SEPARATOR: Final = "\x02"


def check_group(group: str) -> None:
    """Validators#checkGroup plus DefaultMQProducerImpl#checkConfig's DEFAULT_PRODUCER rule.

    Raises MQClientError: blank, longer than 255, illegal characters, or equal to ``DEFAULT_PRODUCER``.
    """
    if not group or group.isspace():
        raise MQClientError("the specified group is blank")
    if len(group) > CHARACTER_MAX_LENGTH:
        raise MQClientError("the specified group is longer than group max length 255.")
    if _VALID_NAME.fullmatch(group) is None:
        raise MQClientError(
            f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if group == MixAll.DEFAULT_PRODUCER_GROUP:
        raise MQClientError(f"producerGroup can not equal {MixAll.DEFAULT_PRODUCER_GROUP}, please specify another one.")


def check_topic(topic: str) -> None:
    """Validators#checkTopic + #isNotAllowedSendTopic, and no TBW102, %RETRY% or %DLQ% topic
    (mq_common.constants.is_client_forbidden_send_topic). Raises MessageIllegalError (13)."""
    remark = _topic_refusal(topic)
    if remark is not None:
        raise MessageIllegalError(remark)


@functools.lru_cache(maxsize=4096)
def _topic_refusal(topic: str) -> str | None:
    """The refusal remark of ``topic`` or None; cached: a producer sends to the same few topics over and over."""
    remark = validate_topic(topic)
    if remark is None and is_client_forbidden_send_topic(topic):
        remark = f"Sending message to topic[{topic}] is forbidden."
    return remark


def check_message(msg: Message | None, max_message_size_bytes: int) -> None:
    """Validators#checkMessage: topic, then body null / empty / over ``max_message_size_bytes``, then the
    property separators. Raises MessageIllegalError (13) with RocketMQ's remarks:
    "the message is null", "the message body is null", "the message body length is zero",
    "the message body size over max value, MAX: 4194304".
    """
    if msg is None:
        raise MessageIllegalError("the message is null")
    check_topic(msg.topic)
    if msg.body is None:
        raise MessageIllegalError("the message body is null")
    if len(msg.body) == 0:
        raise MessageIllegalError("the message body length is zero")
    if len(msg.body) > max_message_size_bytes:
        raise MessageIllegalError(f"the message body size over max value, MAX: {max_message_size_bytes}")
    if msg.tags:
        _check_separators("tags", msg.tags)
    if msg.sharding_key:
        _check_separators("sharding key", msg.sharding_key)
    for key in msg.keys:
        _check_separators("key", key)
    if msg.properties:
        for name, value in msg.properties.items():
            _check_separators("property name", name)
            _check_separators(f"value of property {name}", value)


def check_user_properties(properties: Mapping[str, str]) -> None:
    """Refuse user properties that use a name reserved by RocketMQ (MessageConst's system properties).

    Mirrors the 5.x proxy's SendMessageActivity#buildMessageProperty. Raises MessageIllegalError (13):
    "property is used by system: KEYS".
    """
    for name in properties:
        if name in MessageConst.RESERVED:
            raise MessageIllegalError(f"property is used by system: {name}")
        if not name:
            raise MessageIllegalError("property name is empty")


def _check_separators(what: str, text: str) -> None:
    if _NAME_VALUE_SEPARATOR in text or _PROPERTY_SEPARATOR in text:
        raise MessageIllegalError(f"the message {what} contains a control character \\x01 or \\x02")
