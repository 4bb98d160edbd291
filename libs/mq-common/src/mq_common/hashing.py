"""Java ``String#hashCode``, the hash RocketMQ uses for tag codes, index keys and sharding keys.

The numbers must equal a Java broker's/client's: ConsumeQueue tag codes (MessageExtBrokerInner#
tagsString2tagsCode), IndexFile slots (IndexFile#indexKeyHashMethod) and SelectMessageQueueByHash.
Pure functions, any thread. The hash is a dot product of the UTF-16 code units with powers of 31 (mod 2^32),
computed with C-level ``map``/``sum`` over a precomputed power table instead of a Python loop.
"""

from __future__ import annotations

import operator
import sys
from typing import Final

_U32_MASK: Final = 0xFFFFFFFF
_TABLE_LEN: Final = 4096
# _POW31_DESC[_TABLE_LEN - n:] == [31^(n-1), ..., 31^1, 31^0] (mod 2^32).
_POW31_DESC: Final = [pow(31, _TABLE_LEN - 1 - i, 1 << 32) for i in range(_TABLE_LEN)]
_UTF16_NATIVE: Final = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def _code_units(text: str) -> bytes | memoryview:
    if text.isascii():
        return text.encode("ascii")
    return memoryview(text.encode(_UTF16_NATIVE)).cast("H")


def java_string_hash_u32(text: str) -> int:
    """``String#hashCode`` of ``text`` as an unsigned 32-bit value."""
    units = _code_units(text)
    n = len(units)
    if n <= _TABLE_LEN:
        total: int = sum(map(operator.mul, units, _POW31_DESC[_TABLE_LEN - n :]))
        return total & _U32_MASK
    h = 0
    for unit in units:
        h = (31 * h + unit) & _U32_MASK
    return h


def java_string_hash(text: str) -> int:
    """``String#hashCode`` of ``text``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, signed int32."""
    h = java_string_hash_u32(text)
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs_hash(text: str) -> int:
    """``Math.abs(text.hashCode())`` with Integer.MIN_VALUE mapped to 0 (IndexFile#indexKeyHashMethod)."""
    u = java_string_hash_u32(text)
    if u < 0x80000000:
        return u
    return 0 if u == 0x80000000 else (1 << 32) - u
