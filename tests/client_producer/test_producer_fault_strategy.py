"""MQFaultStrategy / LatencyFaultTolerance (RocketMQ 4.9.x): latency tables, isolation, pickOneAtLeast,
and queue selection with sendLatencyFaultEnable off and on — golden sequences worked out by hand."""

from __future__ import annotations

import pytest
from mq_client.producer.fault_strategy import (
    ISOLATION_LATENCY_MS,
    LATENCY_MAX_MS,
    NOT_AVAILABLE_DURATION_MS,
    LatencyFaultTolerance,
    MQFaultStrategy,
)
from mq_client.producer.testing import FakeClock, make_route
from mq_client.producer.topic_publish_info import SendWhichQueue, TopicPublishInfo, topic_route_data_to_publish_info
from mq_common.protocol import MessageQueue


def test_tables_are_rocketmq_4x() -> None:
    assert LATENCY_MAX_MS == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION_MS == (0, 0, 30000, 60000, 120000, 180000, 600000)
    assert ISOLATION_LATENCY_MS == 30000


@pytest.mark.parametrize(
    ("latency_ms", "duration_ms"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (1999, 60000),
        (2000, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (ISOLATION_LATENCY_MS, 600000),
    ],
)
def test_not_available_duration(latency_ms: int, duration_ms: int) -> None:
    assert MQFaultStrategy(True).compute_not_available_duration(latency_ms) == duration_ms


def test_update_fault_item_is_a_no_op_when_disabled() -> None:
    lft = LatencyFaultTolerance(FakeClock())
    MQFaultStrategy(False, lft).update_fault_item("broker-a", 5000, True)
    assert lft.items() == {}


def test_isolation_makes_a_broker_unavailable_for_ten_minutes() -> None:
    clock = FakeClock(1000)
    lft = LatencyFaultTolerance(clock)
    strategy = MQFaultStrategy(True, lft)
    strategy.update_fault_item("broker-a", 12, isolation=True)
    assert lft.items() == {"broker-a": (12, 1000 + 600000)}
    assert not lft.is_available("broker-a")
    clock.advance(599_999)
    assert not lft.is_available("broker-a")
    clock.advance(1)
    assert lft.is_available("broker-a")


def test_slow_send_isolates_by_table_and_fast_send_clears() -> None:
    clock = FakeClock(0)
    lft = LatencyFaultTolerance(clock)
    strategy = MQFaultStrategy(True, lft)
    strategy.update_fault_item("broker-a", 600, isolation=False)
    assert lft.items()["broker-a"] == (600, 30000)
    assert not lft.is_available("broker-a")
    strategy.update_fault_item("broker-a", 20, isolation=False)
    assert lft.is_available("broker-a")  # 20 ms -> 0 ms out
    assert lft.is_available("broker-never-seen")


def test_pick_one_at_least_single_item_and_empty() -> None:
    lft = LatencyFaultTolerance(FakeClock(0), SendWhichQueue(start=0))
    assert lft.pick_one_at_least() is None
    lft.update_fault_item("broker-a", 100, 60000)
    assert lft.pick_one_at_least() == "broker-a"


def test_pick_one_at_least_rotates_over_the_better_half() -> None:
    clock = FakeClock(0)
    lft = LatencyFaultTolerance(clock, SendWhichQueue(start=0))
    lft.update_fault_item("broker-d", 9000, 600000)  # unavailable, slowest
    lft.update_fault_item("broker-c", 100, 600000)  # unavailable
    lft.update_fault_item("broker-b", 300, 0)  # available
    lft.update_fault_item("broker-a", 200, 0)  # available, fastest
    # sorted: a (avail, 200), b (avail, 300), c (out, 100), d (out, 9000); half = 2
    # which_item_worst 1 -> a? 1 % 2 = 1 -> b; 2 % 2 = 0 -> a; 3 -> b
    assert [lft.pick_one_at_least() for _ in range(3)] == ["broker-b", "broker-a", "broker-b"]


def test_pick_one_at_least_orders_unavailable_by_latency_then_start() -> None:
    lft = LatencyFaultTolerance(FakeClock(0), SendWhichQueue(start=1))
    lft.update_fault_item("broker-x", 500, 90000)
    lft.update_fault_item("broker-y", 500, 30000)  # same latency, earlier start -> first
    lft.update_fault_item("broker-z", 800, 10)
    # half = 1 -> always the first: y
    assert lft.pick_one_at_least() == "broker-y"


def eight(start: int) -> TopicPublishInfo:
    return topic_route_data_to_publish_info(
        "T", make_route({"broker-a": 4, "broker-b": 4}), SendWhichQueue(start=start)
    )


def test_disabled_selection_is_round_robin_avoiding_last_broker() -> None:
    strategy = MQFaultStrategy(False, LatencyFaultTolerance(FakeClock()))
    info = eight(start=2)
    assert strategy.select_one_message_queue(info, None) == MessageQueue("T", "broker-a", 3)  # index 3
    assert strategy.select_one_message_queue(info, "broker-b") == MessageQueue("T", "broker-a", 0)  # 4,5,6,7 b; 8 a0
    assert strategy.select_one_message_queue(info, "broker-a") == MessageQueue("T", "broker-b", 0)  # 9 a1..11 a3, 12 b0


def test_enabled_selection_skips_unavailable_brokers() -> None:
    clock = FakeClock(0)
    lft = LatencyFaultTolerance(clock, SendWhichQueue(start=0))
    strategy = MQFaultStrategy(True, lft)
    strategy.update_fault_item("broker-b", 10, isolation=True)
    info = eight(start=3)
    # shared index 4 -> b0 (out); the probes walk a local copy: 5 b1, 6 b2, 7 b3 (out), 8 -> a0
    assert strategy.select_one_message_queue(info, None) == MessageQueue("T", "broker-a", 0)
    assert info.send_which_queue.value == 4  # one increment per call
    # shared index 5 -> b1..b3 out, a0 again; 4.9.x ignores lastBrokerName when enabled
    assert strategy.select_one_message_queue(info, "broker-a") == MessageQueue("T", "broker-a", 0)
    clock.advance(600_000)
    assert strategy.select_one_message_queue(info, None) == MessageQueue("T", "broker-b", 2)  # index 6 -> b2


def test_enabled_selection_when_every_broker_is_out_uses_pick_one_at_least() -> None:
    clock = FakeClock(0)
    lft = LatencyFaultTolerance(clock, SendWhichQueue(start=0))
    strategy = MQFaultStrategy(True, lft)
    strategy.update_fault_item("broker-a", 700, isolation=False)  # out 30 s, latency 700
    strategy.update_fault_item("broker-b", 2500, isolation=False)  # out 120 s, latency 2500
    info = eight(start=10)
    # probes at 11..18 all unavailable; pickOneAtLeast: sorted [a (700), b (2500)], half = 1 -> a;
    # selectOneMessageQueue() takes index 12, then queue id = 13 % 4 = 1 on broker-a
    assert strategy.select_one_message_queue(info, None) == MessageQueue("T", "broker-a", 1)
    assert info.send_which_queue.value == 13


def test_pick_one_at_least_of_a_foreign_broker_is_forgotten() -> None:
    clock = FakeClock(0)
    lft = LatencyFaultTolerance(clock, SendWhichQueue(start=0))
    strategy = MQFaultStrategy(True, lft)
    info = topic_route_data_to_publish_info("T", make_route({"broker-a": 2}), SendWhichQueue(start=0))
    strategy.update_fault_item("broker-a", 10, isolation=True)
    strategy.update_fault_item("broker-zz", 1, isolation=True)  # not serving T, lowest latency
    # probes 1, 2 unavailable; pick broker-zz (lower latency); it has no queue of T -> removed;
    # plain round robin: index 2 -> a0
    assert strategy.select_one_message_queue(info, None) == MessageQueue("T", "broker-a", 0)
    assert "broker-zz" not in lft.items()
    assert "broker-a" in lft.items()


@pytest.mark.parametrize("enabled", [False, True])
def test_isolating_failures_reach_the_broker_failure_listener(enabled: bool) -> None:
    strategy = MQFaultStrategy(enabled, LatencyFaultTolerance(FakeClock()))
    failed: list[str] = []
    strategy.broker_failure_listener = failed.append
    strategy.update_fault_item("broker-a", 12, isolation=False)
    strategy.update_fault_item("broker-b", 3000, isolation=True)
    assert failed == ["broker-b"]
