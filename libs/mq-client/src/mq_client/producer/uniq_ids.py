"""UNIQ_KEYs many at a time, for MessageBatches. Mirrors MessageClientIDSetter#createUniqID.

Same layout as :class:`mq_common.message_id.UniqueIdGenerator` (it extends it): ip (4) | pid (2) | random instance
id (4) | ms since the start of the month (4) | counter (2), 32 hex chars. Its own random instance id keeps its ids
apart from the process-wide generator's. Safe from any thread (the counter is an itertools.count).
"""

from __future__ import annotations

import time

from mq_common.message_id import UniqueIdGenerator


class BulkUniqueIdGenerator(UniqueIdGenerator):
    """:meth:`create_many` reads the clock once for ``count`` ids (consecutive counter values)."""

    def create_many(self, count: int) -> list[str]:
        """``count`` new ids, unique as :meth:`create`'s."""
        now_ms = int(time.time() * 1000)
        if now_ms >= self._next_month_start_ms:
            self._set_start(now_ms)
        head = f"{self._prefix}{max(0, now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}"
        counter = self._counter
        return [f"{head}{next(counter) & 0xFFFF:04X}" for _ in range(count)]


_BULK = BulkUniqueIdGenerator()


def create_uniq_ids(count: int) -> list[str]:
    """``count`` UNIQ_KEYs from this process's bulk generator."""
    return _BULK.create_many(count)
