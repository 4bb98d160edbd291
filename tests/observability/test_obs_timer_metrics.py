"""The broker's timer and delay-level figures (issue 32): BrokerMetrics' hooks driven as the timer store and
ScheduleMessageService call them, then /metrics scraped over HTTP from the broker's metrics server."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from mq_broker.metrics import TIMER_LATENESS_BUCKETS_MS, BrokerMetrics
from mq_common.metrics import OTHER_TOPIC, NodeIdentity
from obs_testkit import check_exposition
from prometheus_client.parser import text_string_to_metric_families

NODE = {"cluster": "c1", "node_type": "broker", "node_id": "broker-a"}
TIMER_FAMILIES = {
    "rocketmq_timer_enqueue",
    "rocketmq_timer_dequeue",
    "rocketmq_timing_messages",
    "mq_broker_schedule_dequeue",
    "mq_broker_timer_lateness_ms",
    "mq_broker_schedule_offset_behind",
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def served() -> Iterator[BrokerMetrics]:
    metrics = BrokerMetrics(NodeIdentity(**NODE), max_topics=2, flush_disk_type="ASYNC_FLUSH")
    metrics.start_server("127.0.0.1", 0)
    try:
        yield metrics
    finally:
        metrics.stop_server()


def scrape(metrics: BrokerMetrics) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=10) as resp:
        text: str = resp.read().decode()
    return text


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def labels(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset((NODE | kw).items())


def bucket(got: Samples, le: float | str, **kw: str) -> float:
    bound = le if isinstance(le, str) else repr(float(le))
    return got[("mq_broker_timer_lateness_ms_bucket", labels(**kw) | {("le", bound)})]


def test_enqueue_and_dequeue_count_per_real_topic_and_lateness_lands_in_its_buckets(served: BrokerMetrics) -> None:
    served.on_timer_enqueue("orders", 3)
    served.on_timer_enqueue("orders", 2)
    served.on_timer_enqueue("orders", 0)  # nothing entered: no count
    served.on_timer_dequeue("orders", [5.0, 40.0, 900.0])
    served.on_timer_dequeue("orders", [6200.0])
    served.on_timer_dequeue("orders", [])  # an empty firing round counts nothing
    served.on_delay_level_dequeue("payments", [0.0, 1200.0])
    got = samples(scrape(served))
    assert got[("rocketmq_timer_enqueue_total", labels(topic="orders"))] == 5
    assert got[("rocketmq_timer_dequeue_total", labels(topic="orders"))] == 4
    assert got[("mq_broker_schedule_dequeue_total", labels(topic="payments"))] == 2
    assert ("rocketmq_timer_dequeue_total", labels(topic="payments")) not in got
    timer = {"topic": "orders", "timer_type": "timer"}
    assert bucket(got, 10, **timer) == 1
    assert bucket(got, 50, **timer) == 2
    assert bucket(got, 1000, **timer) == 3
    assert bucket(got, 5000, **timer) == 3
    assert bucket(got, 7500, **timer) == 4
    assert bucket(got, "+Inf", **timer) == 4
    assert got[("mq_broker_timer_lateness_ms_sum", labels(**timer))] == 5.0 + 40.0 + 900.0 + 6200.0
    delay = {"topic": "payments", "timer_type": "delay_level"}
    assert bucket(got, 10, **delay) == 1
    assert bucket(got, 1000, **delay) == 1
    assert bucket(got, 1500, **delay) == 2
    assert got[("mq_broker_timer_lateness_ms_count", labels(**delay))] == 2


def test_lateness_buckets_resolve_the_first_ten_seconds() -> None:
    """At least a dozen bounds between 10 ms and 10 s (p50/p99 there are what the dashboard and the alert read),
    5 s exactly a bound (the alert's threshold), and the last bound a minute."""
    within = [b for b in TIMER_LATENESS_BUCKETS_MS if 10 <= b <= 10_000]
    assert len(within) >= 12
    assert 5000.0 in TIMER_LATENESS_BUCKETS_MS
    assert min(TIMER_LATENESS_BUCKETS_MS) == 10.0
    assert max(TIMER_LATENESS_BUCKETS_MS) == 60_000.0
    assert list(TIMER_LATENESS_BUCKETS_MS) == sorted(set(TIMER_LATENESS_BUCKETS_MS))


def test_negative_lateness_counts_as_on_time(served: BrokerMetrics) -> None:
    served.on_timer_dequeue("t", [-3.0, 20.0])
    got = samples(scrape(served))
    assert bucket(got, 10, topic="t", timer_type="timer") == 1
    assert got[("mq_broker_timer_lateness_ms_sum", labels(topic="t", timer_type="timer"))] == 20.0


def test_backlog_and_schedule_behind_are_read_at_scrape_time_with_topics_bounded(served: BrokerMetrics) -> None:
    pending = {"a": 4, "b": 1}
    behind = {3: 7, 1: 2}
    served.bind_timer_backlog(lambda: pending)
    served.bind_schedule_behind(lambda: behind)
    got = samples(scrape(served))
    assert got[("rocketmq_timing_messages", labels(topic="a"))] == 4
    assert got[("rocketmq_timing_messages", labels(topic="b"))] == 1
    assert got[("mq_broker_schedule_offset_behind", labels(delay_level="1"))] == 2
    assert got[("mq_broker_schedule_offset_behind", labels(delay_level="3"))] == 7
    # max_topics=2: later topics add up under _other, and the figures follow the callables at each scrape.
    pending.update(c=5, d=6, a=0)
    behind[3] = 0
    got = samples(scrape(served))
    assert got[("rocketmq_timing_messages", labels(topic="a"))] == 0
    assert got[("rocketmq_timing_messages", labels(topic=OTHER_TOPIC))] == 11
    assert ("rocketmq_timing_messages", labels(topic="c")) not in got
    assert got[("mq_broker_schedule_offset_behind", labels(delay_level="3"))] == 0


def test_a_failing_backlog_callable_yields_no_sample_and_the_scrape_still_answers(served: BrokerMetrics) -> None:
    def broken() -> dict[str, int]:
        raise RuntimeError("timer store not started")

    served.bind_timer_backlog(broken)
    served.on_timer_enqueue("t", 1)
    got = samples(scrape(served))
    assert not [k for k in got if k[0] == "rocketmq_timing_messages"]
    assert got[("rocketmq_timer_enqueue_total", labels(topic="t"))] == 1


def test_timer_topics_share_the_topic_bound_with_the_other_families(served: BrokerMetrics) -> None:
    for topic in ("t1", "t2", "t3"):
        served.on_timer_enqueue(topic, 1)
        served.on_timer_dequeue(topic, [100.0])
    got = samples(scrape(served))
    assert got[("rocketmq_timer_enqueue_total", labels(topic=OTHER_TOPIC))] == 1
    assert got[("rocketmq_timer_dequeue_total", labels(topic=OTHER_TOPIC))] == 1
    assert bucket(got, "+Inf", topic=OTHER_TOPIC, timer_type="timer") == 1


def test_timer_families_match_the_metric_list(served: BrokerMetrics) -> None:
    served.on_timer_enqueue("t", 1)
    served.on_timer_dequeue("t", [1.0])
    served.on_delay_level_dequeue("t", [1.0])
    served.bind_timer_backlog(lambda: {"t": 1})
    served.bind_schedule_behind(lambda: {1: 0})
    text = scrape(served)
    assert check_exposition(text, "broker", require_all=False) == []
    exported = {f.name for f in text_string_to_metric_families(text) if f.samples}
    assert exported >= TIMER_FAMILIES
