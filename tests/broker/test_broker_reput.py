"""The slave's reput (mq_broker.store.reput): the C walk (_native.reput_records) and its Python twin give the same
runs on the same bytes, and a slave fed through either path holds the master's ConsumeQueues and index.

The walks are compared on hand-built CommitLog files (END_OF_FILE fillers, records cut by the written end, several
topics and queues, IPv6 hosts, transactions, odd property texts, every byte of some records flipped); the stores
are fed a real master's bytes in frames that split records.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from pathlib import Path

import pytest
from broker_testkit import STORE_HOST, message, open_store, store_config
from mq_broker.store import native_append
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.store.reput import MAX_QUEUES_PER_RUN, ReputRun, scan_records
from mq_common.codec import encode_message, host_to_bytes
from mq_common.constants import MessageSysFlag
from mq_common.record_layout import BLANK_MAGIC_CODE

needs_native = pytest.mark.skipif(not native_append.AVAILABLE, reason="the C extension is off or not built")
FILE_SIZE = 8192
BASE = 3 * FILE_SIZE  # the file's CommitLog offset
V6_HOST = host_to_bytes("::1", 7000)
# Property texts the walk must read like commit_log.last_property_value: the last TAGS wins, an empty value is
# no tag, a key ending in TAGS is not TAGS, unicode tags hash as Java's String#hashCode (surrogate pairs).
PROPERTIES = (
    "TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
    "TAGS\x01a\x02TAGS\x01b\x02",
    "TAGS\x01\x02UNIQ_KEY\x01AB01\x02",
    "xTAGS\x01q\x02",
    "KEYS\x01only\x02",
    "TAGS\x01标签😀\x02",
    "",
    "TAGS\x01tail-without-separator",
)
TRANSACTIONS = (
    MessageSysFlag.TRANSACTION_NOT_TYPE,
    MessageSysFlag.TRANSACTION_PREPARED_TYPE,
    MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
)


def _transaction(i: int) -> int:
    return TRANSACTIONS[i % 7 % len(TRANSACTIONS)]


def _dispatchable(i: int) -> bool:
    return _transaction(i) in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


def _record(phys: int, i: int, topic: str, queue_id: int, queue_offset: int) -> bytes:
    return encode_message(
        topic=topic.encode(),
        body=bytes([i % 251]) * (i * 37 % 300),
        properties=PROPERTIES[i % len(PROPERTIES)].encode(),
        queue_id=queue_id,
        flag=i,
        queue_offset=queue_offset,
        physical_offset=phys,
        sys_flag=_transaction(i),
        born_timestamp_ms=1_700_000_000_000 + i,
        born_host=V6_HOST if i % 5 == 0 else host_to_bytes("127.0.0.2", 5000),
        store_timestamp_ms=1_700_000_100_000 + i,
        store_host=V6_HOST if i % 3 == 0 else STORE_HOST,
    )


def _file(queues: Sequence[tuple[str, int]], size: int = FILE_SIZE, gap_at: int = -1) -> tuple[mmap.mmap, list[int]]:
    """Records round-robin over ``queues`` until the next one does not fit, then the END_OF_FILE filler; returns
    the file and the record start positions (the filler's last). ``gap_at``: that record skips 3 queue offsets."""
    buf = mmap.mmap(-1, size)
    starts: list[int] = []
    next_offsets = dict.fromkeys(queues, 0)
    pos, i = 0, 0
    while True:
        key = queues[i % len(queues)]
        offset = next_offsets[key] + (3 if i == gap_at else 0) if _dispatchable(i) else 0
        record = _record(BASE + pos, i, key[0], key[1], offset)
        if pos + len(record) + 8 > size:
            break
        buf[pos : pos + len(record)] = record
        starts.append(pos)
        if _dispatchable(i):  # prepared and rolled-back records take no queue offset (CommitLog#doAppend)
            next_offsets[key] = offset + 1
        pos, i = pos + len(record), i + 1
    buf[pos : pos + 8] = (size - pos).to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big")
    starts.append(pos)
    return buf, starts


def _both(buf: mmap.mmap, start: int, written: int, limit: int) -> ReputRun:
    size = len(buf)
    native = scan_records(buf, start, written, limit, size, BASE, native=True)
    python = scan_records(buf, start, written, limit, size, BASE, native=False)
    assert native == python, (start, written, limit)
    return native


QUEUES = [("TopicTest", 0), ("TopicTest", 1), ("主题", 0), ("T2", 3)]


@needs_native
def test_c_and_python_walks_agree_on_every_written_end() -> None:
    buf, starts = _file(QUEUES)
    filler = starts[-1]
    for written in [*range(0, len(buf) + 1, 13), *starts, *(s + 8 for s in starts), len(buf)]:
        run = _both(buf, 0, min(written, len(buf)), len(buf))
        assert not run.corrupt
        assert run.stop == max(s for s in starts if s <= written)
    whole = _both(buf, 0, len(buf), len(buf))
    assert whole.stop == filler
    assert whole.records == len(starts) - 1
    dispatched = sum(len(q.units) for q in whole.queues) // 20
    assert 0 < dispatched < whole.records  # prepared and rolled-back records get no unit
    assert {(q.topic, q.queue_id) for q in whole.queues} == set(QUEUES)
    assert whole.last_store_timestamp_ms == 1_700_000_100_000 + whole.records - 1


@needs_native
def test_c_and_python_walks_agree_from_every_record_and_limit() -> None:
    buf, starts = _file(QUEUES)
    for a in starts[:-1]:
        for limit in (a + 1, *starts[starts.index(a) + 1 :: 3]):
            run = _both(buf, a, len(buf), limit)
            assert run.stop == min(s for s in starts if s >= limit)


@needs_native
def test_every_flipped_byte_of_some_records_gets_the_same_verdict() -> None:
    buf, starts = _file(QUEUES)
    verdicts = set()
    for pos in range(starts[0], starts[6]):
        original = buf[pos]
        for value in (original ^ 0xFF, 0x80, 0x00):
            buf[pos] = value
            run = _both(buf, 0, len(buf), len(buf))
            verdicts.add(run.corrupt)
        buf[pos] = original
    assert verdicts == {True, False}  # header and lengths corrupt the record, body bytes do not (no CRC)


@needs_native
def test_a_run_stops_before_a_new_queue_past_the_table_and_at_a_queue_offset_gap() -> None:
    many = [("TopicTest", q) for q in range(MAX_QUEUES_PER_RUN + 300)]
    buf, starts = _file(many, size=256 * 1024)
    run = _both(buf, 0, len(buf), len(buf))
    assert run.stop == starts[MAX_QUEUES_PER_RUN + _not_dispatched_before(MAX_QUEUES_PER_RUN + 1)]
    assert len(run.queues) == MAX_QUEUES_PER_RUN
    assert _both(buf, run.stop, len(buf), len(buf)).records > 0  # the next run goes on

    assert _dispatchable(16)
    buf, starts = _file(QUEUES, gap_at=16)  # record 16 (queue 0's third unit) skips 3 queue offsets
    run = _both(buf, 0, len(buf), len(buf))
    assert run.stop == starts[16]
    assert _both(buf, starts[16], len(buf), len(buf)).queues[0].first_queue_offset == 2 + 3


def _not_dispatched_before(count: int) -> int:
    """How many prepared/rolled-back records come before the ``count``-th dispatchable one (records 0, 1, ...)."""
    skipped, seen, i = 0, 0, 0
    while seen < count:
        seen += _dispatchable(i)
        skipped += not _dispatchable(i)
        i += 1
    return skipped


def _mixed(i: int) -> MessageExtBrokerInner:
    base = message(i, topic=("TopicTest", "主题", "T2")[i % 3], queue_id=i % 4)
    return MessageExtBrokerInner.build(
        topic=base.topic,
        queue_id=base.queue_id,
        body=bytes([i % 251]) * (i * 53 % 700),
        properties={"TAGS": ("TagA", "", "标签")[i % 3], "KEYS": f"k{i} key-{i}", "UNIQ_KEY": f"U{i:04d}"},
        sys_flag=_transaction(i),
        born_timestamp_ms=base.born_timestamp_ms,
        born_host=V6_HOST if i % 6 == 0 else base.born_host,
    )


def _queue_files(store: DefaultMessageStore) -> dict[tuple[str, int], bytes]:
    return {
        key: b"".join(m.read(0, m.wrote_position) for m in cq.mapped_file_queue.mapped_files)
        for key, cq in store.consume_queue_table.items()
    }


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_native), False])
async def test_a_slave_fed_in_split_frames_holds_the_masters_queues_and_index(tmp_path: Path, native: bool) -> None:
    master = open_store(store_config(tmp_path / "m", file_size=4096))
    slave = open_store(
        store_config(tmp_path / "s", file_size=4096, broker_role=BrokerRole.SLAVE, native_append_enable=native)
    )
    try:
        for start in range(0, 160, 8):
            await master.put_messages([_mixed(i) for i in range(start, start + 8)])
        assert len(master.commit_log.mapped_file_queue.mapped_files) > 3  # rolled, with END_OF_FILE fillers
        offset, end = 0, master.commit_log.max_offset
        while offset < end:
            size = master.commit_log.transfer_size(offset, 211)  # splits records: partial tails wait for the rest
            data = master.commit_log.get_message(offset, size)
            assert data is not None
            assert slave.append_replicated(offset, data)
            offset += size
        assert slave.dispatched_offset == end
        assert slave.failure is None
        assert _queue_files(slave) == _queue_files(master)
        assert slave.commit_log.topic_queue_table == master.commit_log.topic_queue_table
        assert slave.commit_log.last_store_timestamp_ms == master.commit_log.last_store_timestamp_ms
        for i in range(160):
            topic = _mixed(i).topic
            for key in (f"key-{i}", f"U{i:04d}"):
                got = slave.query_message(topic, key, 10, 0, 1 << 62).messages
                assert got == master.query_message(topic, key, 10, 0, 1 << 62).messages
                assert len(got) == (0 if _transaction(i) == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE else 1)
    finally:
        master.shutdown()
        slave.shutdown()
