"""TopicConfigManager: system topics, TBW102 auto-create, persistence, data version."""

from __future__ import annotations

import json
from pathlib import Path

from mq_broker.topic_config import TopicConfigManager
from mq_common.constants import MixAll, PermName
from mq_common.protocol import TopicConfig


def manager(path: Path, *, auto_create: bool = True, queue_nums: int = 4) -> TopicConfigManager:
    return TopicConfigManager(
        path,
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        auto_create_topic_enable=auto_create,
        default_topic_queue_nums=queue_nums,
    )


def test_tbw102_exists_only_with_auto_create(tmp_path: Path) -> None:
    on = manager(tmp_path / "a.json")
    tbw = on.select_topic_config(MixAll.DEFAULT_TOPIC)
    assert tbw is not None
    assert (tbw.read_queue_nums, tbw.write_queue_nums) == (4, 4)
    assert tbw.perm == PermName.PERM_INHERIT | PermName.PERM_READ | PermName.PERM_WRITE
    assert on.select_topic_config("broker-a") is not None
    assert on.is_system_topic("DefaultCluster")
    off = manager(tmp_path / "b.json", auto_create=False)
    assert off.select_topic_config(MixAll.DEFAULT_TOPIC) is None


def test_auto_create_takes_the_smaller_queue_count_and_drops_inherit(tmp_path: Path) -> None:
    topics = manager(tmp_path / "t.json", queue_nums=4)
    changes: list[int] = []
    topics.on_change = lambda: changes.append(topics.data_version.counter)
    created = topics.create_topic_in_send_message_method("NewTopic", MixAll.DEFAULT_TOPIC, 8)
    assert created is not None
    assert (created.read_queue_nums, created.write_queue_nums) == (4, 4)
    assert created.perm == PermName.PERM_READ | PermName.PERM_WRITE
    smaller = topics.create_topic_in_send_message_method("Small", MixAll.DEFAULT_TOPIC, 2)
    assert smaller is not None
    assert smaller.write_queue_nums == 2
    assert changes == [1, 2]
    # Existing topics come back unchanged and do not bump the version.
    assert topics.create_topic_in_send_message_method("Small", MixAll.DEFAULT_TOPIC, 3) == smaller
    assert topics.data_version.counter == 2
    assert topics.create_topic_in_send_message_method("X", "NoSuchDefault", 4) is None


def test_auto_create_off_ignores_a_persisted_tbw102(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    manager(path).persist()  # TBW102 (with INHERIT) is now on disk
    off = manager(path, auto_create=False)
    off.load()
    assert off.select_topic_config(MixAll.DEFAULT_TOPIC) is not None
    assert off.create_topic_in_send_message_method("NewTopic", MixAll.DEFAULT_TOPIC, 4) is None


def test_persist_and_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    topics = manager(path)
    assert topics.update_topic_config(TopicConfig("Orders", 8, 8, 6, order=True, attributes={"+message.type": "FIFO"}))
    assert not topics.update_topic_config(
        TopicConfig("Orders", 8, 8, 6, order=True, attributes={"+message.type": "FIFO"})
    )
    data = json.loads(path.read_text())  # written synchronously outside a loop
    assert data["topicConfigTable"]["Orders"]["writeQueueNums"] == 8
    assert data["dataVersion"]["counter"] == 1
    loaded = manager(path)
    loaded.load()
    assert loaded.select_topic_config("Orders") == topics.select_topic_config("Orders")
    assert loaded.data_version == topics.data_version


async def test_changes_on_the_loop_are_persisted_in_the_background(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    topics = manager(path)
    for i in range(5):
        topics.update_topic_config(TopicConfig(f"T{i}", 2, 2))
    await topics.wait_persisted()
    data = json.loads(path.read_text())
    assert {f"T{i}" for i in range(5)} <= set(data["topicConfigTable"])
    assert data["dataVersion"]["counter"] == 5  # the last write wins, in order


def test_topic_config_string_matches_rocketmq() -> None:
    text = str(TopicConfig("T", 4, 4, 6))
    assert text.startswith("TopicConfig [topicName=T, readQueueNums=4, writeQueueNums=4, perm=RW-")


def test_auto_create_stops_at_auto_create_topic_max_topics(tmp_path: Path) -> None:
    topics = manager(tmp_path / "t.json")
    cap = len(topics.topic_config_table) + 1
    topics.auto_create_topic_max_topics = cap
    assert topics.send_message_template("First", MixAll.DEFAULT_TOPIC, 4) is not None
    assert topics.create_topic_in_send_message_method("First", MixAll.DEFAULT_TOPIC, 4) is not None
    assert topics.send_message_template("Second", MixAll.DEFAULT_TOPIC, 4) is None
    assert topics.create_topic_in_send_message_method("Second", MixAll.DEFAULT_TOPIC, 4) is None
    assert len(topics.topic_config_table) == cap
    assert topics.create_topic_in_send_message_method("First", MixAll.DEFAULT_TOPIC, 4) is not None  # existing


def test_send_message_template_stores_nothing(tmp_path: Path) -> None:
    topics = manager(tmp_path / "t.json")
    before = dict(topics.topic_config_table)
    template = topics.send_message_template("Preview", MixAll.DEFAULT_TOPIC, 2)
    assert template is not None
    assert (template.write_queue_nums, template.perm & PermName.PERM_INHERIT) == (2, 0)
    assert topics.topic_config_table == before


def test_adopt_store_topics_creates_only_missing_legal_user_topics(tmp_path: Path) -> None:
    """A promoted slave's store topics: the missing ones are created RW with the store's queue count; a known topic,
    a system topic, an illegal name or queue count are left alone; on_change runs once for the lot."""
    topics = manager(tmp_path / "t.json")
    known = TopicConfig("Known", 8, 8, PermName.PERM_READ)
    topics.update_topic_config(known)
    changes: list[int] = []
    topics.on_change = lambda: changes.append(topics.data_version.counter)
    adopted = topics.adopt_store_topics(
        {"Fresh": 3, "%RETRY%group-a": 1, "Known": 2, "SCHEDULE_TOPIC_XXXX": 18, "bad topic": 1, "Zero": 0}
    )
    assert adopted == ["%RETRY%group-a", "Fresh"]
    fresh = topics.select_topic_config("Fresh")
    assert fresh is not None
    assert (fresh.read_queue_nums, fresh.write_queue_nums, fresh.perm) == (
        3,
        3,
        PermName.PERM_READ | PermName.PERM_WRITE,
    )
    assert topics.select_topic_config("Known") == known
    assert topics.select_topic_config("SCHEDULE_TOPIC_XXXX") is None
    assert topics.select_topic_config("Zero") is None
    assert changes == [2]
    assert topics.adopt_store_topics({"Fresh": 5}) == []
    assert changes == [2]
