"""The delay of each delay level: MessageStoreConfig.messageDelayLevel parsed.

Mirrors ScheduleMessageService#parseDelayLevel and #delayLevel2QueueId: level ``n`` (1-based) waits on
SCHEDULE_TOPIC_XXXX queue ``n - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DELAY_LEVELS: Final = 64


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """``delays_ms[level - 1]`` is the delay of ``level``, ms."""

    delays_ms: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> DelayLevels:
        """``"1s 5s 10s 30s 1m ... 2h"`` -> DelayLevels (``ms`` is ours, for tests; RocketMQ knows s, m, h, d).
        Raises ValueError for an empty list, more than MAX_DELAY_LEVELS levels, an unknown unit or a non-positive
        number."""
        delays: list[int] = []
        for word in text.split():
            suffix = "ms" if word.endswith("ms") else word[-1:]
            unit = _UNIT_MS.get(suffix)
            number = word[: -len(suffix)]
            if unit is None or not number.isdigit() or int(number) <= 0:
                raise ValueError(f"delay level {word!r}: a positive number followed by one of ms, s, m, h, d")
            delays.append(int(number) * unit)
        if not 0 < len(delays) <= MAX_DELAY_LEVELS:
            raise ValueError(f"{len(delays)} delay levels, 1 to {MAX_DELAY_LEVELS} expected")
        return cls(tuple(delays))

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def delay_ms(self, level: int) -> int:
        """The delay of ``level`` (1 .. max_level), ms. Raises IndexError outside."""
        if not 1 <= level <= self.max_level:
            raise IndexError(level)
        return self.delays_ms[level - 1]

    @staticmethod
    def queue_id(level: int) -> int:
        """ScheduleMessageService#delayLevel2QueueId."""
        return level - 1

    @staticmethod
    def level_of_queue(queue_id: int) -> int:
        """ScheduleMessageService#queueId2DelayLevel."""
        return queue_id + 1
