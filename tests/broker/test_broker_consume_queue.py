"""ConsumeQueue units, O(1) lookup across files, and DefaultMessageStore#getMessage statuses + tag filter."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from mq_broker.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue
from mq_broker.store.mapped_file import offset_to_file_name
from mq_broker.store.message import GetMessageStatus
from mq_broker.store.message_filter import SubscriptionData, SubscriptionParseError
from mq_common.codec import iter_messages
from mq_common.hashing import java_string_hash


async def test_units_are_20_bytes_in_files_of_n_units(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=64 * 1024, cq_units=4))
    try:
        results = await store.put_messages([message(i, queue_id=1) for i in range(10)])
        cq_dir = tmp_path / "consumequeue" / "TopicTest" / "1"
        names = sorted(p.name for p in cq_dir.iterdir())
        assert names == [offset_to_file_name(0), offset_to_file_name(80), offset_to_file_name(160)]
        raw = (cq_dir / names[1]).read_bytes()
        assert len(raw) == 80
        phys, size, tags = struct.unpack_from(">qiq", raw, 20)  # unit 5
        assert (phys, size, tags) == (results[5].wrote_offset, results[5].wrote_bytes, java_string_hash("TagA"))
        cq = store.find_consume_queue("TopicTest", 1)
        assert cq is not None
        assert (cq.min_offset_in_queue, cq.max_offset_in_queue) == (0, 10)
        for i, r in enumerate(results):
            unit = cq.get_unit(i)
            assert unit is not None
            assert (unit.commit_log_offset, unit.size) == (r.wrote_offset, r.wrote_bytes)
        assert cq.get_unit(10) is None
    finally:
        store.shutdown()


def test_missing_units_are_filled_with_blanks_and_repeats_skipped(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, units_per_file=4)
    assert cq.put_message_position_info(100, 50, 7, queue_offset=0)
    assert cq.put_message_position_info(300, 50, 7, queue_offset=3)  # 1 and 2 are missing
    assert not cq.put_message_position_info(100, 50, 7, queue_offset=0)  # already there (re-dispatch)
    units = cq.read_units(0, 10)
    assert units is not None
    assert [u.size for u in units] == [50, BLANK_UNIT_SIZE, BLANK_UNIT_SIZE, 50]
    assert cq.max_offset_in_queue == 4
    cq.close()


def test_queue_starting_late_has_a_min_offset(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, units_per_file=4)
    cq.put_message_position_info(1000, 10, 0, queue_offset=6)
    assert (cq.min_offset_in_queue, cq.max_offset_in_queue) == (6, 7)
    assert cq.read_units(5, 1) is None
    cq.close()


def test_truncate_dirty_logic_files_drops_units_past_the_commit_log(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path, units_per_file=4)
    for i in range(10):
        cq.put_message_position_info(i * 100, 100, 0, queue_offset=i)
    cq.truncate_dirty_logic_files(450, zero_tail=True)  # units 0..3 end at or before 400; unit 4 ends at 500
    assert cq.max_offset_in_queue == 4
    assert cq.max_physic_offset == 400
    assert len(cq.mapped_file_queue.mapped_files) == 2  # [0..3] full, [4..7] empty
    cq.truncate_dirty_logic_files(0, zero_tail=True)
    assert cq.max_offset_in_queue == 0
    cq.close()


async def test_get_message_statuses(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path, file_size=64 * 1024))
    try:
        r = store.get_messages("TopicTest", 0, 0, 10)
        assert (r.status, r.next_begin_offset) == (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        await store.put_messages([message(i, queue_id=0) for i in range(5)])
        r = store.get_messages("TopicTest", 0, 1, 2)
        assert r.status is GetMessageStatus.FOUND
        assert (r.next_begin_offset, r.min_offset, r.max_offset) == (3, 0, 5)
        assert r.queue_offsets == (1, 2)
        assert [m.queue_offset for m in iter_messages(b"".join(r.messages))] == [1, 2]
        r = store.get_messages("TopicTest", 0, 5, 10)
        assert (r.status, r.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 5)
        r = store.get_messages("TopicTest", 0, 9, 10)
        assert (r.status, r.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 5)
        r = store.get_messages("TopicTest", 0, 0, 100)
        assert (r.status, r.message_count, r.next_begin_offset) == (GetMessageStatus.FOUND, 5, 5)
    finally:
        store.shutdown()


async def test_pull_size_limits(tmp_path: Path) -> None:
    store = open_store(
        store_config(tmp_path, file_size=64 * 1024, max_transfer_count_per_pull=3, max_transfer_bytes_per_pull=10)
    )
    try:
        await store.put_messages([message(i, queue_id=0) for i in range(5)])
        r = store.get_messages("TopicTest", 0, 0, 100)
        # 10 bytes is less than one record: one message still comes back, and never more than 3.
        assert (r.message_count, r.next_begin_offset) == (1, 1)
    finally:
        store.shutdown()


async def test_tag_filter_hash_then_exact(tmp_path: Path) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # a real collision
    store = open_store(store_config(tmp_path, file_size=64 * 1024))
    try:
        tags = ["Aa", "BB", "TagC", "Aa", "TagD"]
        await store.put_messages([message(i, queue_id=0, tag=t) for i, t in enumerate(tags)])
        r = store.get_messages("TopicTest", 0, 0, 10, SubscriptionData.build("Aa"))
        assert r.status is GetMessageStatus.FOUND
        assert r.queue_offsets == (0, 3)
        assert r.next_begin_offset == 5
        r = store.get_messages("TopicTest", 0, 0, 10, SubscriptionData.build("TagC || TagD"))
        assert r.queue_offsets == (2, 4)
        r = store.get_messages("TopicTest", 0, 0, 10, SubscriptionData.build("Nope"))
        assert (r.status, r.message_count, r.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 0, 5)
    finally:
        store.shutdown()


def test_subscription_parsing() -> None:
    assert SubscriptionData.build("").is_sub_all
    assert SubscriptionData.build("*").is_sub_all
    sub = SubscriptionData.build(" TagA ||TagB|| ")
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    with pytest.raises(SubscriptionParseError):
        SubscriptionData.build("||")


@pytest.mark.parametrize("runs", [[3, 2, 4], [1, 7], [5, 5, 5]])
def test_put_units_writes_what_unit_by_unit_puts_write(tmp_path: Path, runs: list[int]) -> None:
    """Packed runs (across a file boundary every 4 units, and after a gap) equal unit-by-unit puts, byte for byte."""
    queues = {name: ConsumeQueue("T", 0, tmp_path / name, 4) for name in ("runs", "units")}
    phys, offset = 0, 0
    try:
        for n in runs:
            units = [(phys + i * 100, 100, 7 + i) for i in range(n)]
            queues["runs"].put_units(offset, units)
            for i, (p, size, tags) in enumerate(units):
                queues["units"].put_message_position_info(p, size, tags, offset + i)
            phys += n * 100
            offset += n + 1  # a gap of one queue offset: blank-filled by both
        files = {name: q.mapped_file_queue.mapped_files for name, q in queues.items()}
        got = {name: [f.read(0, f.wrote_position) for f in mapped] for name, mapped in files.items()}
        assert got["runs"] == got["units"]
        assert queues["runs"].max_offset_in_queue == queues["units"].max_offset_in_queue == offset - 1
        unit = queues["runs"].get_unit(runs[0] + 1)  # the first unit of the second run, after the gap
        assert unit is not None
        assert (unit.commit_log_offset, unit.size, unit.tags_code) == (runs[0] * 100, 100, 7)
    finally:
        for cq in queues.values():
            cq.close()


def test_a_file_destroyed_under_the_flusher_needs_no_flush(tmp_path: Path) -> None:
    """The flusher thread may hold a ConsumeQueue file that DeleteTopic or the clean service closes meanwhile: its
    units need no flush (None), and the read must not fail the store (it once raised struct.error, which made the
    whole store read-only)."""
    cq = ConsumeQueue("T", 0, tmp_path, units_per_file=4)
    assert cq.put_message_position_info(100, 50, 7, queue_offset=0)
    assert cq.first_unflushed_physic_offset() == 100
    for mapped in cq.mapped_file_queue.mapped_files:
        mapped.close()  # what destroy() does first, while the flusher still holds the file
    assert cq.first_unflushed_physic_offset() is None
