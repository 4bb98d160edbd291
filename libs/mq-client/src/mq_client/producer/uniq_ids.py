"""UNIQ_KEYs many at a time, for MessageBatches. Mirrors MessageClientIDSetter#createUniqID.

Same layout as :class:`mq_common.message_id.UniqueIdGenerator` (it extends it): ip (4) | pid (2) | random instance
id (4) | ms since the start of the month (4) | counter (2), 32 hex chars. Its own random instance id keeps its ids
apart from the process-wide generator's. Safe from any thread (the counter is an itertools.count).
"""

from __future__ import annotations

import itertools
import time
from typing import Final

from mq_common.message_id import UniqueIdGenerator

_HEX4: Final = tuple(f"{i:04X}" for i in range(1 << 16))  # the counter's 2 bytes as hex


class BulkUniqueIdGenerator(UniqueIdGenerator):
    """:meth:`create_many` reads the clock once for ``count`` ids (consecutive counter values)."""

    def create_many(self, count: int) -> list[str]:
        """``count`` new ids, unique as :meth:`create`'s."""
        now_ms = int(time.time() * 1000)
        if now_ms >= self._next_month_start_ms:
            self._set_start(now_ms)
        head = f"{self._prefix}{max(0, now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}"
        return [head + _HEX4[c & 0xFFFF] for c in itertools.islice(self._counter, count)]


_BULK = BulkUniqueIdGenerator()


def create_uniq_ids(count: int) -> list[str]:
    """``count`` UNIQ_KEYs from this process's bulk generator."""
    return _BULK.create_many(count)
