"""DefaultMessageStore queries through the IndexFile: by key (newest first, verified against the stored record),
by UNIQ_KEY, by offset, with tiny index files that roll, and the index rebuilt by recovery after an abnormal
stop."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from broker_testkit import STORE_MATRIX, message, open_store, store_config
from mq_broker.store.config import FlushDiskType, MessageStoreConfig
from mq_broker.store.index_service import MAX_TIMESTAMP_MS
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.codec import decode_message

TOPIC = "TopicTest"
TINY_INDEX = {"max_hash_slot_num": 8, "max_index_num": 8}


def config(
    tmp_path: Path, mode: FlushDiskType = FlushDiskType.ASYNC_FLUSH, file_size: int = 4096
) -> MessageStoreConfig:
    return store_config(tmp_path, mode, file_size, **TINY_INDEX)


def crash(store: DefaultMessageStore) -> None:
    """Die like kill -9 after the page cache got every write: no final flush, abort file left behind."""
    assert store.flush_service is not None
    store.flush_service._stopped.set()  # the thread stops without its final flush
    store.flush_service._wake.set()
    store.flush_service._thread.join(10)
    store.clean_service.shutdown()
    store._close_files()
    store._release_lock()


def keys_of(store: DefaultMessageStore, key: str, topic: str = TOPIC, **kw: int) -> list[str]:
    result = store.query_message(topic, key, kw.get("max_num", 64), kw.get("begin", 0), kw.get("end", MAX_TIMESTAMP_MS))
    return [decode_message(raw).body.decode() for raw in result.messages]


@pytest.mark.parametrize(("mode", "file_size"), STORE_MATRIX[::3])
async def test_query_by_key_and_uniq_key_newest_first(tmp_path: Path, mode: FlushDiskType, file_size: int) -> None:
    store = open_store(config(tmp_path, mode, max(file_size, 4096)))
    try:
        batch = [message(i, KEYS=f"k{i} even" if i % 2 == 0 else f"k{i}", UNIQ_KEY=f"UNIQ{i:04d}") for i in range(12)]
        results = await store.put_messages(batch)
        assert all(r.is_ok for r in results)
        assert len(store.index_service.index_files) > 3  # 8-entry files roll
        assert keys_of(store, "k5") == ["body-5" * 3]
        assert keys_of(store, "even") == [f"body-{i}" * 3 for i in (10, 8, 6, 4, 2, 0)]
        assert keys_of(store, "even", max_num=2) == ["body-10" * 3, "body-8" * 3]
        assert keys_of(store, "k5", topic="OtherTopic") == []
        assert keys_of(store, "nope") == []
        by_uniq = store.query_message_by_unique_key(TOPIC, "UNIQ0007")
        assert [decode_message(m).uniq_key for m in by_uniq.messages] == ["UNIQ0007"]
        raw = store.select_one_message_by_offset(results[3].wrote_offset)
        assert raw is not None
        assert decode_message(raw).body == b"body-3" * 3
        assert store.select_one_message_by_offset(results[3].wrote_offset + 1) is None
        assert store.select_one_message_by_offset(10**12) is None
    finally:
        store.shutdown()


async def test_time_range_and_hash_collisions_are_checked_on_the_message(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, max_hash_slot_num=1, max_index_num=64))  # one slot: all collide
    try:
        results = await store.put_messages([message(0, KEYS="Aa"), message(1, KEYS="BB"), message(2, KEYS="Aa")])
        # "Aa" and "BB" have the same Java hashCode: the index returns both, the store keeps the real ones
        assert keys_of(store, "Aa") == ["body-2" * 3, "body-0" * 3]
        assert keys_of(store, "BB") == ["body-1" * 3]
        stored_at = results[0].store_timestamp_ms
        assert keys_of(store, "Aa", begin=stored_at + 60_000) == []
        assert keys_of(store, "Aa", begin=0, end=stored_at - 1) == []
        assert keys_of(store, "Aa", begin=stored_at, end=stored_at) == ["body-2" * 3, "body-0" * 3]
    finally:
        store.shutdown()


async def test_index_survives_clean_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    store = open_store(cfg)
    await store.put_messages([message(i, UNIQ_KEY=f"U{i}") for i in range(10)])
    store.shutdown()
    again = open_store(cfg)
    try:
        assert keys_of(again, "k7") == ["body-7" * 3]
        assert keys_of(again, "U9") == ["body-9" * 3]
        await again.put_messages([message(10, KEYS="k7")])
        assert keys_of(again, "k7") == ["body-10" * 3, "body-7" * 3]
    finally:
        again.shutdown()


@pytest.mark.parametrize("lose_index", [False, True], ids=["index-kept", "index-lost"])
async def test_abnormal_stop_rebuilds_index_entries_without_duplicates(tmp_path: Path, lose_index: bool) -> None:
    cfg = config(tmp_path)
    store = open_store(cfg)
    first = await store.put_messages([message(i, UNIQ_KEY=f"U{i}", KEYS=f"k{i} all") for i in range(6)])
    await store.put_messages([message(i, UNIQ_KEY=f"U{i}", KEYS=f"k{i} all") for i in range(6, 14)])
    crash(store)
    assert cfg.abort_path.exists()
    if lose_index:
        shutil.rmtree(cfg.index_dir)
    again = open_store(cfg)
    try:
        assert not again.last_exit_ok
        assert keys_of(again, "all") == [f"body-{i}" * 3 for i in range(13, -1, -1)]
        assert keys_of(again, "U12") == ["body-12" * 3]
        assert keys_of(again, "k0") == ["body-0" * 3]
        entries = sum(f.index_count - 1 for f in again.index_service.index_files)
        assert entries == 14 * 3 if not lose_index else entries >= 8 * 3
        await again.put_messages([message(14, KEYS="all")])
        assert keys_of(again, "all", max_num=1) == ["body-14" * 3]
        raw = again.select_one_message_by_offset(first[0].wrote_offset)
        assert raw is not None
    finally:
        again.shutdown()


async def test_recovery_cut_drops_index_entries_past_the_commit_log_end(tmp_path: Path) -> None:
    cfg = config(tmp_path, file_size=1024 * 1024)
    store = open_store(cfg)
    results = await store.put_messages([message(i, KEYS="all") for i in range(6)])
    crash(store)
    # a torn tail: the last two records are garbage now; recovery cuts the log before them
    cut = results[4].wrote_offset
    log_file = sorted(cfg.commit_log_dir.iterdir())[0]
    with log_file.open("r+b") as fh:
        fh.seek(cut + 4)
        fh.write(b"\xde\xad\xbe\xef")
    again = open_store(cfg)
    try:
        assert again.commit_log.max_offset == cut
        assert keys_of(again, "all") == [f"body-{i}" * 3 for i in (3, 2, 1, 0)]
        assert again.index_service.last_indexed_phy_offset == results[3].wrote_offset
        new = await again.put_messages([message(9, KEYS="all")])
        assert new[0].wrote_offset == cut
        assert keys_of(again, "all") == [f"body-{i}" * 3 for i in (9, 3, 2, 1, 0)]
    finally:
        again.shutdown()


async def test_index_disabled_writes_no_index(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, message_index_enable=False))
    try:
        await store.put_messages([message(1)])
        assert keys_of(store, "k1") == []
        assert not cfg_index_dir_has_files(store.config)
    finally:
        store.shutdown()


def cfg_index_dir_has_files(cfg: MessageStoreConfig) -> bool:
    return cfg.index_dir.is_dir() and any(cfg.index_dir.iterdir())
