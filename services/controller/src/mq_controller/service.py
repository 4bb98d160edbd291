"""Wires the controller together: etcd state store, manager, gRPC server, inactive-master scan, metrics.

Mirrors org.apache.rocketmq.controller.ControllerManager (initialize/start/shutdown and its scan of inactive
masters, ControllerConfig.scanInactiveMasterInterval). Everything runs on one asyncio loop.
"""

from __future__ import annotations

import asyncio

from mq_common.grpc_server import ServiceServer
from mq_common.logging import get_logger
from mq_common.metrics import NodeIdentity
from mq_common.protocol.controller import ControllerMetaData
from mq_common.request_context import RequestContextInterceptor
from mq_common.tasks import cancel_and_wait

from mq_controller.access import ControllerAccess
from mq_controller.etcd_store import EtcdReplicaStateStore
from mq_controller.grpc_api import SERVICE_NAME, ControllerServicer, add_to_server, request_limits
from mq_controller.manager import ControllerManager, ManagerConfig
from mq_controller.metrics import ControllerMetrics
from mq_controller.replicas_info_manager import ElectionReason
from mq_controller.settings import ControllerSettings

log = get_logger("mq_controller.service")


class ControllerService:
    """The controller process' parts. Create, ``await start()``, later ``await stop()``; one loop."""

    def __init__(self, settings: ControllerSettings) -> None:
        s = settings
        self.settings = s
        self.store = EtcdReplicaStateStore(
            s.etcd_endpoint_list, s.etcd_key_prefix, s.etcd_call_timeout_ms, s.etcd_tls_client_config()
        )
        config = ManagerConfig(s.lease_ttl_s, s.enable_elect_unclean_master, s.max_groups)
        self.manager = ControllerManager(self.store, config, self._on_election)
        self.metrics: ControllerMetrics | None = None
        if s.metrics_port:
            node = NodeIdentity(s.cluster_name, "controller", f"{s.listen_host}:{s.listen_port}")
            self.metrics = ControllerMetrics(node, self.manager.sync_state_set_sizes)
        observe = self.metrics.observe_rpc if self.metrics is not None else None
        limits = request_limits(s.max_concurrent_streams)
        self.server = ServiceServer(
            [SERVICE_NAME],
            [RequestContextInterceptor(observe=observe)],
            limits=limits,
            grpc_server=s.grpc_server,
            tls_enabled=s.tls_enabled,
        )
        servicer = ControllerServicer(self.manager, ControllerAccess.from_settings(s), self.metadata)
        add_to_server(servicer, self.server.server)
        self._scan_task: asyncio.Task[None] | None = None

    def _on_election(self, broker_name: str, reason: ElectionReason) -> None:
        if self.metrics is not None:
            self.metrics.on_election(broker_name, reason)

    @property
    def addr(self) -> str:
        return f"{self.settings.listen_host}:{self.server.port}"

    async def metadata(self) -> ControllerMetaData:
        leader = await self.store.leader_id()
        return ControllerMetaData(self.addr, True, self.settings.etcd_endpoint_list, leader)

    async def start(self) -> int:
        """Connect to etcd, bind, serve, start the scan. Returns the bound port. Raises RuntimeError when the port
        cannot be bound."""
        await self.store.connect()
        port = self.server.bind(self.settings.listen_host, self.settings.listen_port, self.settings.tls_server_config())
        if self.metrics is not None:
            try:
                self.metrics.start_server(self.settings.listen_host, self.settings.metrics_port)
            except OSError as exc:
                await self.server.stop(0)
                raise RuntimeError(f"cannot serve metrics on port {self.settings.metrics_port}: {exc}") from exc
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="scan-inactive-master")
        return port

    async def _scan_loop(self) -> None:
        interval_s = self.settings.scan_not_active_broker_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.manager.scan_inactive_masters()
            except Exception:
                log.exception("scan_inactive_masters_failed")

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop the scan, stop serving (in-flight calls get ``grace_s``, default shutdown_grace_ms), close etcd."""
        task, self._scan_task = self._scan_task, None
        await cancel_and_wait(task)
        grace = self.settings.shutdown_grace_ms / 1000.0 if grace_s is None else grace_s
        await self.server.stop(grace)
        await self.store.close()
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop_server)
