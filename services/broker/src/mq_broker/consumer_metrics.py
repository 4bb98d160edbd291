"""The broker's consumer metrics (RocketMQ 5's lag, in-flight and DLQ figures), computed at scrape time.

Series (every one also has cluster, node_type="broker", node_id; labels topic, consumer_group, is_retry, is_system):

- ``rocketmq_consumer_lag_messages``: messages stored and not yet consumed by the group: the ready ones (queue max
  offset - committed offset, per queue) plus the group's in-flight ones.
- ``rocketmq_consumer_lag_latency`` (ms): now - STORETIMESTAMP of the first unconsumed message (per queue, the one at
  committed offset - in-flight messages of that queue, RocketMQ's POP estimate); 0 when nothing is unconsumed.
- ``rocketmq_consumer_inflight_messages``: messages handed out and not yet acked (POP's in-flight table).
- ``rocketmq_consumer_queueing_latency`` (ms): now - STORETIMESTAMP of the first READY message (the one at the
  committed offset: stored, not yet handed out); 0 when nothing is ready.
- ``rocketmq_consumer_ready_messages``: the ready part of the lag (stored, not yet handed out).

Where the figures come from: the consumer offset table (``"topic@group" -> {queue_id: offset}``) gives the
(topic, group) pairs and committed offsets; the store gives each queue's max offset and the store time of one record
per queue that has ready (or in-flight) messages; the POP in-flight table gives counts. A POP group's committed
offset is its pull offset (POP commits at pop time), so "ready" is exact for it. A pull group's broker-side pull
offset is not tracked: its in-flight count is 0 and "ready" counts from the committed offset.

Entries of a group's retry topic (``%RETRY%<group>``) get ``is_retry="true"`` under that topic name (RocketMQ reports
its POP retry lag under the original topic; our retry topic is per group, shared by its topics). ``is_system`` is
TopicValidator#isSystemTopic or a ``CID_RMQ_SYS_`` group (BrokerMetricsManager#isSystem).

Bounds: the first ``max_pairs`` (topic, group) pairs keep their names; later ones fold into
``topic="_other", consumer_group="_other"`` (counts summed, latencies maxed). One scrape looks at most
:data:`MAX_SCRAPE_QUEUES` queues. The collector runs on the metrics HTTP thread: it copies the tables it reads (dicts
the event loop mutates; a copy the loop disturbed is retried, :data:`SNAPSHOT_ATTEMPTS` at most) and reads at most
one record per queue (two with POP's per-queue in-flight counts).

FIFO (orderly POP; RocketMQ 5 defines no FIFO metrics, so the names are ours), labels topic, consumer_group (bounded
like the pairs above): ``mq_broker_fifo_blocked_queues`` (orderly queues blocked now: messages of their last pop are
handed out and not acked, so nothing later in the queue is handed out) and ``mq_broker_fifo_block_age_ms`` (ms since
the oldest of those blocks began, 0: none), both at scrape time from the orderly POP table
(:class:`FifoOrderInfo`, ConsumerOrderInfoManager), one series per (topic, group) that has orderly state. A block
begins at the first hand-out of a pop's messages and ends when the last of them is acked or sent to ``%DLQ%``;
redeliveries continue it (see mq_broker.consumer.pop.order_info).

Mirrors: org.apache.rocketmq.broker.metrics.ConsumerLagCalculator and BrokerMetricsManager#initLagAndDlqMetrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from mq_common.constants import MixAll, is_system_topic
from mq_common.metrics import NODE_LABELS, OTHER_TOPIC, NodeIdentity
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from mq_broker.consumer.pop.order_info import HoldEndListener, QueueHolds

DEFAULT_MAX_CONSUMER_PAIRS: Final = 1024
MAX_SCRAPE_QUEUES: Final = 32_768
# Copies of a table the event loop mutates meanwhile ("dictionary changed size during iteration") tried per scrape.
SNAPSHOT_ATTEMPTS: Final = 3
SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX
OTHER_GROUP: Final = OTHER_TOPIC
CONSUMER_LABELS: Final = ("topic", "consumer_group", "is_retry", "is_system")
_TOPIC_GROUP_SEPARATOR: Final = "@"
assert MAX_SCRAPE_QUEUES >= DEFAULT_MAX_CONSUMER_PAIRS * 16, "room for 16 queues per labelled pair"

InflightByGroupTopic = Callable[[], Mapping[tuple[str, str], int]]
"""(group, topic) -> messages in flight (POP's ``inflight_by_group_topic``)."""
InflightInQueue = Callable[[str, str, int], int]
"""(group, topic, queue_id) -> messages in flight in that queue (POP's ``inflight_count``)."""


class FifoOrderInfo(Protocol):
    """What the FIFO metrics read of ConsumerOrderInfoManager: ``hold_summary()`` -> {(topic, group): QueueHolds}
    (any thread) and the ``on_hold_end(topic, group, held_ms)`` hook they set (called on the event loop)."""

    on_hold_end: HoldEndListener | None

    def hold_summary(self) -> Mapping[tuple[str, str], QueueHolds]: ...


class ConsumerOffsetTable(Protocol):
    """What the collector reads of ConsumerOffsetManager: ``offset_table`` maps ``"topic@group"`` to
    ``{queue_id: committed offset}`` (the next offset to consume; < 0 ignored)."""

    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]: ...


class QueueStore(Protocol):
    """What the collector reads of the message store (DefaultMessageStore has both)."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int: ...


def is_system(topic: str, group: str) -> bool:
    """BrokerMetricsManager#isSystem: a system topic or a ``CID_RMQ_SYS_`` consumer group."""
    return is_system_topic(topic) or group.startswith(SYSTEM_GROUP_PREFIX)


def _flag(value: bool) -> str:
    return "true" if value else "false"


ConsumerLabelValues = tuple[str, str, str, str]
"""Values of :data:`CONSUMER_LABELS`: (topic, consumer_group, is_retry, is_system)."""


class ConsumerPairLabels:
    """Label values of (topic, consumer_group) with the pairs bounded: the first ``max_pairs`` distinct pairs keep
    their names, the rest map to ``("_other", "_other")`` (their is_retry / is_system flags stay). A ``%RETRY%``
    topic is always ``is_retry="true"``. Thread-safe (the event loop and the metrics HTTP thread both ask)."""

    __slots__ = ("_known", "_lock", "max_pairs")

    def __init__(self, max_pairs: int) -> None:
        self.max_pairs = max_pairs
        self._known: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __call__(self, topic: str, group: str, *, is_retry: bool) -> ConsumerLabelValues:
        retry = _flag(is_retry or topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX))
        system = _flag(is_system(topic, group))
        pair = (topic, group)
        if pair in self._known:
            return (topic, group, retry, system)
        with self._lock:
            if len(self._known) < self.max_pairs:
                self._known.add(pair)
                return (topic, group, retry, system)
        return (OTHER_TOPIC, OTHER_GROUP, retry, system)


@dataclass(slots=True)
class _LagRow:
    """Accumulated figures of one label set during a scrape (mutable scratch, never leaves the collector)."""

    ready: int = 0
    inflight: int = 0
    earliest_unconsumed_ms: int = 0  # 0: none
    earliest_ready_ms: int = 0  # 0: none

    def add(self, other: _LagRow) -> None:
        self.ready += other.ready
        self.inflight += other.inflight
        self.earliest_unconsumed_ms = _earliest(self.earliest_unconsumed_ms, other.earliest_unconsumed_ms)
        self.earliest_ready_ms = _earliest(self.earliest_ready_ms, other.earliest_ready_ms)


def _earliest(a_ms: int, b_ms: int) -> int:
    """The earlier of two store times where 0 means "none"."""
    if a_ms <= 0:
        return b_ms
    if b_ms <= 0:
        return a_ms
    return min(a_ms, b_ms)


@dataclass(frozen=True, slots=True)
class ConsumerLag:
    """One exported row: the label values (:data:`CONSUMER_LABELS`) and its figures (messages; store times in ms since
    the epoch, 0 = none)."""

    labels: ConsumerLabelValues
    lag_messages: int
    ready_messages: int
    inflight_messages: int
    earliest_unconsumed_ms: int
    earliest_ready_ms: int


@dataclass(slots=True)
class ConsumerLagSources:
    """The bound sources: offsets (required), the store, and POP's in-flight figures (optional)."""

    offsets: ConsumerOffsetTable
    store: QueueStore
    inflight: InflightByGroupTopic | None = None
    inflight_in_queue: InflightInQueue | None = None
    labels: ConsumerPairLabels = field(default_factory=lambda: ConsumerPairLabels(DEFAULT_MAX_CONSUMER_PAIRS))

    def compute(self) -> list[ConsumerLag]:
        """Every row, sorted by labels. Runs on the caller's thread; reads at most one record per queue and at most
        :data:`MAX_SCRAPE_QUEUES` queues (later queues are skipped)."""
        inflight = dict(_snapshot(self.inflight)) if self.inflight is not None else {}
        rows: dict[ConsumerLabelValues, _LagRow] = {}
        budget = MAX_SCRAPE_QUEUES
        for key, queues in _snapshot(lambda: self.offsets.offset_table):
            topic, sep, group = key.partition(_TOPIC_GROUP_SEPARATOR)
            if not sep:
                continue
            row = _LagRow(inflight=max(0, inflight.pop((group, topic), 0)))
            committed = list(queues.items())[:budget]
            budget -= len(committed)
            for queue_id, offset in committed:
                self._add_queue(row, group, topic, queue_id, offset)
            self._merge(rows, topic, group, row)
        for (group, topic), count in inflight.items():  # in flight with no committed offset yet
            self._merge(rows, topic, group, _LagRow(inflight=max(0, count)))
        return [_export(labels, row) for labels, row in sorted(rows.items())]

    def _add_queue(self, row: _LagRow, group: str, topic: str, queue_id: int, offset: int) -> None:
        if offset < 0:
            return
        max_offset = self.store.get_max_offset_in_queue(topic, queue_id)
        ready = max(0, max_offset - offset)
        in_queue = self.inflight_in_queue(group, topic, queue_id) if self.inflight_in_queue is not None else 0
        row.ready += ready
        if ready > 0:
            stored_ms = self._store_time(topic, queue_id, offset)
            row.earliest_ready_ms = _earliest(row.earliest_ready_ms, stored_ms)
            if in_queue <= 0:
                row.earliest_unconsumed_ms = _earliest(row.earliest_unconsumed_ms, stored_ms)
        if in_queue > 0:
            first_unacked = self._store_time(topic, queue_id, max(0, offset - in_queue))
            row.earliest_unconsumed_ms = _earliest(row.earliest_unconsumed_ms, first_unacked)

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        try:
            return self.store.get_message_store_timestamp(topic, queue_id, offset)
        except (OSError, ValueError):  # the file was cleaned meanwhile (mmap closed): unknown
            return 0

    def _merge(self, rows: dict[ConsumerLabelValues, _LagRow], topic: str, group: str, row: _LagRow) -> None:
        values = self.labels(topic, group, is_retry=False)
        found = rows.get(values)
        if found is None:
            rows[values] = row
        else:
            found.add(row)


K = TypeVar("K")
V = TypeVar("V")


def _snapshot(read: Callable[[], Mapping[K, V]]) -> list[tuple[K, V]]:
    """The items of ``read()``, copied; retried when the owner (the event loop) changed the table meanwhile.
    Raises RuntimeError after SNAPSHOT_ATTEMPTS failed copies."""
    for _ in range(SNAPSHOT_ATTEMPTS - 1):
        try:
            return list(read().items())
        except RuntimeError:
            continue
    return list(read().items())


def _export(labels: ConsumerLabelValues, row: _LagRow) -> ConsumerLag:
    return ConsumerLag(
        labels=labels,
        lag_messages=row.ready + row.inflight,
        ready_messages=row.ready,
        inflight_messages=row.inflight,
        earliest_unconsumed_ms=row.earliest_unconsumed_ms,
        earliest_ready_ms=row.earliest_ready_ms,
    )


_FAMILIES: Final = (
    ("rocketmq_consumer_lag_messages", "Consumer lag messages (ready + in flight)."),
    ("rocketmq_consumer_lag_latency", "Ms since the first unconsumed message was stored (0: none)."),
    ("rocketmq_consumer_inflight_messages", "Consumer in-flight messages (handed out, not acked)."),
    ("rocketmq_consumer_queueing_latency", "Ms since the first ready (not handed out) message was stored (0: none)."),
    ("rocketmq_consumer_ready_messages", "Consumer ready messages (stored, not handed out)."),
)


def _age_ms(now_ms: float, stored_ms: int) -> float:
    return max(0.0, now_ms - stored_ms) if stored_ms > 0 else 0.0


class ConsumerLagCollector(Collector):
    """Prometheus collector of the five consumer gauges; unbound (``sources`` None) it exports empty families.

    ``collect`` runs on the metrics HTTP thread; one computation feeds all five families. A failing computation (a
    store shutting down) gives empty families, never a failed scrape.
    """

    def __init__(self, node: NodeIdentity) -> None:
        self._node = list(node.values())
        self.sources: ConsumerLagSources | None = None

    def describe(self) -> Iterator[Metric]:
        return self._families([], 0.0)

    def collect(self) -> Iterator[Metric]:
        sources = self.sources
        rows: list[ConsumerLag] = []
        if sources is not None:
            try:
                rows = sources.compute()
            except Exception:  # a scrape must not fail because the store or a table is mid-change
                rows = []
        return self._families(rows, time.time() * 1000)

    def _families(self, rows: list[ConsumerLag], now_ms: float) -> Iterator[Metric]:
        families = [GaugeMetricFamily(name, doc, labels=[*NODE_LABELS, *CONSUMER_LABELS]) for name, doc in _FAMILIES]
        lag, lag_latency, inflight, queueing, ready = families
        for row in rows:
            values = [*self._node, *row.labels]
            lag.add_metric(values, row.lag_messages)
            lag_latency.add_metric(values, _age_ms(now_ms, row.earliest_unconsumed_ms))
            inflight.add_metric(values, row.inflight_messages)
            queueing.add_metric(values, _age_ms(now_ms, row.earliest_ready_ms))
            ready.add_metric(values, row.ready_messages)
        return iter(families)
