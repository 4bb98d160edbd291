"""The controller's Prometheus metrics (node_type="controller", node_id=<listen host:port>).

Series (every one also has cluster, node_type, node_id):

- ``mq_controller_elections_total`` {broker_name, reason}: masters elected and written by this controller;
  reason master_dead (the master's lease expired), manual (ElectMaster), no_master (a group without master, the
  first election of a new group included).
- ``mq_controller_sync_state_set_size`` {broker_name}: replicas in each group's SyncStateSet as this controller
  last read or wrote it (read at scrape time).
- ``rocketmq_rpc_latency`` histogram (ms) {protocol_type="grpc", method, response_code}.

Counters are updated on the controller's asyncio loop; gauges are read on the HTTP server's thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from mq_common.metrics import LATENCY_BUCKETS_MS, NodeIdentity, ServiceMetrics

from mq_controller.replicas_info_manager import ElectionReason


class ControllerMetrics(ServiceMetrics):
    """The controller's families; ``sync_state_set_sizes`` is the manager's broker name -> size table."""

    def __init__(self, node: NodeIdentity, sync_state_set_sizes: Mapping[str, int]) -> None:
        super().__init__(node)
        self.rpc_latency = self.histogram(
            "rocketmq_rpc_latency",
            "gRPC call latency on the controller in ms.",
            ("protocol_type", "method", "response_code"),
            buckets=LATENCY_BUCKETS_MS,
        )
        self.elections = self.counter(
            "mq_controller_elections", "Masters elected by this controller.", ("broker_name", "reason")
        )
        self.gauge_callback(
            "mq_controller_sync_state_set_size",
            "Replicas in each group's SyncStateSet.",
            lambda: [((name,), float(size)) for name, size in dict(sync_state_set_sizes).items()],
            ("broker_name",),
        )

    def on_election(self, broker_name: str, reason: ElectionReason) -> None:
        """ControllerManager callback (one per elected master)."""
        self.elections.child(broker_name, reason.value).inc()

    def observe_rpc(self, method: str, response_code: str, elapsed_ms: float) -> None:
        """RequestContextInterceptor callback (one per RPC)."""
        self.rpc_latency.child("grpc", method, response_code).observe(elapsed_ms)
