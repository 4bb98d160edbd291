"""Validators: RocketMQ's remarks for topics, bodies, groups and properties (all MESSAGE_ILLEGAL, 13)."""

from __future__ import annotations

import pytest
from mq_client.producer.message import Message
from mq_client.producer.validators import check_group, check_message, check_topic, check_user_properties
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES
from mq_common.errors import MessageIllegalError, MQClientError
from mq_common.response_code import ResponseCode


def test_valid_message_passes() -> None:
    check_message(Message("TopicTest", b"x", tags="TagA", keys=("k1",), properties={"a": "b"}), 4 * 1024 * 1024)


@pytest.mark.parametrize(
    ("body", "remark"),
    [
        (None, "the message body is null"),
        (b"", "the message body length is zero"),
        (b"x" * (MAX_MESSAGE_SIZE_BYTES + 1), "the message body size over max value, MAX: 4194304"),
    ],
)
def test_body_remarks(body: bytes | None, remark: str) -> None:
    with pytest.raises(MessageIllegalError) as info:
        check_message(Message("TopicTest", body), MAX_MESSAGE_SIZE_BYTES)
    assert info.value.remark == remark
    assert info.value.code == ResponseCode.MESSAGE_ILLEGAL


def test_body_exactly_max_is_allowed() -> None:
    check_message(Message("T", b"x" * 10), 10)
    with pytest.raises(MessageIllegalError, match="MAX: 10"):
        check_message(Message("T", b"x" * 11), 10)


def test_null_message() -> None:
    with pytest.raises(MessageIllegalError) as info:
        check_message(None, 10)
    assert info.value.remark == "the message is null"


@pytest.mark.parametrize(
    ("topic", "fragment"),
    [
        ("", "The specified topic is blank."),
        ("a b", "contains illegal characters"),
        ("x" * 128, "is longer than topic max length: 127"),
        ("SCHEDULE_TOPIC_XXXX", "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
        ("RMQ_SYS_TRANS_HALF_TOPIC", "is forbidden."),
    ],
)
def test_topic_remarks(topic: str, fragment: str) -> None:
    with pytest.raises(MessageIllegalError) as info:
        check_topic(topic)
    assert fragment in info.value.remark
    with pytest.raises(MessageIllegalError):
        check_message(Message(topic, b"x"), 10)


def test_topic_127_chars_is_allowed() -> None:
    check_topic("x" * 127)


def test_topic_is_checked_before_body() -> None:
    with pytest.raises(MessageIllegalError, match="topic is blank"):
        check_message(Message("", None), 10)


@pytest.mark.parametrize(
    "msg",
    [
        Message("T", b"x", tags="a\x01b"),
        Message("T", b"x", keys=("ok", "k\x02")),
        Message("T", b"x", properties={"k\x01": "v"}),
        Message("T", b"x", properties={"k": "v\x02"}),
        Message("T", b"x", sharding_key="s\x01"),
    ],
)
def test_property_separators_are_refused(msg: Message) -> None:
    with pytest.raises(MessageIllegalError, match="control character"):
        check_message(msg, 10)


@pytest.mark.parametrize("name", ["UNIQ_KEY", "KEYS", "TAGS", "DELAY", "__SHARDINGKEY", "WAIT"])
def test_reserved_user_property_is_refused(name: str) -> None:
    with pytest.raises(MessageIllegalError) as info:
        check_user_properties({"fine": "1", name: "x"})
    assert info.value.remark == f"property is used by system: {name}"


def test_user_properties_ok() -> None:
    check_user_properties({"order": "42", "region": "eu"})


@pytest.mark.parametrize(
    ("group", "fragment"),
    [
        ("", "the specified group is blank"),
        ("g" * 256, "longer than group max length 255"),
        ("bad group", "contains illegal characters"),
        ("DEFAULT_PRODUCER", "producerGroup can not equal DEFAULT_PRODUCER"),
    ],
)
def test_group_remarks(group: str, fragment: str) -> None:
    with pytest.raises(MQClientError) as info:
        check_group(group)
    assert fragment in info.value.remark


def test_group_ok() -> None:
    check_group("please_rename_unique_group_name")
