"""Sharding-key selection: Java String#hashCode, same key -> same queue, keys spread over queues."""

from __future__ import annotations

import collections

import pytest
from mq_client.producer.message import Message
from mq_client.producer.selectors import (
    SelectMessageQueueByHash,
    java_string_hash,
    queue_index_for_key,
    select_by_sharding_key,
)
from mq_common.protocol import MessageQueue


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair counts as two UTF-16 units
        ("order-1001", 708180863),
    ],
)
def test_java_string_hash_golden(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_index_uses_abs_of_truncated_modulo() -> None:
    # Java: MIN_VALUE % 8 == 0; -2147483647 % 8 == -7 -> abs -> 7
    assert queue_index_for_key("polygenelubricants", 8) == 0
    assert queue_index_for_key("hello", 8) == 99162322 % 8
    negative = next(k for k in (f"sharding-key-{i}" for i in range(1000)) if java_string_hash(k) < 0)
    assert queue_index_for_key(negative, 7) == abs(java_string_hash(negative)) % 7


def test_index_needs_queues() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        queue_index_for_key("k", 0)


QUEUES = [MessageQueue("T", b, i) for b in ("broker-a", "broker-b") for i in range(4)]


def test_same_key_same_queue_always() -> None:
    first = select_by_sharding_key(QUEUES, "order-1001")
    assert all(select_by_sharding_key(QUEUES, "order-1001") == first for _ in range(50))
    assert first == QUEUES[708180863 % 8]


def test_keys_spread_over_every_queue() -> None:
    counts = collections.Counter(select_by_sharding_key(QUEUES, f"order-{i}") for i in range(400))
    assert set(counts) == set(QUEUES)
    assert min(counts.values()) >= 20  # 400 keys over 8 queues: none starved


def test_select_message_queue_by_hash_uses_str_of_arg() -> None:
    selector = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    assert selector.select(QUEUES, msg, "hello") == QUEUES[99162322 % 8]
    assert selector.select(QUEUES, msg, 42) == select_by_sharding_key(QUEUES, "42")
