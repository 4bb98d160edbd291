"""The name server's Prometheus metrics (node_type="namesrv", node_id=<listen host:port>).

Series (every one also has cluster, node_type, node_id):

- ``mq_namesrv_live_brokers``: entries of the broker live table (read at scrape time).
- ``mq_namesrv_topics``: topics with a route.
- ``mq_namesrv_registrations_total`` {result}: RegisterBroker calls by response code name (SUCCESS, ...).
- ``mq_namesrv_broker_expirations_total``: brokers dropped by the scanNotActiveBroker task.
- ``mq_namesrv_route_queries_total`` {result}: GetRouteInfoByTopic calls by response code name (SUCCESS,
  TOPIC_NOT_EXIST, ...).
- ``rocketmq_rpc_latency`` histogram (ms) {protocol_type="grpc", method, response_code}.

Counters are updated on the name server's asyncio loop, once per RPC or scan.
"""

from __future__ import annotations

from mq_common.metrics import LATENCY_BUCKETS_MS, NodeIdentity, ServiceMetrics

from mq_namesrv.route_info_manager import RouteInfoManager


class NamesrvMetrics(ServiceMetrics):
    """The name server's families over one RouteInfoManager."""

    def __init__(self, node: NodeIdentity, manager: RouteInfoManager, *, max_topics: int) -> None:
        super().__init__(node, max_topics=max_topics)
        self.rpc_latency = self.histogram(
            "rocketmq_rpc_latency",
            "gRPC call latency on the name server in ms.",
            ("protocol_type", "method", "response_code"),
            buckets=LATENCY_BUCKETS_MS,
        )
        self.registrations = self.counter("mq_namesrv_registrations", "RegisterBroker calls by result.", ("result",))
        self.route_queries = self.counter(
            "mq_namesrv_route_queries", "GetRouteInfoByTopic calls by result.", ("result",)
        )
        self.expirations = self.counter(
            "mq_namesrv_broker_expirations", "Brokers dropped for missing heartbeats."
        ).child()
        self.expirations.inc(0)
        self.scalar_gauge(
            "mq_namesrv_live_brokers", "Brokers in the live table.", lambda: len(manager.broker_live_table)
        )
        self.scalar_gauge("mq_namesrv_topics", "Topics with a route.", lambda: len(manager.topic_queue_table))

    def observe_rpc(self, method: str, response_code: str, elapsed_ms: float) -> None:
        """RequestContextInterceptor callback (one per RPC)."""
        self.rpc_latency.child("grpc", method, response_code).observe(elapsed_ms)
        if method == "RegisterBroker":
            self.registrations.child(response_code).inc()
        elif method == "GetRouteInfoByTopic":
            self.route_queries.child(response_code).inc()
