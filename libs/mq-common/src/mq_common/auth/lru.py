"""A bounded least-recently-used map: the one cache shape the auth pieces share (verified signatures, learned
client clocks, fetched users and ACLs, authorisation decisions).

Not thread-safe: use it from one asyncio loop (or guard it). Every instance has a hard bound on its entries.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class BoundedLru(Generic[_K, _V]):
    """At most ``max_entries`` entries; putting one more evicts the least recently used. Raises ValueError for a
    bound below 1."""

    __slots__ = ("_entries", "_max_entries")

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"an LRU needs room for at least one entry, not {max_entries}")
        self._max_entries = max_entries
        self._entries: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        """The value of ``key`` (now the most recently used), or None."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: _K) -> _V | None:
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
