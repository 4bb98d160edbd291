"""SubscriptionGroupManager: system groups, auto-create on/off, validation, persistence in RocketMQ's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mq_broker.consumer.subscription_group import SYSTEM_GROUPS, SubscriptionGroupManager
from mq_common.errors import InvalidParameterError
from mq_common.protocol import DataVersion, SubscriptionGroupConfig


def manager(path: Path, *, auto_create: bool = True) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(path, auto_create_subscription_group=auto_create)


def test_defaults_are_rocketmqs() -> None:
    c = SubscriptionGroupConfig("G")
    assert (c.consume_enable, c.consume_from_min_enable, c.consume_broadcast_enable) == (True, True, True)
    assert (c.consume_message_orderly, c.retry_queue_nums, c.retry_max_times) == (False, 1, 16)
    assert (c.broker_id, c.which_broker_when_consume_slowly, c.notify_consumer_ids_changed_enable) == (0, 1, True)
    assert (c.group_sys_flag, c.consume_timeout_minute, dict(c.attributes)) == (0, 15, {})


def test_system_groups_exist_at_init(tmp_path: Path) -> None:
    groups = manager(tmp_path / "s.json", auto_create=False)
    names = {c.group_name for c in groups.configs()}
    assert set(SYSTEM_GROUPS) <= names
    assert {"TOOLS_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_RMQ_SYS_TRANS"} <= names


def test_auto_create_on_creates_with_defaults_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    groups = manager(path)
    before = groups.data_version
    assert groups.find_subscription_group_config("G1") == SubscriptionGroupConfig("G1")
    assert groups.data_version.counter == before.counter + 1
    assert groups.contains("G1")
    table = json.loads(path.read_text())["subscriptionGroupTable"]  # no loop: written at once
    assert table["G1"]["groupName"] == "G1"
    assert table["G1"]["retryMaxTimes"] == 16


def test_auto_create_off_or_bad_name_finds_nothing(tmp_path: Path) -> None:
    assert manager(tmp_path / "a.json", auto_create=False).find_subscription_group_config("G1") is None
    on = manager(tmp_path / "b.json")
    for bad in ["", "a b", "g/1", "x" * 121, "ü"]:
        assert on.find_subscription_group_config(bad) is None
        assert not on.contains(bad)


@pytest.mark.parametrize(
    "config",
    [
        SubscriptionGroupConfig(""),
        SubscriptionGroupConfig("bad name"),
        SubscriptionGroupConfig("G" * 121),
        SubscriptionGroupConfig("G", retry_queue_nums=-1),
        SubscriptionGroupConfig("G", retry_queue_nums=1025),
        SubscriptionGroupConfig("G", retry_max_times=-2),
        SubscriptionGroupConfig("G", broker_id=-1),
        SubscriptionGroupConfig("G", consume_timeout_minute=-1),
    ],
)
def test_update_refuses_bad_configs_with_invalid_parameter(tmp_path: Path, config: SubscriptionGroupConfig) -> None:
    groups = manager(tmp_path / "s.json")
    with pytest.raises(InvalidParameterError) as err:
        groups.update_subscription_group_config(config)
    assert err.value.code == 29
    assert not groups.contains(config.group_name)


def test_update_delete_and_reload_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    groups = manager(path)
    config = SubscriptionGroupConfig(
        "G2", consume_enable=False, retry_queue_nums=3, retry_max_times=5, attributes={"+k": "v"}
    )
    assert groups.update_subscription_group_config(config)
    assert not groups.update_subscription_group_config(config)  # unchanged
    assert groups.update_subscription_group_config(SubscriptionGroupConfig("G3"))
    assert groups.delete_subscription_group_config("G3")
    assert not groups.delete_subscription_group_config("G3")
    groups.persist()
    raw = json.loads(path.read_text())
    assert set(raw) == {"subscriptionGroupTable", "dataVersion"}
    assert raw["subscriptionGroupTable"]["G2"] == {
        "groupName": "G2",
        "consumeEnable": False,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "consumeMessageOrderly": False,
        "retryQueueNums": 3,
        "retryMaxTimes": 5,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "groupSysFlag": 0,
        "consumeTimeoutMinute": 15,
        "attributes": {"+k": "v"},
    }
    reloaded = manager(path, auto_create=False)
    reloaded.load()
    assert reloaded.configs() == groups.configs()
    assert reloaded.data_version == groups.data_version
    assert reloaded.find_subscription_group_config("G2") == config
    assert reloaded.find_subscription_group_config("G3") is None


def test_load_reads_rocketmq_json_with_missing_fields_as_defaults(tmp_path: Path) -> None:
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(
        json.dumps(
            {
                "subscriptionGroupTable": {"J": {"groupName": "J", "retryMaxTimes": 3, "forbidden": 1}},
                "dataVersion": {"stateVersion": 0, "timestamp": 5, "counter": 7},
            }
        )
    )
    groups = manager(path, auto_create=False)
    groups.load()
    assert groups.find_subscription_group_config("J") == SubscriptionGroupConfig("J", retry_max_times=3)
    assert groups.data_version == DataVersion(0, 5, 7)


@pytest.mark.parametrize(
    "table",
    [
        {"J": {"retryMaxTimes": 3}},
        {"J": {"groupName": "J", "retryMaxTimes": "x"}},
        {"J": {"groupName": "J", "consumeEnable": 1}},
    ],
)
def test_load_refuses_a_malformed_entry(tmp_path: Path, table: object) -> None:
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(json.dumps({"subscriptionGroupTable": table}))
    with pytest.raises(ValueError, match="malformed subscription group table"):
        manager(path).load()


async def test_changes_while_serving_are_written_in_the_background(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    groups = manager(path)
    for n in range(20):
        groups.update_subscription_group_config(SubscriptionGroupConfig(f"G{n}"))
    await groups.wait_persisted()
    table = json.loads(path.read_text())["subscriptionGroupTable"]
    assert {f"G{n}" for n in range(20)} <= set(table)
