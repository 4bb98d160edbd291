"""mq_common.hashing equals Java's String#hashCode (golden values computed by Java, and a reference loop)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mq_common.hashing import java_abs_hash, java_string_hash


def _reference(text: str) -> int:
    raw = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("TagA", 2598919),
        ("polygenelubricants", -(2**31)),
        ("😀", 1772899),
        ("标签", 857175),
    ],
)
def test_golden_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@given(st.text(max_size=300))
def test_matches_the_reference_loop(text: str) -> None:
    assert java_string_hash(text) == _reference(text)


def test_long_strings_past_the_power_table() -> None:
    text = "k" * 5000 + "é"
    assert java_string_hash(text) == _reference(text)


def test_abs_hash_maps_min_value_to_zero() -> None:
    assert java_abs_hash("polygenelubricants") == 0
    negative = next(s for s in (f"key-{i}" for i in range(1000)) if java_string_hash(s) < 0)
    assert java_abs_hash(negative) == -java_string_hash(negative)
