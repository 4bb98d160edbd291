"""mq_common.message_type (TopicMessageType#parseFromMessageProperty, the proxy's validator and remark, RouteActivity's
accepted types), mq_common.topic_attributes (AttributeParser / AttributeUtil with RocketMQ's remarks) and the route's
message type (QueueData.message_type, proto round trip)."""

from __future__ import annotations

import re

import pytest
from mq_common.constants import MessageConst
from mq_common.message_type import (
    TopicMessageType,
    accepted_message_types,
    accepts,
    check_message_type,
    is_type_checked_topic,
    message_type_of,
    parse_topic_message_type,
    topic_message_type,
)
from mq_common.protocol import BrokerData, QueueData, TopicConfig, TopicRouteData
from mq_common.protocol.convert import route_from_proto, route_to_proto
from mq_common.topic_attributes import alter_attributes, attributes_to_string, parse_attributes

T = TopicMessageType


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, T.NORMAL),
        ({"TAGS": "a"}, T.NORMAL),
        ({MessageConst.SHARDING_KEY: "g"}, T.FIFO),
        ({MessageConst.DELAY_TIME_LEVEL: "3"}, T.DELAY),
        ({MessageConst.TIMER_DELIVER_MS: "1"}, T.DELAY),
        ({MessageConst.TIMER_DELAY_SEC: "1"}, T.DELAY),
        ({MessageConst.TIMER_DELAY_MS: "1"}, T.DELAY),
        ({MessageConst.TRANSACTION_PREPARED: "true"}, T.TRANSACTION),
        ({MessageConst.TRANSACTION_PREPARED: "false"}, T.NORMAL),
        # RocketMQ's precedence: transaction, then delay, then FIFO
        ({MessageConst.TRANSACTION_PREPARED: "true", MessageConst.DELAY_TIME_LEVEL: "1"}, T.TRANSACTION),
        ({MessageConst.SHARDING_KEY: "g", MessageConst.TIMER_DELAY_SEC: "1"}, T.DELAY),
    ],
)
def test_message_type_of_follows_parse_from_message_property(properties: dict[str, str], expected: T) -> None:
    assert message_type_of(properties) is expected


def test_topic_type_from_attributes() -> None:
    assert topic_message_type({}) is T.NORMAL
    assert topic_message_type({"message.type": "DELAY"}) is T.DELAY
    assert topic_message_type({"message.type": "MIXED", "other": "x"}) is T.MIXED
    assert parse_topic_message_type("") is T.NORMAL
    assert parse_topic_message_type("bogus") is T.UNSPECIFIED
    assert T.DELAY.metrics_value == "delay"


def test_accepts_and_accepted_types() -> None:
    assert accepted_message_types(T.MIXED) == (T.NORMAL, T.FIFO, T.DELAY, T.TRANSACTION)
    assert accepted_message_types(T.DELAY) == (T.DELAY,)
    assert accepted_message_types(T.UNSPECIFIED) == (T.UNSPECIFIED,)
    for message in (T.NORMAL, T.FIFO, T.DELAY, T.TRANSACTION):
        assert accepts(T.MIXED, message)
        assert accepts(message, message)
        assert not accepts(T.UNSPECIFIED, message)
    assert not accepts(T.NORMAL, T.FIFO)
    assert not accepts(T.MIXED, T.UNSPECIFIED)


def test_check_message_type_remark_and_unchecked_topics() -> None:
    delay = {MessageConst.DELAY_TIME_LEVEL: "2"}
    assert check_message_type("T", T.NORMAL, delay) == (
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is DELAY"
    )
    assert check_message_type("T", T.DELAY, delay) is None
    assert check_message_type("T", T.MIXED, delay) is None
    for topic in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "%RETRY%g", "%DLQ%g"):
        assert not is_type_checked_topic(topic)
        assert check_message_type(topic, T.FIFO, delay) is None
    assert is_type_checked_topic("rmq_sys_other")


def test_parse_attributes_as_attribute_parser() -> None:
    assert parse_attributes("") == {}
    assert parse_attributes("+message.type=DELAY,-foo") == {"+message.type": "DELAY", "-foo": ""}
    assert attributes_to_string({"-foo": "", "+message.type": "DELAY"}) == "+message.type=DELAY,-foo"
    for bad, remark in (
        ("message.type=DELAY", "add/alter attribute format is wrong: message.type"),
        ("+message.type=", "add/alter attribute format is wrong: +message.type"),
        ("foo", "delete attribute format is wrong: foo"),
        ("-a,-a", "key duplication: -a"),
    ):
        with pytest.raises(ValueError, match=re.escape(remark)):
            parse_attributes(bad)


def test_alter_attributes_as_attribute_util() -> None:
    assert alter_attributes(True, {}, {"+message.type": "FIFO"}) == {"message.type": "FIFO"}
    assert alter_attributes(False, {"message.type": "FIFO"}, {}) == {"message.type": "FIFO"}
    assert alter_attributes(False, {"message.type": "FIFO"}, {"+message.type": "MIXED"}) == {"message.type": "MIXED"}
    assert alter_attributes(False, {"message.type": "FIFO"}, {"-message.type": ""}) == {}
    values = "[UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED]"
    for create, current, modification, remark in (
        (True, {}, {"-message.type": ""}, "only add attribute is supported while creating topic. key: message.type"),
        (True, {}, {"message.type": "X"}, "only add attribute is supported while creating topic. key: message.type"),
        (False, {}, {"message.type": "X"}, "wrong format key: message.type"),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key: message.type"),
        (False, {}, {"+message.type": "delay"}, f"value is not in set: {values}"),
        (True, {}, {"+queue.type": "BatchCQ"}, "unsupported key: queue.type"),
        (True, {}, {"+": "x"}, "kv string format wrong."),
        (True, {}, {"+a-b": "x"}, "kv string format wrong."),
        (False, {"message.type": "FIFO"}, {"+message.type": "X", "-message.type": ""}, "alter duplication key"),
    ):
        with pytest.raises(ValueError, match=re.escape(remark)):
            alter_attributes(create, current, modification)


def test_the_route_carries_each_broker_groups_type() -> None:
    a = QueueData.of("broker-a", TopicConfig("T", 2, 2, attributes={"message.type": "DELAY"}))
    b = QueueData.of("broker-b", TopicConfig("T", 2, 2))
    assert (a.message_type, b.message_type) == ("DELAY", "")
    assert (a.topic_message_type, b.topic_message_type) == (T.DELAY, T.NORMAL)
    route = TopicRouteData((b, a), (BrokerData("c", "broker-a", {0: "h:1"}), BrokerData("c", "broker-b", {0: "h:2"})))
    assert route.topic_message_type() is T.DELAY  # the first broker group by name
    assert route_from_proto(route_to_proto(route)) == route
    assert TopicRouteData((), ()).topic_message_type() is T.NORMAL
