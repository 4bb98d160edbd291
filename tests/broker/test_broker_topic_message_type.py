"""The broker's topic message types: CreateTopic/UpdateTopic attribute modifications (AdminBrokerProcessor over a
real TopicConfigManager: stored under plain keys, kept by an update without attributes, persisted, refused with
INVALID_PARAMETER and RocketMQ's remarks, MIXED switchable) and the send check (check_message_type: MESSAGE_ILLEGAL
13 with the proxy's remark for a topic that declares another type; undeclared and system topics take all)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from mq_broker.admin_processor import AdminBrokerProcessor
from mq_broker.store.api import MessageStore
from mq_broker.topic_config import TopicConfigManager
from mq_broker.topic_message_type import check_message_type
from mq_common.constants import MessageConst
from mq_common.errors import InvalidParameterError, MQBrokerError
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode


def admin(path: Path, *, mixed: bool = True) -> AdminBrokerProcessor:
    topics = TopicConfigManager(
        path,
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        auto_create_topic_enable=False,
        default_topic_queue_nums=4,
    )
    return AdminBrokerProcessor(cast(MessageStore, None), topics, "broker-a", enable_mixed_message_type=mixed)


def stored(processor: AdminBrokerProcessor, topic: str) -> dict[str, str]:
    config = processor.topics.select_topic_config(topic)
    assert config is not None
    return dict(config.attributes)


def test_modifications_alter_the_stored_attributes(tmp_path: Path) -> None:
    processor = admin(tmp_path / "topics.json")
    assert processor.create_topic(TopicConfig("T", 2, 2, attributes={"+message.type": "DELAY"}))
    assert stored(processor, "T") == {"message.type": "DELAY"}
    assert not processor.update_topic(TopicConfig("T", 2, 2)), "no attributes: nothing changes"
    assert processor.update_topic(TopicConfig("T", 4, 4))
    assert stored(processor, "T") == {"message.type": "DELAY"}
    processor.update_topic(TopicConfig("T", 4, 4, attributes={"+message.type": "FIFO"}))
    assert stored(processor, "T") == {"message.type": "FIFO"}
    processor.topics.persist()
    table = json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]
    assert table["T"]["attributes"] == {"message.type": "FIFO"}
    processor.update_topic(TopicConfig("T", 4, 4, attributes={"-message.type": ""}))
    assert stored(processor, "T") == {}


@pytest.mark.parametrize(
    ("attributes", "remark"),
    [
        ({"+message.type": "BOGUS"}, "value is not in set: [UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED]"),
        ({"+cleanup.policy": "COMPACTION"}, "unsupported key: cleanup.policy"),
        ({"-message.type": ""}, "attempt to delete a nonexistent key: message.type"),
        ({"message.type": "DELAY"}, "wrong format key: message.type"),
    ],
)
def test_refused_modifications_change_nothing(tmp_path: Path, attributes: dict[str, str], remark: str) -> None:
    processor = admin(tmp_path / "topics.json")
    processor.create_topic(TopicConfig("T", 2, 2))
    version = processor.topics.data_version
    with pytest.raises(InvalidParameterError) as info:
        processor.update_topic(TopicConfig("T", 2, 2, attributes=attributes))
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert info.value.remark == remark
    assert stored(processor, "T") == {}
    assert processor.topics.data_version == version


def test_mixed_can_be_disabled_as_enable_mixed_message_type(tmp_path: Path) -> None:
    processor = admin(tmp_path / "topics.json", mixed=False)
    with pytest.raises(InvalidParameterError, match=r"MIXED message type is not supported\."):
        processor.create_topic(TopicConfig("T", 2, 2, attributes={"+message.type": "MIXED"}))
    assert processor.topics.select_topic_config("T") is None
    assert admin(tmp_path / "other.json").create_topic(TopicConfig("T", 2, 2, attributes={"+message.type": "MIXED"}))


FIFO = {MessageConst.SHARDING_KEY: "k"}
DELAY = {MessageConst.DELAY_TIME_LEVEL: "3"}
TIMER = {MessageConst.TIMER_DELIVER_MS: "1700000000000"}
TRANSACTION = {MessageConst.TRANSACTION_PREPARED: "true"}


def test_check_message_type_enforces_a_declared_type() -> None:
    delay_topic = TopicConfig("D", attributes={"message.type": "DELAY"})
    check_message_type(delay_topic, DELAY)
    check_message_type(delay_topic, TIMER)
    with pytest.raises(MQBrokerError) as info:
        check_message_type(delay_topic, {})
    assert info.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert not info.value.retriable
    assert (
        info.value.remark == "TopicMessageType validate failed, the expected type is DELAY, but actual type is NORMAL"
    )
    with pytest.raises(MQBrokerError, match="expected type is NORMAL, but actual type is FIFO"):
        check_message_type(TopicConfig("N", attributes={"message.type": "NORMAL"}), FIFO)
    with pytest.raises(MQBrokerError, match="expected type is FIFO, but actual type is TRANSACTION"):
        check_message_type(TopicConfig("F", attributes={"message.type": "FIFO"}), TRANSACTION)
    for props in ({}, FIFO, DELAY, TIMER, TRANSACTION):
        check_message_type(TopicConfig("M", attributes={"message.type": "MIXED"}), props)
        check_message_type(TopicConfig("U"), props)  # undeclared: every type, as RocketMQ's broker
    for system in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "%RETRY%g", "%DLQ%g"):
        check_message_type(TopicConfig(system, attributes={"message.type": "FIFO"}), DELAY)
