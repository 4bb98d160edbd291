"""ConsumerOffsetManager: commits and queries, RocketMQ's JSON, periodic persistence, crash and .bak recovery."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from consumer_testkit import wait_until
from mq_broker.consumer.offset_manager import ConsumerOffsetManager


def manager(path: Path, interval_ms: int = 5_000) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(path, persist_interval_ms=interval_ms)


def test_commit_and_query(tmp_path: Path) -> None:
    offsets = manager(tmp_path / "o.json")
    assert offsets.query_offset("G", "T", 0) == -1
    offsets.commit_offset("1.2.3.4:5", "G", "T", 0, 12)
    offsets.commit_offset("1.2.3.4:5", "G", "T", 1, 7)
    offsets.commit_offset("1.2.3.4:5", "G", "T", 1, 3)  # moving back is allowed
    offsets.commit_offset("1.2.3.4:5", "H", "T", 0, 1)
    offsets.commit_offset("1.2.3.4:5", "G", "%RETRY%G", 0, 2)
    assert offsets.query_offset("G", "T", 0) == 12
    assert offsets.query_offset("G", "T", 1) == 3
    assert offsets.query_offset("G", "T", 2) == -1
    assert offsets.query_offsets("G", "T") == {0: 12, 1: 3}
    assert offsets.query_offsets("G", "nope") == {}
    assert offsets.which_topics_by_consumer("G") == {"T", "%RETRY%G"}
    assert offsets.which_groups_by_topic("T") == {"G", "H"}
    assert offsets.offset_table == {"T@G": {0: 12, 1: 3}, "T@H": {0: 1}, "%RETRY%G@G": {0: 2}}
    with pytest.raises(TypeError):
        offsets.offset_table["T@G"][0] = 1  # type: ignore[index]


def test_remove_group_and_topic(tmp_path: Path) -> None:
    offsets = manager(tmp_path / "o.json")
    for group, topic in [("G", "T"), ("G", "U"), ("H", "T"), ("GG", "T")]:
        offsets.commit_offset("h", group, topic, 0, 1)
    offsets.remove_group("G")
    assert offsets.which_topics_by_consumer("G") == set()
    assert offsets.which_groups_by_topic("T") == {"H", "GG"}
    offsets.remove_topic("T")
    assert offsets.offset_table == {}


def test_persist_is_rocketmqs_json_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    offsets = manager(path)
    offsets.commit_offset("h", "G", "T", 0, 12)
    offsets.commit_offset("h", "G", "T", 1, 7)
    offsets.persist()
    raw = json.loads(path.read_text())
    assert raw["offsetTable"] == {"T@G": {"0": 12, "1": 7}}
    assert set(raw["dataVersion"]) == {"stateVersion", "timestamp", "counter"}
    again = manager(path)
    again.load()
    assert again.offset_table == {"T@G": {0: 12, 1: 7}}


def test_load_of_a_missing_file_is_empty_and_a_malformed_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    offsets = manager(path)
    offsets.load()
    assert offsets.offset_table == {}
    path.write_text(json.dumps({"offsetTable": {"T@G": {"zero": 1}}}))
    with pytest.raises(ValueError, match="malformed consumer offset table"):
        manager(path).load()


def test_a_torn_file_after_a_crash_loads_the_bak(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    offsets = manager(path)
    offsets.commit_offset("h", "G", "T", 0, 1)
    offsets.persist()
    offsets.commit_offset("h", "G", "T", 0, 2)
    offsets.persist()
    path.write_text('{"offsetTable": {"T@G": {"0": 3')  # crash while another tool rewrote it
    again = manager(path)
    again.load()
    assert again.query_offset("G", "T", 0) == 1


async def test_the_periodic_task_persists_changes_and_stop_persists_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    offsets = manager(path, interval_ms=20)
    offsets.start()
    try:
        offsets.commit_offset("h", "G", "T", 0, 5)
        await wait_until(lambda: path.exists() and json.loads(path.read_text())["offsetTable"] == {"T@G": {"0": 5}})
        offsets.commit_offset("h", "G", "T", 1, 9)
    finally:
        await offsets.stop()
    assert json.loads(path.read_text())["offsetTable"] == {"T@G": {"0": 5, "1": 9}}
    offsets.commit_offset("h", "G", "T", 0, 6)
    await offsets.stop()  # a stopped manager persists again when stopped again
    assert json.loads(path.read_text())["offsetTable"] == {"T@G": {"0": 6, "1": 9}}


async def test_without_changes_the_task_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    offsets = manager(path, interval_ms=10)
    offsets.start()
    for _ in range(5):
        await asyncio.sleep(0.02)
    assert not path.exists()
    await offsets.stop()
    assert path.exists()


def test_data_version_moves_every_500_commits_and_on_removal(tmp_path: Path) -> None:
    offsets = manager(tmp_path / "o.json")
    start = offsets.data_version.counter
    for n in range(499):
        offsets.commit_offset("h", "G", "T", 0, n)
    assert offsets.data_version.counter == start
    offsets.commit_offset("h", "G", "T", 0, 500)
    assert offsets.data_version.counter == start + 1
    offsets.remove_group("G")
    assert offsets.data_version.counter == start + 2
