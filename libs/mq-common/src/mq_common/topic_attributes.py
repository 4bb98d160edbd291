"""Topic attributes: the ``-a`` modification syntax and how a modification alters a topic's stored attributes.

A modification is what ``mqadmin updateTopic -a`` takes and what CreateTopic/UpdateTopic carry in
``TopicConfig.attributes``: ``+key=value`` adds or changes, ``-key`` deletes, several joined by ``,``
(``+message.type=DELAY,-foo``); as a map, ``{"+message.type": "DELAY", "-foo": ""}``. The broker stores the
result under the plain keys (``{"message.type": "DELAY"}``). Known attributes: ``message.type`` (changeable; one
of mq_common.message_type.TopicMessageType). Errors are ValueError with RocketMQ's remark (callers answer
INVALID_PARAMETER 29). Pure functions; any thread.

Mirrors org.apache.rocketmq.common.attribute.AttributeParser (#parseToMap, #parseToString),
org.apache.rocketmq.common.attribute.AttributeUtil#alterCurrentAttributes, EnumAttribute and
org.apache.rocketmq.common.TopicAttributes (of its attributes only ``message.type``: ``queue.type`` BatchCQ,
``cleanup.policy`` COMPACTION and ``reserve.time`` tiered storage are not built here, so they are refused as
unsupported keys rather than stored without effect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mq_common.message_type import MESSAGE_TYPE_ATTRIBUTE, TopicMessageType

ADD_SIGN: Final = "+"
DELETE_SIGN: Final = "-"
SEPARATOR: Final = ","
EQUAL_SIGN: Final = "="


@dataclass(frozen=True, slots=True)
class EnumAttribute:
    """An attribute whose value is one of ``universe``. Mirrors org.apache.rocketmq.common.attribute.EnumAttribute."""

    name: str
    changeable: bool
    universe: tuple[str, ...]
    default_value: str

    def verify(self, value: str) -> None:
        """Raises ValueError("value is not in set: [...]") for a value outside ``universe``."""
        if value not in self.universe:
            raise ValueError(f"value is not in set: [{', '.join(self.universe)}]")


TOPIC_MESSAGE_TYPE_ATTRIBUTE: Final = EnumAttribute(
    MESSAGE_TYPE_ATTRIBUTE, True, tuple(t.value for t in TopicMessageType), TopicMessageType.NORMAL.value
)
TOPIC_ATTRIBUTES: Final[Mapping[str, EnumAttribute]] = {TOPIC_MESSAGE_TYPE_ATTRIBUTE.name: TOPIC_MESSAGE_TYPE_ATTRIBUTE}
"""TopicAttributes.ALL (the attributes built here)."""


def parse_attributes(text: str) -> dict[str, str]:
    """``"+a=b,-c"`` -> ``{"+a": "b", "-c": ""}``; '' -> {}. Raises ValueError with AttributeParser's remarks: a
    ``key=value`` whose key does not start with ``+`` (or without a value), a ``key`` without ``=`` that does not
    start with ``-``, a key given twice. Mirrors AttributeParser#parseToMap."""
    attributes: dict[str, str] = {}
    if not text:
        return attributes
    for kv in text.split(SEPARATOR):
        if EQUAL_SIGN in kv:
            key, _, value = kv.partition(EQUAL_SIGN)
            if not key.startswith(ADD_SIGN) or not value or EQUAL_SIGN in value:
                raise ValueError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if not key.startswith(DELETE_SIGN):
                raise ValueError(f"delete attribute format is wrong: {key}")
        if key in attributes:
            raise ValueError(f"key duplication: {key}")
        attributes[key] = value
    return attributes


def attributes_to_string(attributes: Mapping[str, str]) -> str:
    """The inverse of :func:`parse_attributes` (``key=value`` or ``key`` alone for an empty value, sorted by key).
    Mirrors AttributeParser#parseToString."""
    return SEPARATOR.join(k if not v else f"{k}{EQUAL_SIGN}{v}" for k, v in sorted(attributes.items()))


def _real_key(key: str) -> str:
    real = key[1:]
    if not real or ADD_SIGN in real or DELETE_SIGN in real:
        raise ValueError("kv string format wrong.")
    return real


def alter_attributes(
    create: bool,
    current: Mapping[str, str],
    modification: Mapping[str, str],
    known: Mapping[str, EnumAttribute] = TOPIC_ATTRIBUTES,
) -> dict[str, str]:
    """The stored attributes after applying ``modification`` (``{"+key": value, "-key": ""}``) to ``current``
    (plain keys). ``create``: the topic is new, so only ``+`` keys are allowed. Raises ValueError with
    AttributeUtil's remarks: a malformed key ("kv string format wrong."), a key twice, a ``-`` key on create or of
    an absent attribute, a key without a sign, an unknown attribute ("unsupported key: k"), a change of an
    unchangeable one, a value outside the attribute's set ("value is not in set: [...]").
    Mirrors AttributeUtil#alterCurrentAttributes."""
    seen: set[str] = set()
    put: dict[str, str] = {}
    delete: list[str] = []
    for key, value in modification.items():
        if not key.startswith((ADD_SIGN, DELETE_SIGN)):  # RocketMQ names key[1:] here; the whole key is clearer
            raise ValueError(
                f"only add attribute is supported while creating topic. key: {key}"
                if create
                else f"wrong format key: {key}"
            )
        real = _real_key(key)
        if real in seen:
            raise ValueError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith(ADD_SIGN):
                raise ValueError(f"only add attribute is supported while creating topic. key: {real}")
            put[real] = value
        elif key.startswith(ADD_SIGN):
            put[real] = value
        else:
            if real not in current:
                raise ValueError(f"attempt to delete a nonexistent key: {real}")
            delete.append(real)
    for real in [*put, *delete]:
        attribute = known.get(real)
        if attribute is None:
            raise ValueError(f"unsupported key: {real}")
        if not create and not attribute.changeable:
            raise ValueError(f"attempt to update an unchangeable attribute. key: {real}")
        if real in put:
            attribute.verify(put[real])
    final = dict(current)
    final.update(put)
    for real in delete:
        final.pop(real, None)
    return final
