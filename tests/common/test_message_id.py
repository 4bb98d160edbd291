"""UNIQ_KEYs (MessageClientIDSetter's layout) and offset msg ids (MessageDecoder#createMessageId)."""

from __future__ import annotations

import calendar
import os
import time

import pytest
from mq_common.message_id import (
    UniqueIdGenerator,
    create_offset_msg_id,
    create_uniq_id,
    create_uniq_ids,
    decode_offset_msg_id,
)

IP = bytes((127, 0, 0, 7))


def fields(uniq_id: str) -> tuple[bytes, int, int, int]:
    """(ip, pid, ms since the month's start, counter) of a 32-hex-char UNIQ_KEY."""
    raw = bytes.fromhex(uniq_id)
    assert len(raw) == 16
    return raw[:4], int.from_bytes(raw[4:6], "big"), int.from_bytes(raw[10:14], "big"), int.from_bytes(raw[14:], "big")


def month_ms_now() -> int:
    now = time.time()
    t = time.gmtime(now)
    return int(now * 1000) - calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000


def test_create_has_the_layout_of_message_client_id_setter() -> None:
    gen = UniqueIdGenerator(IP)
    before = month_ms_now()
    uniq_id = gen.create()
    after = month_ms_now()
    assert uniq_id == uniq_id.upper()
    assert len(uniq_id) == 32
    ip, pid, month_ms, _counter = fields(uniq_id)
    assert ip == IP
    assert pid == os.getpid() & 0xFFFF
    assert before <= month_ms <= after


@pytest.mark.parametrize("count", [1, 2, 100, 70_000])
def test_create_many_gives_consecutive_counters_one_clock_read(count: int) -> None:
    gen = UniqueIdGenerator(IP)
    ids = gen.create_many(count)
    assert len(ids) == count
    assert len(set(ids)) == min(count, 1 << 16)  # the 2-byte counter wraps, as RocketMQ's does
    parsed = [fields(i) for i in ids]
    assert {p[:3] for p in parsed} == {parsed[0][:3]}  # one prefix, one clock read
    first = parsed[0][3]
    assert [p[3] for p in parsed] == [(first + i) & 0xFFFF for i in range(count)]


def test_create_and_create_many_share_one_counter() -> None:
    gen = UniqueIdGenerator(IP)
    one = fields(gen.create())[3]
    many = [fields(i)[3] for i in gen.create_many(3)]
    again = fields(gen.create())[3]
    assert many == [(one + 1 + i) & 0xFFFF for i in range(3)]
    assert again == (one + 4) & 0xFFFF


def test_two_generators_differ_by_instance_id() -> None:
    a, b = UniqueIdGenerator(IP), UniqueIdGenerator(IP)
    assert a.create()[:20] != b.create()[:20]


def test_process_wide_helpers_never_repeat() -> None:
    ids = [create_uniq_id(), *create_uniq_ids(500), create_uniq_id()]
    assert len(set(ids)) == len(ids)
    assert create_uniq_ids(0) == []


@pytest.mark.parametrize(("host", "port", "offset"), [("127.0.0.1", 10911, 0), ("127.0.0.1", 10921, 2**40 + 5)])
def test_offset_msg_id_round_trip(host: str, port: int, offset: int) -> None:
    msg_id = create_offset_msg_id(host, port, offset)
    assert len(msg_id) == 32
    assert decode_offset_msg_id(msg_id) == (host, port, offset)


def test_offset_msg_id_malformed() -> None:
    with pytest.raises(ValueError, match="32 or 56"):
        decode_offset_msg_id("ABCD")
