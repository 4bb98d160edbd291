"""Queue selection with broker fault isolation. Mirrors org.apache.rocketmq.client.latency.{MQFaultStrategy,
LatencyFaultToleranceImpl} of RocketMQ 4.9.x (its latencyMax and notAvailableDuration tables and rules).

With ``send_latency_fault_enable`` off (the default) a send picks the next queue round robin and, on a retry,
skips the broker that just failed. With it on, every send records its latency: a broker whose last send took
at least ``LATENCY_MAX_MS[i]`` is unavailable for ``NOT_AVAILABLE_DURATION_MS[i]``; a failed send counts as
``ISOLATION_LATENCY_MS`` (30 s, i.e. 10 minutes out). When every broker is out, the least bad one is used.
RocketMQ 5.x's tables (a failure = 10 s latency = 10 s out) are selectable: ``LATENCY_TABLES["5.x"]``.

Runs on the producer's one asyncio loop; the clock is injectable (milliseconds, monotonic by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue

from mq_client.producer.topic_publish_info import SendWhichQueue, TopicPublishInfo

LATENCY_MAX_MS: Final[tuple[int, ...]] = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS: Final[tuple[int, ...]] = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS: Final = 30000
_log = get_logger("mq_client.producer.fault_strategy")

assert len(LATENCY_MAX_MS) == len(NOT_AVAILABLE_DURATION_MS)
assert list(LATENCY_MAX_MS) == sorted(LATENCY_MAX_MS)


@dataclass(frozen=True, slots=True)
class LatencyTables:
    """One release's MQFaultStrategy tables: ``latency_max_ms[i]`` -> ``not_available_duration_ms[i]``, and
    the latency a failed send counts as (``isolation_latency_ms``). Raises ValueError for mismatched or
    unsorted tables."""

    latency_max_ms: tuple[int, ...]
    not_available_duration_ms: tuple[int, ...]
    isolation_latency_ms: int

    def __post_init__(self) -> None:
        if len(self.latency_max_ms) != len(self.not_available_duration_ms):
            raise ValueError("latency_max_ms and not_available_duration_ms must have the same length")
        if list(self.latency_max_ms) != sorted(self.latency_max_ms):
            raise ValueError("latency_max_ms must be ascending")


# RocketMQ 4.9.x MQFaultStrategy (the default) and 5.x MQFaultStrategy ({50, 100, 550, 1800, 3000, 5000,
# 15000} / {0, 0, 2000, 5000, 6000, 10000, 30000}; updateFaultItem counts a failure as 10000 ms).
LATENCY_TABLES: Final[dict[str, LatencyTables]] = {
    "4.x": LatencyTables(LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS, ISOLATION_LATENCY_MS),
    "5.x": LatencyTables((50, 100, 550, 1800, 3000, 5000, 15000), (0, 0, 2000, 5000, 6000, 10000, 30000), 10000),
}

ClockMs = Callable[[], int]


def monotonic_ms() -> int:
    """Milliseconds from the monotonic clock (the producer's default clock)."""
    return time.monotonic_ns() // 1_000_000


class FaultItem:
    """A broker's last latency and when it is available again. Mirrors LatencyFaultToleranceImpl.FaultItem."""

    __slots__ = ("current_latency_ms", "isolated", "name", "start_timestamp_ms")

    def __init__(self, name: str, current_latency_ms: int, start_timestamp_ms: int) -> None:
        self.name = name
        self.current_latency_ms = current_latency_ms
        self.start_timestamp_ms = start_timestamp_ms
        self.isolated = False  # an isolation_started line was logged and its end not yet

    def is_available(self, now_ms: int) -> bool:
        """True once ``now_ms`` reached ``start_timestamp_ms``."""
        return now_ms - self.start_timestamp_ms >= 0


class LatencyFaultTolerance:
    """Per-broker fault items. Mirrors LatencyFaultToleranceImpl (4.9.x)."""

    def __init__(self, clock_ms: ClockMs = monotonic_ms, which_item_worst: SendWhichQueue | None = None) -> None:
        self._clock_ms = clock_ms
        self._items: dict[str, FaultItem] = {}
        self._which_item_worst = which_item_worst if which_item_worst is not None else SendWhichQueue()

    def update_fault_item(self, name: str, current_latency_ms: int, not_available_duration_ms: int) -> None:
        """Record ``current_latency_ms``; ``name`` is unavailable for the next ``not_available_duration_ms``."""
        now = self._clock_ms()
        start = now + not_available_duration_ms
        item = self._items.get(name)
        if item is None:
            item = self._items[name] = FaultItem(name, current_latency_ms, start)
        else:
            item.current_latency_ms = current_latency_ms
            item.start_timestamp_ms = start
        if not_available_duration_ms > 0 and not item.isolated:
            item.isolated = True
            _log.info(
                "broker_isolation_started",
                broker_name=name,
                latency_ms=current_latency_ms,
                not_available_duration_ms=not_available_duration_ms,
            )
        elif not_available_duration_ms <= 0 and item.isolated:
            item.isolated = False
            _log.info("broker_isolation_ended", broker_name=name, latency_ms=current_latency_ms)

    def is_available(self, name: str) -> bool:
        """True when ``name`` has no fault item or its unavailability has passed."""
        item = self._items.get(name)
        if item is None:
            return True
        if not item.is_available(self._clock_ms()):
            return False
        if item.isolated:
            item.isolated = False
            _log.info("broker_isolation_ended", broker_name=name, latency_ms=item.current_latency_ms)
        return True

    def remove(self, name: str) -> None:
        """Forget ``name``'s fault item (no-op when absent)."""
        self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker: items sorted (available first, lower latency, earlier start); one of the
        better half, rotating with a counter; the only item when there is one; None when there is none.

        Mirrors LatencyFaultToleranceImpl#pickOneAtLeast.
        """
        if not self._items:
            return None
        now = self._clock_ms()
        ranked = sorted(
            self._items.values(),
            key=lambda it: (not it.is_available(now), it.current_latency_ms, it.start_timestamp_ms),
        )
        half = len(ranked) // 2
        if half <= 0:
            return ranked[0].name
        return ranked[self._which_item_worst.increment_and_get() % half].name

    def items(self) -> dict[str, tuple[int, int]]:
        """Snapshot ``{broker name: (current latency ms, available-again timestamp ms)}`` (for tests/metrics)."""
        return {name: (it.current_latency_ms, it.start_timestamp_ms) for name, it in self._items.items()}


class MQFaultStrategy:
    """Chooses the queue of each send attempt and learns from its outcome. Mirrors MQFaultStrategy (4.9.x)."""

    def __init__(
        self,
        send_latency_fault_enable: bool = False,
        latency_fault_tolerance: LatencyFaultTolerance | None = None,
        latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
        isolation_latency_ms: int | None = None,
    ) -> None:
        """``isolation_latency_ms`` None: the module's ISOLATION_LATENCY_MS as it is at construction time.
        Use :meth:`with_tables` to build one from a :data:`LATENCY_TABLES` entry."""
        if len(latency_max_ms) != len(not_available_duration_ms):
            raise ValueError("latency_max_ms and not_available_duration_ms must have the same length")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_fault_tolerance = latency_fault_tolerance or LatencyFaultTolerance()
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_duration_ms = tuple(not_available_duration_ms)
        self.isolation_latency_ms = ISOLATION_LATENCY_MS if isolation_latency_ms is None else isolation_latency_ms
        # Told the broker name of every isolating failure, whether or not latency fault tolerance is on (the
        # producer refreshes that broker's routes: a failed-over group's new master is found within seconds).
        self.broker_failure_listener: Callable[[str], None] | None = None

    @classmethod
    def with_tables(
        cls,
        tables: LatencyTables,
        send_latency_fault_enable: bool = False,
        latency_fault_tolerance: LatencyFaultTolerance | None = None,
    ) -> MQFaultStrategy:
        """A strategy using ``tables`` (e.g. ``LATENCY_TABLES["5.x"]``)."""
        return cls(
            send_latency_fault_enable,
            latency_fault_tolerance,
            tables.latency_max_ms,
            tables.not_available_duration_ms,
            tables.isolation_latency_ms,
        )

    def select_one_message_queue(self, tp_info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        """The queue for the next attempt. Requires ``tp_info.ok()``.

        Off: TopicPublishInfo#selectOneMessageQueue(lastBrokerName). On: the first queue from the next
        round-robin index whose broker is available; else a queue on pickOneAtLeast()'s broker with id
        ``next index % its write queue count``; else plain round robin (4.9.x ignores ``last_broker_name``
        here: a failed broker is isolated instead).
        """
        if not self.send_latency_fault_enable:
            return tp_info.select_one_message_queue(last_broker_name)
        queues = tp_info.message_queues
        lft = self.latency_fault_tolerance
        index = tp_info.send_which_queue.increment_and_get()
        for _ in range(len(queues)):
            mq = queues[index % len(queues)]
            index += 1
            if lft.is_available(mq.broker_name):
                return mq
        not_best = lft.pick_one_at_least()
        if not_best is None:
            return tp_info.select_one_message_queue()
        write_queue_nums = tp_info.write_queue_nums_by_broker(not_best)
        if write_queue_nums > 0:
            mq = tp_info.select_one_message_queue()
            return MessageQueue(mq.topic, not_best, tp_info.send_which_queue.increment_and_get() % write_queue_nums)
        lft.remove(not_best)
        return tp_info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency_ms: int, isolation: bool) -> None:
        """After a send to ``broker_name``: record its latency (``isolation_latency_ms`` when ``isolation``).
        No-op unless ``send_latency_fault_enable``, except that an isolating failure is always reported to
        ``broker_failure_listener``. Mirrors MQFaultStrategy#updateFaultItem."""
        if isolation and self.broker_failure_listener is not None:
            self.broker_failure_listener(broker_name)
        if not self.send_latency_fault_enable:
            return
        duration = self.compute_not_available_duration(self.isolation_latency_ms if isolation else current_latency_ms)
        self.latency_fault_tolerance.update_fault_item(broker_name, current_latency_ms, duration)

    def compute_not_available_duration(self, current_latency_ms: int) -> int:
        """``NOT_AVAILABLE_DURATION_MS[i]`` for the largest i with latency >= ``LATENCY_MAX_MS[i]``, else 0."""
        for bound, duration in zip(
            reversed(self.latency_max_ms), reversed(self.not_available_duration_ms), strict=True
        ):
            if current_latency_ms >= bound:
                return duration
        return 0
