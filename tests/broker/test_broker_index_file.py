"""IndexFile / IndexService units: RocketMQ's byte layout, Java key hash, chains and collisions, roll, time
ranges, truncation, reload."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from mq_broker.store.index_file import (
    INDEX_HEADER_SIZE_BYTES,
    IndexFile,
    index_file_size_bytes,
    index_key_hash,
)
from mq_broker.store.index_service import IndexService, property_value
from mq_common.codec import encode_properties
from mq_common.hashing import java_string_hash

HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")
T0 = 1_700_000_000_000


def props(uniq: str | None = None, keys: str | None = None) -> str:
    values = {"TAGS": "TagA"}
    if uniq is not None:
        values["UNIQ_KEY"] = uniq
    if keys is not None:
        values["KEYS"] = keys
    return encode_properties(values)


def key_for_hash(topic: str, target_u32: int) -> str:
    """A key of 7 chars (code points 0..30) such that hash(topic#key) == target (mod 2^32): base-31 digits."""
    prefix = java_string_hash(topic + "#") & 0xFFFFFFFF
    rest = (target_u32 - prefix * pow(31, 7, 1 << 32)) % (1 << 32)
    digits = []
    for _ in range(7):
        rest, d = divmod(rest, 31)
        digits.append(chr(d))
    assert rest == 0
    return "".join(reversed(digits))


def test_key_hash_is_abs_of_java_string_hash_code() -> None:
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert index_key_hash("T", "hello") == abs(java_string_hash("T#hello"))
    assert index_key_hash("T", "Aa") == index_key_hash("T", "BB")  # "Aa".hashCode() == "BB".hashCode()
    key = key_for_hash("T", 0x80000000)  # Integer.MIN_VALUE: Math.abs overflows, RocketMQ uses 0
    assert java_string_hash("T#" + key) == -(1 << 31)
    assert index_key_hash("T", key) == 0
    negative = key_for_hash("T", 0xFFFFFFFF)  # -1 -> 1
    assert index_key_hash("T", negative) == 1


@given(st.text(max_size=40), st.text(min_size=1, max_size=80))
def test_key_hash_matches_java_for_any_text(topic: str, key: str) -> None:
    assert index_key_hash(topic, key) == min(abs(java_string_hash(f"{topic}#{key}")), 0x7FFFFFFF) * (
        java_string_hash(f"{topic}#{key}") != -(1 << 31)
    )


def test_layout_bytes_match_rocketmq(tmp_path: Path) -> None:
    slots, entries = 8, 16
    f = IndexFile(tmp_path / "20240101000000000", slots, entries)
    assert f.file_path.stat().st_size == index_file_size_bytes(slots, entries) == 40 + 8 * 4 + 16 * 20
    h1 = index_key_hash("T", "k1")
    h2 = h1 + slots  # same slot, different hash
    assert f.put_key(h1, 100, T0)
    assert f.put_key(h2, 200, T0 + 2_500)
    assert f.put_key(h1, 300, T0 + 3_000)
    f.write_header()
    header = HEADER.unpack(f.read_bytes(0, INDEX_HEADER_SIZE_BYTES))
    # beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount (starts at 1)
    assert header == (T0, T0 + 3_000, 100, 300, 1, 4)
    slot = INDEX_HEADER_SIZE_BYTES + (h1 % slots) * 4
    assert struct.unpack(">i", f.read_bytes(slot, 4))[0] == 3  # newest entry of the slot
    base = INDEX_HEADER_SIZE_BYTES + slots * 4
    assert f.read_bytes(base, 20) == bytes(20)  # entry 0 is never used
    entries_read = [ENTRY.unpack(f.read_bytes(base + n * 20, 20)) for n in (1, 2, 3)]
    # keyHash, phyOffset, timeDiff (s), prevIndex
    assert entries_read == [(h1, 100, 0, 0), (h2, 200, 2, 1), (h1, 300, 3, 2)]
    assert list(f.iter_phy_offsets(h1, 0, T0 + 10_000)) == [300, 100]  # newest first, h2 skipped
    assert list(f.iter_phy_offsets(h2, 0, T0 + 10_000)) == [200]
    f.close()
    again = IndexFile(tmp_path / "20240101000000000", slots, entries)
    assert (again.index_count, again.end_phy_offset, again.begin_timestamp_ms) == (4, 300, T0)
    again.close()


def test_full_file_refuses_and_header_write_after_kill_is_adopted(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000000", 4, 4)  # 3 usable entries
    assert f.put_keys([1, 2, 3, 4], 10, T0) == 3
    assert f.is_write_full
    assert not f.put_key(5, 20, T0)
    f.close()  # header last written at the first entry: entries 2 and 3 were never counted on disk
    again = IndexFile(tmp_path / "20240101000000000", 4, 4)
    assert again.index_count == 4
    assert list(again.iter_phy_offsets(3, 0, T0)) == [10]
    again.close()


def test_time_range_uses_second_granularity_then_exact_check(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000000", 4, 64)
    h = 7
    for i in range(10):
        f.put_key(h, i * 100, T0 + i * 1_000 + 700)
    # entry times are whole seconds after the file begin: a message at T0+3700 may match a begin of T0+3800
    assert list(f.iter_phy_offsets(h, T0 + 3_800, T0 + 5_700)) == [500, 400, 300]
    assert list(f.iter_phy_offsets(h, T0 + 20_000, T0 + 30_000)) == []
    assert f.is_time_matched(T0, T0 + 701)
    assert not f.is_time_matched(T0, T0 + 699)
    assert not f.is_time_matched(T0 + 60_000, T0 + 70_000)
    f.close()


def test_truncate_drops_tail_entries_and_repairs_slots(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000000", 2, 64)
    for i in range(1, 11):
        f.put_key(i % 3, i * 100, T0 + i)  # slots 0 and 1 get long interleaved chains
    f.write_header()
    f.truncate(600)
    assert (f.index_count, f.end_phy_offset) == (6, 500)
    assert list(f.iter_phy_offsets(1, 0, T0 + 100)) == [400, 100]
    assert list(f.iter_phy_offsets(2, 0, T0 + 100)) == [500, 200]
    assert list(f.iter_phy_offsets(0, 0, T0 + 100)) == [300]
    assert f.put_key(1, 600, T0 + 6)  # appends after the cut, chains continue
    assert list(f.iter_phy_offsets(1, 0, T0 + 100)) == [600, 400, 100]
    f.close()


def test_service_rolls_files_named_by_time_and_queries_across_them(tmp_path: Path) -> None:
    index = IndexService(tmp_path / "index", 4, 4)  # 3 keys per file
    for i in range(10):
        index.build_index("T", 1000 + i * 100, T0 + i, 0, props(uniq=f"U{i}", keys=f"k{i} shared"))
    names = [f.file_path.name for f in index.index_files]
    assert len(names) == 10  # 3 keys per message, 3 per file
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert all(len(n) == 17 and n.isdigit() for n in names)
    assert list(index.iter_phy_offsets("T", "shared", 0, T0 + 100)) == [1000 + i * 100 for i in range(9, -1, -1)]
    assert list(index.iter_phy_offsets("T", "U4", 0, T0 + 100)) == [1400]
    assert list(index.iter_phy_offsets("Other", "U4", 0, T0 + 100)) == []
    # a re-dispatched message (recovery) is not indexed twice
    assert index.build_index("T", 1900, T0 + 9, 0, props(uniq="U9")) == 0
    index.close()
    reloaded = IndexService(tmp_path / "index", 4, 4)
    reloaded.load()
    assert reloaded.last_indexed_phy_offset == 1900
    reloaded.truncate(1500)
    assert reloaded.last_indexed_phy_offset == 1400
    assert list(reloaded.iter_phy_offsets("T", "shared", 0, T0 + 100)) == [1400, 1300, 1200, 1100, 1000]
    reloaded.close()


def test_rolled_back_transactions_and_messages_without_keys_get_no_entries(tmp_path: Path) -> None:
    index = IndexService(tmp_path / "index", 16, 16)
    assert index.build_index("T", 0, T0, 0x4 | 0x8, props(uniq="U")) == 0  # TRANSACTION_ROLLBACK_TYPE
    assert index.build_index("T", 10, T0, 0, props()) == 0
    assert index.build_index("T", 20, T0, 0x4, props(uniq="P")) == 1  # prepared: indexed, like RocketMQ
    assert index.build_index("T", 30, T0, 0, props(keys="  a  b ")) == 2
    index.close()


def test_property_value_finds_whole_names_only() -> None:
    text = encode_properties({"XKEYS": "no", "KEYS": "yes", "UNIQ_KEY": "U1"})
    assert property_value(text, "KEYS") == "yes"
    assert property_value(text, "UNIQ_KEY") == "U1"
    assert property_value(text, "TAGS") is None
    assert property_value(encode_properties({"XKEYS": "no"}), "KEYS") is None
