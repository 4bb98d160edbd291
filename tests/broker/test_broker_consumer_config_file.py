"""mq_broker.consumer.config_file: atomic writes with a .bak of the previous version, and the .bak fallback (also
of the topic table, which persists through it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mq_broker.consumer.config_file import BackgroundPersister, load_json, persist_json
from mq_broker.topic_config import TopicConfigManager
from mq_common.protocol import TopicConfig


def test_missing_file_and_missing_bak_load_as_none(tmp_path: Path) -> None:
    assert load_json(tmp_path / "config" / "x.json") is None


def test_persist_writes_the_object_and_keeps_the_previous_file_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "x.json"
    persist_json(path, {"v": 1})
    assert json.loads(path.read_text()) == {"v": 1}
    assert not (tmp_path / "config" / "x.json.bak").exists()
    persist_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 2}
    assert json.loads((tmp_path / "config" / "x.json.bak").read_text()) == {"v": 1}
    assert not (tmp_path / "config" / "x.json.tmp").exists()
    assert load_json(path) == {"v": 2}


@pytest.mark.parametrize("garbage", [b"", b'{"v": 3', b"[1, 2]", b"\xff\xfe", b"null"])
def test_a_corrupt_file_falls_back_to_the_bak(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "x.json"
    persist_json(path, {"v": 1})
    persist_json(path, {"v": 2})
    path.write_bytes(garbage)  # a torn write of some other tool, a bit flip
    assert load_json(path) == {"v": 1}


def test_a_missing_file_falls_back_to_the_bak(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    persist_json(path, {"v": 1})
    persist_json(path, {"v": 2})
    path.unlink()
    assert load_json(path) == {"v": 1}


def test_both_corrupt_raise_value_error(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("{")
    with pytest.raises(ValueError, match=r"x\.json"):
        load_json(path)  # no .bak either: nothing trustworthy
    (tmp_path / "x.json.bak").write_text("not json")
    with pytest.raises(ValueError, match=r"x\.json\.bak"):
        load_json(path)
    path.unlink()
    with pytest.raises(ValueError, match=r"x\.json\.bak"):
        load_json(path)


def test_a_tmp_left_by_a_crash_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    persist_json(path, {"v": 1})
    (tmp_path / "x.json.tmp").write_text('{"half": ')  # crashed before the rename
    (tmp_path / "x.json.bak.tmp").write_text("junk")
    assert load_json(path) == {"v": 1}
    persist_json(path, {"v": 2})
    assert load_json(path) == {"v": 2}
    assert json.loads((tmp_path / "x.json.bak").read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json", "x.json.bak"]


async def test_background_persister_coalesces_and_writes_the_latest_state(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    state = {"n": 0}
    persister = BackgroundPersister(path, lambda: dict(state))
    for n in range(1, 50):
        state["n"] = n
        persister.schedule()
    await persister.wait_persisted()
    assert load_json(path) == {"n": 49}
    state["n"] = 50
    persister.schedule()
    await asyncio.wait_for(persister.wait_persisted(), 30)
    assert load_json(path) == {"n": 50}


def test_background_persister_without_a_loop_writes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    BackgroundPersister(path, lambda: {"a": 1}).schedule()
    assert load_json(path) == {"a": 1}


async def test_background_persister_logs_a_failed_write_and_keeps_going(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    persister = BackgroundPersister(blocker / "x.json", lambda: {"a": 1})
    persister.schedule()
    await persister.wait_persisted()  # the OSError was logged, not raised
    assert blocker.is_file()


def test_the_topic_table_uses_the_same_files(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    topics = TopicConfigManager(
        path, cluster_name="C", broker_name="b", auto_create_topic_enable=True, default_topic_queue_nums=4
    )
    topics.update_topic_config(TopicConfig("First", 2, 2))  # no loop: written at once
    topics.update_topic_config(TopicConfig("Second", 2, 2))
    path.write_text('{"topicConfigTable": ')  # unusable: the previous version (.bak) is read
    again = TopicConfigManager(
        path, cluster_name="C", broker_name="b", auto_create_topic_enable=True, default_topic_queue_nums=4
    )
    again.load()
    assert again.select_topic_config("First") == TopicConfig("First", 2, 2)
    assert again.select_topic_config("Second") is None
