"""The time wheel of pending timers (mq_broker.timer.timer_wheel) and the delay-level table
(mq_broker.schedule.delay_levels): due order, never early, bounded takes, per-topic counts and ranges."""

from __future__ import annotations

import pytest
from mq_broker.schedule.delay_levels import DelayLevels
from mq_broker.timer.timer_wheel import TimerWheel


def test_take_due_is_never_early_and_in_due_second_order() -> None:
    wheel = TimerWheel()
    wheel.add(5_500, 100, 10, 0, "A")
    wheel.add(3_200, 200, 10, 1, "B")
    wheel.add(5_100, 300, 10, 2, "A")
    wheel.add(3_900, 400, 10, 3, "A")
    assert wheel.take_due(3_199, 100) == []
    assert [e.commit_log_offset for e in wheel.take_due(3_500, 100)] == [200], "3,900 is not due yet"
    assert [e.commit_log_offset for e in wheel.take_due(5_200, 100)] == [400, 300]
    assert len(wheel) == 1
    assert wheel.pending_by_topic() == {"A": 1}
    assert wheel.earliest_ms() == 5_500
    assert wheel.min_queue_offset() == 0
    (last,) = wheel.take_due(9_000, 100)
    assert (last.deliver_ms, last.size, last.queue_offset, last.topic) == (5_500, 10, 0, "A")
    assert len(wheel) == 0
    assert wheel.earliest_ms() is None
    assert wheel.min_queue_offset() is None


def test_take_due_is_bounded_and_keeps_enqueue_order() -> None:
    wheel = TimerWheel()
    for i in range(10):
        wheel.add(1_000 + i, i, 1, i, "T")
    first = wheel.take_due(5_000, 4)
    second = wheel.take_due(5_000, 4)
    rest = wheel.take_due(5_000, 4)
    assert [e.queue_offset for e in first + second + rest] == list(range(10))
    assert len(rest) == 2
    assert len(wheel) == 0


def test_contains_and_topic_range() -> None:
    wheel = TimerWheel()
    wheel.add(2_000, 11, 1, 0, "A")
    wheel.add(90_000, 12, 1, 1, "A")
    wheel.add(50_000, 13, 1, 2, "B")
    assert wheel.contains(2_000, 11)
    assert not wheel.contains(2_000, 12)
    assert not wheel.contains(7_000, 11)
    assert wheel.topic_range("A") == (2, 2_000, 90_000)
    assert wheel.topic_range("B") == (1, 50_000, 50_000)
    assert wheel.topic_range("C") == (0, 0, 0)
    wheel.add(50_700, 14, 1, 3, "A")  # a second shared by two topics
    wheel.add(50_200, 15, 1, 4, "A")
    assert wheel.topic_range("A") == (4, 2_000, 90_000)
    assert wheel.topic_range("B") == (1, 50_000, 50_000)
    steps = list(wheel.topic_range_steps("A", slots_per_step=1))
    assert steps[-1] == (4, 2_000, 90_000)
    assert steps[:-1] == [None] * 3, "one yield per slot"
    assert sorted(e.commit_log_offset for e in wheel.entries()) == [11, 12, 13, 14, 15]


def test_delay_levels_parse_rocketmq_default_and_refuse_garbage() -> None:
    levels = DelayLevels.parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert levels.max_level == 18
    assert (levels.delay_ms(1), levels.delay_ms(3), levels.delay_ms(18)) == (1_000, 10_000, 7_200_000)
    assert (DelayLevels.queue_id(3), DelayLevels.level_of_queue(2)) == (2, 3)
    assert DelayLevels.parse("250ms 1d").delays_ms == (250, 86_400_000)
    with pytest.raises(IndexError):
        levels.delay_ms(19)
    for bad in ("", "5x", "0s", "s", "-1s"):
        with pytest.raises(ValueError, match="delay level"):
            DelayLevels.parse(bad)
