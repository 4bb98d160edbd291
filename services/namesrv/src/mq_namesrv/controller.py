"""Wires the name server together: route table, gRPC server, periodic expiry scan.

Mirrors org.apache.rocketmq.namesrv.NamesrvController (initialize/start/shutdown and the
scanNotActiveBroker scheduled task). Everything runs on one asyncio loop.
"""

from __future__ import annotations

import asyncio

from mq_common.auth.admin_access import AdminAccess
from mq_common.grpc_server import ServiceServer
from mq_common.logging import get_logger
from mq_common.metrics import NodeIdentity
from mq_common.request_context import RequestContextInterceptor
from mq_common.tasks import cancel_and_wait

from mq_namesrv.grpc_api import SERVICE_NAME, NameServerServicer, add_to_server, request_limits
from mq_namesrv.metrics import NamesrvMetrics
from mq_namesrv.route_info_manager import Clock, RouteInfoManager, system_clock_ms
from mq_namesrv.settings import NamesrvSettings

log = get_logger("mq_namesrv.controller")


class NamesrvController:
    """The name server process' parts. Create, ``await start()``, later ``await stop()``; one loop."""

    def __init__(self, settings: NamesrvSettings, clock: Clock = system_clock_ms) -> None:
        self.settings = settings
        self.route_info_manager = RouteInfoManager(clock, settings.broker_channel_expired_ms)
        self.metrics: NamesrvMetrics | None = None
        if settings.metrics_port:
            node = NodeIdentity(settings.cluster_name, "namesrv", f"{settings.listen_host}:{settings.listen_port}")
            self.metrics = NamesrvMetrics(node, self.route_info_manager, max_topics=settings.metrics_max_topics)
        observe = self.metrics.observe_rpc if self.metrics is not None else None
        limits = request_limits(settings.max_topics_per_registration, settings.max_concurrent_streams)
        self.server = ServiceServer(
            [SERVICE_NAME],
            [RequestContextInterceptor(observe=observe)],
            limits=limits,
            grpc_server=settings.grpc_server,
            tls_enabled=settings.tls_enabled,
        )
        access = AdminAccess.from_settings(settings)
        add_to_server(NameServerServicer(self.route_info_manager, access), self.server.server)
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self.server.port

    @property
    def addr(self) -> str:
        """``"host:port"`` clients use (after :meth:`start`)."""
        return f"{self.settings.listen_host}:{self.server.port}"

    async def start(self) -> int:
        """Bind ``listen_host:listen_port``, serve, start the expiry scan. Returns the bound port.

        Raises RuntimeError when the port cannot be bound."""
        port = self.server.bind(self.settings.listen_host, self.settings.listen_port, self.settings.tls_server_config())
        if self.metrics is not None:
            try:
                self.metrics.start_server(self.settings.listen_host, self.settings.metrics_port)
            except OSError as exc:
                await self.server.stop(0)
                raise RuntimeError(f"cannot serve metrics on port {self.settings.metrics_port}: {exc}") from exc
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="scan-not-active-broker")
        return port

    async def _scan_loop(self) -> None:
        interval_s = self.settings.scan_not_active_broker_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            try:
                expired = self.route_info_manager.scan_not_active_broker()
                if expired and self.metrics is not None:
                    self.metrics.expirations.inc(len(expired))
            except Exception:
                log.exception("scan_not_active_broker_failed")

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop the scan, then stop serving (in-flight calls get ``grace_s``, default shutdown_grace_ms)."""
        task, self._scan_task = self._scan_task, None
        await cancel_and_wait(task)
        grace = self.settings.shutdown_grace_ms / 1000.0 if grace_s is None else grace_s
        await self.server.stop(grace)
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop_server)
