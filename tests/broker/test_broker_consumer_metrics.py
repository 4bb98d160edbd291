"""Consumer metrics (mq_broker.consumer_metrics and BrokerMetrics' consumer hooks) over a real DefaultMessageStore:
lag, lag latency, in flight, queueing latency and ready computed from an offset table, the store's queues and POP's
in-flight figures; out / DLQ counters; the (topic, group) cap; scrape resilience."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from mq_broker.consumer_metrics import (
    CONSUMER_LABELS,
    MAX_SCRAPE_QUEUES,
    SNAPSHOT_ATTEMPTS,
    ConsumerLag,
    ConsumerLagSources,
    ConsumerPairLabels,
)
from mq_broker.metrics import BrokerMetrics
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.topic_config import TopicConfigManager
from mq_common.metrics import NODE_LABELS, NodeIdentity
from prometheus_client.parser import text_string_to_metric_families

TOPIC = "LagTopic"
# Messages stored per queue of TOPIC by the `store` fixture.
PER_QUEUE = {0: 5, 1: 3}
CONSUMER_GAUGES = (
    "rocketmq_consumer_lag_messages",
    "rocketmq_consumer_lag_latency",
    "rocketmq_consumer_inflight_messages",
    "rocketmq_consumer_queueing_latency",
    "rocketmq_consumer_ready_messages",
)


class OffsetTable:
    """A ConsumerOffsetManager stand-in: the ``offset_table`` the collector reads ("topic@group" -> offsets)."""

    def __init__(self, table: dict[str, dict[int, int]]) -> None:
        self.table = table

    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]:
        return self.table


class BrokenTable:
    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]:
        raise RuntimeError("dictionary changed size during iteration")


class FlakyTable(OffsetTable):
    """A table whose first ``failures`` reads fail as a dict the event loop grows during the copy."""

    def __init__(self, table: dict[str, dict[int, int]], failures: int) -> None:
        super().__init__(table)
        self.failures = failures

    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("dictionary changed size during iteration")
        return self.table


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DefaultMessageStore]:
    """A started store holding PER_QUEUE messages of TOPIC (queue 0 first, then queue 1)."""
    opened = open_store(store_config(tmp_path / "store", file_size=64 * 1024))
    try:
        for queue_id, count in PER_QUEUE.items():
            results = await opened.put_messages([message(i, TOPIC, queue_id) for i in range(count)])
            assert all(r.is_ok for r in results)
        yield opened
    finally:
        opened.shutdown()


def rows_by_labels(rows: list[ConsumerLag]) -> dict[tuple[str, str, str, str], ConsumerLag]:
    return {row.labels: row for row in rows}


def stored_ms(store: DefaultMessageStore, queue_id: int, offset: int) -> int:
    found = store.get_message_store_timestamp(TOPIC, queue_id, offset)
    assert found > 0
    return found


def test_pull_group_lag_counts_from_committed_offsets(store: DefaultMessageStore) -> None:
    offsets = OffsetTable({f"{TOPIC}@g1": {0: 2, 1: 3}})
    rows = ConsumerLagSources(offsets, store).compute()
    assert rows == [
        ConsumerLag(
            labels=(TOPIC, "g1", "false", "false"),
            lag_messages=3,
            ready_messages=3,
            inflight_messages=0,
            earliest_unconsumed_ms=stored_ms(store, 0, 2),
            earliest_ready_ms=stored_ms(store, 0, 2),
        )
    ]


def test_pop_group_adds_inflight_and_dates_lag_from_the_first_unacked_message(store: DefaultMessageStore) -> None:
    offsets = OffsetTable({f"{TOPIC}@pop": {0: 5, 1: 1}})
    per_queue = {("pop", TOPIC, 0): 2}
    sources = ConsumerLagSources(
        offsets,
        store,
        inflight=lambda: {("pop", TOPIC): 2},
        inflight_in_queue=lambda group, topic, queue_id: per_queue.get((group, topic, queue_id), 0),
    )
    [row] = sources.compute()
    assert (row.lag_messages, row.ready_messages, row.inflight_messages) == (4, 2, 2)
    assert row.earliest_ready_ms == stored_ms(store, 1, 1)
    # queue 0 was written first: its first unacked message (offset 5 - 2) is the oldest unconsumed one
    assert row.earliest_unconsumed_ms == stored_ms(store, 0, 3)
    assert row.earliest_unconsumed_ms <= row.earliest_ready_ms


def test_caught_up_group_has_zero_lag_and_no_store_time(store: DefaultMessageStore) -> None:
    offsets = OffsetTable({f"{TOPIC}@done": dict(PER_QUEUE), f"{TOPIC}@fresh": {0: -1}})
    rows = rows_by_labels(ConsumerLagSources(offsets, store).compute())
    for group in ("done", "fresh"):
        row = rows[(TOPIC, group, "false", "false")]
        assert (row.lag_messages, row.earliest_unconsumed_ms, row.earliest_ready_ms) == (0, 0, 0)


def test_retry_system_and_inflight_only_pairs_are_labelled(store: DefaultMessageStore) -> None:
    offsets = OffsetTable(
        {
            "%RETRY%g1@g1": {0: 0},
            f"{TOPIC}@CID_RMQ_SYS_REVIVE_GROUP": {0: 0},
            "rmq_sys_REVIVE_LOG_c1@g2": {0: 0},
            "no-separator": {0: 0},
        }
    )
    sources = ConsumerLagSources(offsets, store, inflight=lambda: {("late", TOPIC): 7})
    rows = rows_by_labels(sources.compute())
    assert set(rows) == {
        ("%RETRY%g1", "g1", "true", "false"),
        (TOPIC, "CID_RMQ_SYS_REVIVE_GROUP", "false", "true"),
        ("rmq_sys_REVIVE_LOG_c1", "g2", "false", "true"),
        (TOPIC, "late", "false", "false"),
    }
    assert rows[(TOPIC, "CID_RMQ_SYS_REVIVE_GROUP", "false", "true")].lag_messages == PER_QUEUE[0]
    assert rows[("%RETRY%g1", "g1", "true", "false")].lag_messages == 0  # an empty queue: nothing stored
    late = rows[(TOPIC, "late", "false", "false")]
    assert (late.lag_messages, late.inflight_messages, late.ready_messages) == (7, 7, 0)


def test_a_table_changed_during_the_copy_is_copied_again(store: DefaultMessageStore) -> None:
    offsets = FlakyTable({f"{TOPIC}@g1": {0: 0}}, failures=SNAPSHOT_ATTEMPTS - 1)
    [row] = ConsumerLagSources(offsets, store).compute()
    assert row.lag_messages == PER_QUEUE[0]
    with pytest.raises(RuntimeError):
        ConsumerLagSources(FlakyTable({}, failures=SNAPSHOT_ATTEMPTS), store).compute()


def test_pairs_past_the_cap_fold_into_other_summed_and_earliest(store: DefaultMessageStore) -> None:
    offsets = OffsetTable({f"{TOPIC}@a": {0: 4}, f"{TOPIC}@b": {0: 1}, f"{TOPIC}@c": {1: 0}})
    rows = ConsumerLagSources(offsets, store, labels=ConsumerPairLabels(1)).compute()
    assert [(r.labels, r.lag_messages) for r in rows] == [
        ((TOPIC, "a", "false", "false"), 1),
        (("_other", "_other", "false", "false"), 4 + 3),
    ]
    assert rows[1].earliest_ready_ms == stored_ms(store, 0, 1)  # b's queue 0 was written before c's queue 1


def test_one_scrape_reads_a_bounded_number_of_queues(store: DefaultMessageStore) -> None:
    queues = dict.fromkeys(range(MAX_SCRAPE_QUEUES + 10), 0)
    queues[0] = 5  # caught up on the only queue with messages: nothing to read
    calls: list[int] = []

    class CountingStore:
        def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
            calls.append(queue_id)
            return store.get_max_offset_in_queue(topic, queue_id)

        def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
            return store.get_message_store_timestamp(topic, queue_id, queue_offset)

    offsets = OffsetTable({f"{TOPIC}@wide": queues, f"{TOPIC}@next": {1: 0}})
    rows = rows_by_labels(ConsumerLagSources(offsets, CountingStore()).compute())
    assert len(calls) == MAX_SCRAPE_QUEUES
    assert rows[(TOPIC, "next", "false", "false")].lag_messages == 0  # past the budget: not read


def scrape(metrics: BrokerMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def broker_metrics(tmp_path: Path, store: DefaultMessageStore, max_pairs: int = 16) -> BrokerMetrics:
    metrics = BrokerMetrics(
        NodeIdentity("c1", "broker", "broker-a"),
        max_topics=16,
        flush_disk_type="ASYNC_FLUSH",
        max_consumer_pairs=max_pairs,
    )
    topics = TopicConfigManager(
        tmp_path / "topics.json",
        cluster_name="c1",
        broker_name="broker-a",
        auto_create_topic_enable=True,
        default_topic_queue_nums=4,
    )
    metrics.bind(store, topics)
    return metrics


def test_bound_gauges_are_exported_with_latencies_in_ms(tmp_path: Path, store: DefaultMessageStore) -> None:
    metrics = broker_metrics(tmp_path, store)
    assert {name: scrape(metrics).get(name) for name in CONSUMER_GAUGES} == dict.fromkeys(CONSUMER_GAUGES)
    metrics.bind_consumers(OffsetTable({f"{TOPIC}@g1": {0: 1, 1: 3}}), lambda: {(("g1", TOPIC)): 1})
    before_ms = time.time() * 1000
    got = scrape(metrics)
    after_ms = time.time() * 1000
    want_labels = {"cluster": "c1", "node_type": "broker", "node_id": "broker-a"}
    want_labels |= {"topic": TOPIC, "consumer_group": "g1", "is_retry": "false", "is_system": "false"}
    assert set(want_labels) == {*NODE_LABELS, *CONSUMER_LABELS}
    values = {name: [value for labels, value in got[name] if labels == want_labels] for name in CONSUMER_GAUGES}
    assert values["rocketmq_consumer_lag_messages"] == [4 + 1]
    assert values["rocketmq_consumer_ready_messages"] == [4]
    assert values["rocketmq_consumer_inflight_messages"] == [1]
    first_ready_ms = stored_ms(store, 0, 1)
    for name in ("rocketmq_consumer_lag_latency", "rocketmq_consumer_queueing_latency"):
        [age_ms] = values[name]
        assert before_ms - first_ready_ms <= age_ms <= after_ms - first_ready_ms, name


def test_a_failing_table_gives_empty_gauges_not_a_failed_scrape(tmp_path: Path, store: DefaultMessageStore) -> None:
    metrics = broker_metrics(tmp_path, store)
    metrics.bind_consumers(BrokenTable(), None)
    got = scrape(metrics)
    assert all(name not in got for name in CONSUMER_GAUGES)
    assert "rocketmq_storage_size" in got


def test_out_and_dlq_counters_by_topic_group_retry_and_system(tmp_path: Path, store: DefaultMessageStore) -> None:
    metrics = broker_metrics(tmp_path, store, max_pairs=1)
    metrics.on_messages_out(TOPIC, "g1", 3, 300, is_retry=False)
    metrics.on_messages_out(TOPIC, "g1", 2, 150, is_retry=False)
    metrics.on_messages_out(TOPIC, "g1", 1, 90, is_retry=True)
    metrics.on_messages_out("%RETRY%g1", "g1", 1, 80, is_retry=False)  # a second pair: past the cap of 1
    metrics.on_messages_out(TOPIC, "g1", 0, 0, is_retry=False)  # an empty answer counts nothing
    metrics.on_send_to_dlq("CID_RMQ_SYS_X", TOPIC)
    got = scrape(metrics)

    def value(name: str, **labels: str) -> float:
        [found] = [v for lab, v in got[name] if lab.items() >= labels.items()]
        return found

    assert value("rocketmq_messages_out_total", consumer_group="g1", is_retry="false", is_system="false") == 5
    assert value("rocketmq_throughput_out_total", consumer_group="g1", is_retry="false") == 450
    assert value("rocketmq_messages_out_total", topic=TOPIC, is_retry="true") == 1
    assert value("rocketmq_throughput_out_total", topic="_other", consumer_group="_other", is_retry="true") == 80
    assert len(got["rocketmq_messages_out_total"]) == 3
    assert value("rocketmq_send_to_dlq_messages_total", consumer_group="_other", is_system="true") == 1
    assert {k for labels, _ in got["rocketmq_send_to_dlq_messages_total"] for k in labels} == {
        *NODE_LABELS,
        "topic",
        "consumer_group",
        "is_system",
    }
