"""Prometheus metrics kit shared by every service: one registry per service, RocketMQ 5 node labels, a bounded
topic label, scrape-time gauges and the ``/metrics`` HTTP server.

Every series carries ``cluster``, ``node_type`` and ``node_id`` first (RocketMQ 5's BrokerMetricsConstant /
ProxyMetricsConstant label names), then its own labels. Label children are cached per label tuple, so a hot
path pays one dict lookup and one ``inc(n)`` / ``observe(v)`` per batch. Topic-labelled series are bounded by
:class:`TopicLabels`: the first ``max_topics`` topics keep their name, later ones share ``topic="_other"``.

Counters and histograms are updated on the service's asyncio loop (the broker's flush thread updates only the
group-commit figures it owns); prometheus_client children are thread-safe. Scrape-time gauges run their
callback on the HTTP server's thread when Prometheus scrapes: they read plain attributes and must not block.

Mirrors: org.apache.rocketmq.broker.metrics.BrokerMetricsManager (label set, OTLP-to-Prometheus exporter).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

NODE_LABELS: Final = ("cluster", "node_type", "node_id")
OTHER_TOPIC: Final = "_other"
DEFAULT_MAX_TOPICS: Final = 256
# Milliseconds: RPC and send latencies (RocketMQ 5's rpc_latency view: 1, 3, 5, 10, ... 1000 ms, plus the tail).
LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 3000.0, 10000.0)
# Bytes: RocketMQ 5's rocketmq_message_size view (1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB).
MESSAGE_SIZE_BUCKETS_BYTES: Final = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
# Messages per batch / per group commit.
BATCH_SIZE_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0)

M = TypeVar("M", Counter, Gauge, Histogram)

disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: one process per service, counters start with it


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """The constant labels of one process: ``cluster`` (brokerClusterName), ``node_type`` (``broker``,
    ``namesrv``, ``proxy``) and ``node_id`` (broker name, or the ``host:port`` the service listens on)."""

    cluster: str
    node_type: str
    node_id: str

    def values(self) -> tuple[str, str, str]:
        return (self.cluster, self.node_type, self.node_id)


class Family(Generic[M]):
    """A metric whose children are cached per label-value tuple (node labels filled in).

    ``child(*values)`` gives the prometheus_client child for this node and ``values`` (the metric's own labels,
    in declaration order). Thread-safe enough: two threads racing on a new tuple create the same child.
    """

    __slots__ = ("_children", "_node", "metric")

    def __init__(self, metric: M, node: NodeIdentity) -> None:
        self.metric: M = metric
        self._node = node.values()
        self._children: dict[tuple[str, ...], M] = {}

    def child(self, *values: str) -> M:
        found = self._children.get(values)
        if found is None:
            found = self._children[values] = self.metric.labels(*self._node, *values)
        return found


class TopicLabels:
    """Bounds the ``topic`` label: the first ``max_topics`` distinct topics keep their name, the rest map to
    ``"_other"``. ``max_topics`` 0 maps every topic to ``"_other"``. Event loop only."""

    __slots__ = ("_known", "max_topics")

    def __init__(self, max_topics: int) -> None:
        self.max_topics = max_topics
        self._known: set[str] = set()

    def __call__(self, topic: str) -> str:
        if topic in self._known:
            return topic
        if len(self._known) < self.max_topics:
            self._known.add(topic)
            return topic
        return OTHER_TOPIC


GaugeSample = tuple[Sequence[str], float]


class _CallbackGauges(Collector):
    """Gauges computed at scrape time: name -> (doc, own label names, callback giving (label values, value))."""

    def __init__(self, node: NodeIdentity) -> None:
        self._node = node
        self._gauges: list[tuple[str, str, tuple[str, ...], Callable[[], Iterable[GaugeSample]]]] = []
        self._lock = threading.Lock()

    def add(self, name: str, doc: str, labels: tuple[str, ...], callback: Callable[[], Iterable[GaugeSample]]) -> None:
        with self._lock:
            self._gauges.append((name, doc, labels, callback))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            gauges = list(self._gauges)
        node = list(self._node.values())
        for name, doc, labels, callback in gauges:
            family = GaugeMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
            try:
                samples = list(callback())
            except Exception:  # a scrape must not fail because one figure is not ready (store starting, ...)
                samples = []
            for values, value in samples:
                family.add_metric([*node, *values], float(value))
            yield family


class BulkHistogram(Collector):
    """A histogram fed many values at once (``observe_many``): one bisect per value in C, one lock per call.

    For per-message figures on a batch path (message sizes) where prometheus_client's per-value ``observe``
    (a Python loop and a lock per value) would cost too much. Exposed as a normal Prometheus histogram.
    """

    def __init__(self, name: str, doc: str, labels: tuple[str, ...], buckets: Sequence[float], node: NodeIdentity):
        self._name = name
        self._doc = doc
        self._labels = labels
        self._bounds = sorted(buckets)
        self._node = node.values()
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe_many(self, values: Sequence[float], *labels: str) -> None:
        """Count every value of ``values`` into the series of ``labels`` (own label values, in order)."""
        bounds = self._bounds
        right = bisect.bisect_left
        with self._lock:
            series = self._series.get(labels)
            if series is None:
                series = self._series[labels] = ([0] * (len(bounds) + 1), [0.0])
            counts, total = series
            low = right(bounds, min(values, default=0))
            if low == right(bounds, max(values, default=0)):  # all in one bucket (uniform sizes): O(1) counting
                counts[low] += len(values)
            else:
                for v in values:
                    counts[right(bounds, v)] += 1
            total[0] += sum(values)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._doc, labels=[*NODE_LABELS, *self._labels])
        with self._lock:
            snapshot = [(labels, list(counts), total[0]) for labels, (counts, total) in self._series.items()]
        for labels, counts, total in snapshot:
            cumulative, buckets = 0, []
            for bound, count in zip([*self._bounds, float("inf")], counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(cumulative)))
            family.add_metric([*self._node, *labels], buckets, total)
        yield family


class ServiceMetrics:
    """One service's registry, node identity and topic bound; base class of each service's metrics set.

    Build the families in the subclass' ``__init__`` with :meth:`counter`, :meth:`histogram`, :meth:`gauge` and
    :meth:`gauge_callback`; serve them with :meth:`start_server`.
    """

    def __init__(self, node: NodeIdentity, *, max_topics: int = DEFAULT_MAX_TOPICS) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=True)
        self.topic = TopicLabels(max_topics)
        self._callbacks = _CallbackGauges(node)
        self.registry.register(self._callbacks)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Family[Counter]:
        """A counter ``name`` (give it without ``_total``; the exposition adds it)."""
        return Family(Counter(name, doc, [*NODE_LABELS, *labels], registry=self.registry), self.node)

    def histogram(
        self, name: str, doc: str, labels: tuple[str, ...] = (), *, buckets: Sequence[float]
    ) -> Family[Histogram]:
        return Family(Histogram(name, doc, [*NODE_LABELS, *labels], registry=self.registry, buckets=buckets), self.node)

    def bulk_histogram(
        self, name: str, doc: str, labels: tuple[str, ...] = (), *, buckets: Sequence[float]
    ) -> BulkHistogram:
        """A :class:`BulkHistogram` registered here."""
        histogram = BulkHistogram(name, doc, labels, buckets, self.node)
        self.registry.register(histogram)
        return histogram

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Family[Gauge]:
        return Family(Gauge(name, doc, [*NODE_LABELS, *labels], registry=self.registry), self.node)

    def gauge_callback(
        self, name: str, doc: str, callback: Callable[[], Iterable[GaugeSample]], labels: tuple[str, ...] = ()
    ) -> None:
        """A gauge read at scrape time: ``callback()`` yields ``(own label values, value)`` pairs (it runs on the
        HTTP server's thread; an exception yields no sample)."""
        self._callbacks.add(name, doc, labels, callback)

    def scalar_gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A label-less (node labels only) scrape-time gauge."""
        self.gauge_callback(name, doc, lambda: [((), read())])

    @property
    def port(self) -> int:
        """The bound ``/metrics`` port (0 before :meth:`start_server`)."""
        return self._server.server_port if self._server is not None else 0

    def start_server(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread; returns the bound port.
        Raises OSError when the port cannot be bound."""
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        return self.port

    def stop_server(self) -> None:
        """Stop serving (idempotent). Blocks up to one poll interval (0.5 s) of the server thread."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def exposition(self) -> bytes:
        """The text exposition of the registry (what ``/metrics`` answers)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
