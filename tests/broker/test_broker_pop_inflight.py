"""The POP in-flight table and the revive-log records, without a broker: claims and settles, resolution, the due
schedule, the oldest live revive offset, counts, pop-time reservations, the memory of 100,000 in-flight messages,
and RocketMQ's JSON bodies of checkpoints and acks."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from mq_broker.consumer.pop.inflight import InflightCheckPoint, InflightTable
from mq_broker.consumer.pop.revive_log import (
    AckMsg,
    CheckPoint,
    ReviveRecordError,
    ack_uniq_id,
    build_record,
    checkpoint_uniq_id,
    parse_record,
)
from mq_common.codec import decode_properties

MEMORY_BUDGET_BYTES = 100 * 1024 * 1024
INFLIGHT_MESSAGES = 100_000


def checkpoint(
    start: int = 10, pop_time: int = 1_000, diff: tuple[int, ...] = (0, 1, 3), invisible: int = 500
) -> CheckPoint:
    return CheckPoint("T", "G", 2, start, pop_time, invisible, diff, "broker-a")


def test_claim_settle_and_resolution() -> None:
    table = InflightTable(4)
    row = InflightCheckPoint(checkpoint(), 1, 7)
    assert table.add(row)
    assert not table.add(InflightCheckPoint(checkpoint(), 1, 8))  # same name: a record read twice
    assert (table.message_count, table.checkpoint_count, table.inflight_count("G", "T", 2)) == (3, 1, 3)
    assert [row.index_of(o) for o in (10, 11, 12, 13, 9)] == [0, 1, -1, 2, -1]
    assert table.claim(row, 0)
    assert not table.claim(row, 0)  # a replay while the ack is written
    table.settle(row, 0, stored=False)  # the store refused the record: un-acked again
    assert table.inflight_count("G", "T", 2) == 3
    for index in (0, 1, 2):
        assert table.claim(row, index)
    assert row.unacked_offsets() == []
    table.settle(row, 0, stored=True)
    table.settle(row, 1, stored=True)
    assert row.alive  # one ack still pending keeps it
    assert table.min_live_revive_offset(1) == 7
    table.settle(row, 2, stored=True)
    assert not row.alive
    assert table.find(("T", "G", 2, 10, 1_000)) is None
    assert table.min_live_revive_offset(1) is None
    assert (table.message_count, table.checkpoint_count, dict(table.inflight_by_group_topic())) == (0, 0, {})


def test_due_schedule_and_revive_offsets() -> None:
    table = InflightTable(2)
    early = InflightCheckPoint(checkpoint(start=0, pop_time=1_000, invisible=500), 0, 5)
    late = InflightCheckPoint(checkpoint(start=3, pop_time=1_000, invisible=5_000), 0, 3)
    other = InflightCheckPoint(checkpoint(start=6, pop_time=1_000, invisible=500), 1, 9)
    for row in (early, late, other):
        table.add(row)
    assert table.min_live_revive_offset(0) == 3
    assert list(table.pop_due(1_499)) == []
    assert {id(r) for r in table.pop_due(2_000)} == {id(early), id(other)}
    assert list(table.pop_due(2_000)) == []  # yielded once per schedule
    table.reschedule(early, 3_000)
    assert list(table.pop_due(3_000)) == [early]
    assert [r.revive_offset for r in table.pop_due(10_000)] == [3]
    for i in range(3):
        table.claim(late, i)
        table.settle(late, i, stored=True)
    assert table.min_live_revive_offset(0) == 5


def test_pop_time_reservations_keep_names_unique() -> None:
    table = InflightTable(1)
    table.add(InflightCheckPoint(checkpoint(start=0, pop_time=100), 0, 0))
    assert table.reserve_pop_time("T", "G", 2, 0, 100) == 101
    assert table.reserve_pop_time("T", "G", 2, 0, 100) == 102
    table.release(("T", "G", 2, 0, 101))
    assert table.reserve_pop_time("T", "G", 2, 0, 100) == 101
    assert table.reserve_pop_time("T", "G", 2, 5, 100) == 100


def test_one_hundred_thousand_inflight_messages_fit_the_memory_budget() -> None:
    """The worst case: one message per checkpoint (a pop of 32 shares one)."""
    topic, group = "BenchTopic", "bench_group"
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table = InflightTable(8)
        for i in range(INFLIGHT_MESSAGES):
            ck = CheckPoint(topic, group, i % 16, 1_000_000 + i, 1_700_000_000_000 + i, 60_000, (0,), "broker-a")
            table.add(InflightCheckPoint(ck, i % 8, 500_000 + i))
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert table.message_count == INFLIGHT_MESSAGES
    print(f"\n{INFLIGHT_MESSAGES:,} in-flight messages: {used / 2**20:.1f} MiB ({used / INFLIGHT_MESSAGES:.0f} B each)")
    assert used <= MEMORY_BUDGET_BYTES


def test_records_carry_rocketmq_json() -> None:
    ck = checkpoint()
    host = b"\x7f\0\0\1\0\0\0\1"
    inner = build_record(ck, revive_topic_name="rmq_sys_REVIVE_LOG_C", revive_queue_id=3, store_host=host)
    body = json.loads(inner.body)
    assert body == {"so": 10, "pt": 1_000, "it": 500, "bm": 0, "n": 3, "q": 2, "t": "T", "c": "G", "ro": 0,
                    "d": [0, 1, 3], "bn": "broker-a"}  # fmt: skip
    props = decode_properties(inner.properties_string)
    assert props["TAGS"] == "ck"
    assert props["UNIQ_KEY"] == checkpoint_uniq_id(ck) == "T@2@10@G@1000@broker-a@ck"
    assert (inner.topic, inner.queue_id) == ("rmq_sys_REVIVE_LOG_C", 3)
    assert parse_record("ck", inner.body) == ck
    single = AckMsg("T", "G", 2, 10, 1_000, (11,), "broker-a")
    batch = AckMsg("T", "G", 2, 10, 1_000, (10, 13), "broker-a")
    assert (single.tag, batch.tag) == ("ack", "bAck")
    assert single.to_json() == {"ao": 11, "so": 10, "c": "G", "t": "T", "q": 2, "pt": 1_000, "bn": "broker-a"}
    assert batch.to_json()["aol"] == [10, 13]
    assert ack_uniq_id(single) == "T@2@11@G@1000@broker-a@ack"
    for record in (single, batch):
        assert parse_record(record.tag, json.dumps(record.to_json()).encode()) == record
    assert parse_record("ck", b'{"so":1,"pt":2,"it":3,"n":2,"q":0,"t":"T","c":"G"}').queue_offset_diff == (0, 1)


@pytest.mark.parametrize(
    ("tag", "body"),
    [
        ("ck", b"not json"),
        ("ck", b"[]"),
        ("ck", b'{"so": 1}'),
        ("ack", b'{"ao": "x"}'),
        ("other", b"{}"),
        (None, b"{}"),
    ],
)
def test_malformed_records_are_refused(tag: str | None, body: bytes) -> None:
    with pytest.raises(ReviveRecordError):
        parse_record(tag, body)
