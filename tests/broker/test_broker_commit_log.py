"""CommitLog through DefaultMessageStore: record layout, END_OF_FILE blank and roll, limits, lookup with CRC."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from hypothesis import given
from hypothesis import strategies as st
from mq_broker.store.commit_log import MESSAGE_ILLEGAL_REMARK, last_property_value
from mq_broker.store.config import FlushDiskType
from mq_broker.store.mapped_file import offset_to_file_name
from mq_broker.store.message import MessageExtBrokerInner, PutMessageStatus
from mq_common.codec import CrcMismatchError, decode_message, decode_properties, host_to_bytes
from mq_common.hashing import java_string_hash
from mq_common.record_layout import BLANK_MAGIC_CODE


async def test_records_carry_offsets_store_fields_and_msg_id(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=64 * 1024))
    try:
        results = await store.put_messages([message(i, queue_id=3) for i in range(3)])
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 3
        assert [r.queue_offset for r in results] == [0, 1, 2]
        assert results[0].wrote_offset == 0
        assert results[1].wrote_offset == results[0].wrote_bytes
        msg = store.lookup_message_by_offset(results[1].wrote_offset)
        assert msg is not None
        assert (msg.topic, msg.queue_id, msg.queue_offset) == ("TopicTest", 3, 1)
        assert msg.commit_log_offset == results[1].wrote_offset
        assert msg.store_timestamp_ms == results[1].store_timestamp_ms > 0
        assert msg.store_host == ("127.0.0.1", 10911)
        assert msg.born_host == ("127.0.0.2", 5000)
        assert msg.tags == "TagA"
        assert msg.offset_msg_id == results[1].msg_id
        assert len(results[1].msg_id) == 32
    finally:
        store.shutdown()


async def test_record_that_does_not_fit_leaves_a_blank_and_rolls(tmp_path: Path) -> None:
    file_size = 1024
    store = open_store(store_config(tmp_path, file_size=file_size))
    try:
        results = []
        for i in range(20):
            results.extend(await store.put_messages([message(i)]))
        assert all(r.is_ok for r in results)
        files = store.commit_log.mapped_file_queue.mapped_files
        assert len(files) > 2
        first = files[0]
        last_in_first = max((r for r in results if r.wrote_offset < file_size), key=lambda r: r.wrote_offset)
        blank_pos = last_in_first.wrote_offset + last_in_first.wrote_bytes
        remaining = file_size - blank_pos
        total, magic = struct.unpack(">iI", first.read(blank_pos, 8))
        assert (total, magic) == (remaining, BLANK_MAGIC_CODE)
        following = [r for r in results if r.wrote_offset >= file_size]
        assert following[0].wrote_offset == file_size  # the next record starts the next file
        assert (tmp_path / "commitlog" / offset_to_file_name(file_size)).exists()
        # Every record is readable where the store said it is, queue offsets are dense per queue.
        for r in results:
            assert store.lookup_message_by_offset(r.wrote_offset) is not None
        assert sorted(r.queue_offset for i, r in enumerate(results) if i % 2 == 0) == list(range(10))
    finally:
        store.shutdown()


async def test_limits_fail_only_the_bad_item(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=64 * 1024, max_message_size_bytes=1000))
    try:
        big = MessageExtBrokerInner.build(topic="TopicTest", queue_id=0, body=b"x" * 1001, properties={})
        props = MessageExtBrokerInner.build(topic="TopicTest", queue_id=0, body=b"x", properties={"k": "v" * 32_767})
        ok = message(1, queue_id=0)
        results = await store.put_messages([big, ok, props])
        assert [r.status for r in results] == [
            PutMessageStatus.MESSAGE_ILLEGAL,
            PutMessageStatus.PUT_OK,
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        ]
        assert results[0].remark == MESSAGE_ILLEGAL_REMARK % 1000
        assert results[1].queue_offset == 0  # refused items take no queue offset
        assert store.get_max_offset_in_queue("TopicTest", 0) == 1
    finally:
        store.shutdown()


async def test_record_larger_than_a_file_is_illegal(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=512))
    try:
        huge = MessageExtBrokerInner.build(topic="TopicTest", queue_id=0, body=b"x" * 600, properties={})
        (result,) = await store.put_messages([huge])
        assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.commit_log.max_offset == 0
    finally:
        store.shutdown()


async def test_ipv6_hosts_and_tag_code(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=64 * 1024))
    try:
        inner = MessageExtBrokerInner.build(
            topic="TopicTest",
            queue_id=0,
            body=b"v6",
            properties={"TAGS": "标签"},
            born_host=host_to_bytes("::1", 7),
        )
        (result,) = await store.put_messages([inner])
        msg = store.lookup_message_by_offset(result.wrote_offset)
        assert msg is not None
        assert msg.born_host == ("::1", 7)
        unit = store.find_consume_queue("TopicTest", 0).get_unit(0)  # type: ignore[union-attr]
        assert unit is not None
        assert unit.tags_code == java_string_hash("标签") == inner.tags_code
    finally:
        store.shutdown()


def test_java_string_hash_matches_java() -> None:
    # Values printed by OpenJDK 17's String#hashCode.
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("hello world, this overflows") == 161437415
    assert java_string_hash("😀") == 1772899  # a surrogate pair: two UTF-16 units
    assert java_string_hash("标签") == 857175
    assert java_string_hash("polygenelubricants") == -(2**31)  # wraps like a Java int


async def test_lookup_detects_a_flipped_bit(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, FlushDiskType.SYNC_FLUSH, file_size=64 * 1024))
    try:
        (result,) = await store.put_messages([message(7)])
        mapped = store.commit_log.mapped_file_queue.mapped_files[0]
        raw = bytearray(mapped.read(result.wrote_offset, result.wrote_bytes))
        body_at = raw.index(message(7).body)
        mapped.write_at(result.wrote_offset + body_at, bytes([raw[body_at] ^ 0x40]))
        with pytest.raises(CrcMismatchError):
            store.lookup_message_by_offset(result.wrote_offset)
        assert decode_message(mapped.read(result.wrote_offset, result.wrote_bytes), check_crc=False).queue_id == 1
    finally:
        store.shutdown()


@given(
    st.lists(
        st.tuples(st.sampled_from(["TAGS", "KEYS", "xTAGS", "TAG", "a"]), st.text(alphabet="ab\x03 é", max_size=5))
    )
)
def test_last_property_value_is_what_a_decoded_map_keeps(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    for name in ("TAGS", "KEYS", "TAG"):
        assert last_property_value(text, name) == decode_properties(text).get(name)
