"""gRPC server kit: an asyncio server with grpc.health.v1 health, server reflection and bounded options.

Every PyRocketMQ service builds its server here so that health, reflection, message size limits and
graceful shutdown behave the same everywhere, on either front (mq_common.grpc_front: grpcio's grpc.aio or
pygrpc-native). Runs on the service's one asyncio loop.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from mq_common.grpc_front import GrpcServerChoice, aio_server, resolve_front
from mq_common.grpc_guard import DEFAULT_REQUEST_LIMITS, RequestGuard, RequestLimits
from mq_common.grpc_options import CHANNEL_OPTIONS as CHANNEL_OPTIONS  # re-exported: callers import it here
from mq_common.grpc_options import MAX_GRPC_MESSAGE_BYTES as MAX_GRPC_MESSAGE_BYTES
from mq_common.logging import get_logger
from mq_common.tls import TlsServerConfig, server_credentials

log = get_logger("mq_common.grpc_server")

# The native front: how long its IO threads get to write the last answers before the server stops (see stop()).
NATIVE_FLUSH_S: Final = 0.25
SERVER_OPTIONS: Final[list[tuple[str, int]]] = [
    *CHANNEL_OPTIONS,
    ("grpc.so_reuseport", 0),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
]


def server_options(max_message_bytes: int = MAX_GRPC_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """SERVER_OPTIONS with both message length limits set to ``max_message_bytes``."""
    limits = {"grpc.max_send_message_length", "grpc.max_receive_message_length"}
    return [
        *((name, value) for name, value in SERVER_OPTIONS if name not in limits),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


class ServiceServer:
    """An aio server plus its health servicer, on the front ``grpc_server`` resolves to (``self.front``: "grpcio"
    or "native"; mq_common.grpc_front.resolve_front with ``tls_enabled``, raising GrpcFrontError for native with
    TLS on or without pygrpc-native). It binds ONE port (pygrpc-native serves one).

    ``service_names`` are the full proto service names (``mq.broker.v1.Broker``); they are registered for
    reflection and marked SERVING by :meth:`start`, NOT_SERVING by :meth:`stop`. ``interceptors`` wrap every
    call (e.g. mq_common.request_context.RequestContextInterceptor: request ids, RPC latency).
    ``max_message_bytes`` bounds one inbound or outbound gRPC message (the gateway raises it to the 5.x proxy's
    130 MiB grpcMaxInboundMessageSize; its handlers enforce the 4 MiB body limit themselves). ``limits``: what the
    mq_common.grpc_guard.RequestGuard installed before ``interceptors`` enforces (element bounds, streams).
    """

    def __init__(
        self,
        service_names: Iterable[str],
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
        *,
        max_message_bytes: int = MAX_GRPC_MESSAGE_BYTES,
        limits: RequestLimits = DEFAULT_REQUEST_LIMITS,
        grpc_server: GrpcServerChoice = "grpcio",
        tls_enabled: bool = False,
    ) -> None:
        self.front = resolve_front(grpc_server, tls_enabled=tls_enabled)
        self._guard = RequestGuard(limits, grpc_aio_deadline=self.front == "native")
        self.server = aio_server(
            self.front, [*server_options(max_message_bytes), *limits.server_options()], [self._guard, *interceptors]
        )
        self.health = health.aio.HealthServicer()
        self.service_names = list(service_names)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            [*self.service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
            self.server,
        )
        self.port = 0

    def bind(self, host: str, port: int, tls: TlsServerConfig | None = None) -> int:
        """Bind ``host:port`` (port 0 picks a free one), plaintext or, with ``tls``, TLS whose certificate files
        are re-read when they change (mq_common.tls.server_credentials); returns the bound port. Raises
        RuntimeError when the port cannot be bound, a second bind, or ``tls`` on the native front (plaintext only);
        OSError when the TLS files cannot be read."""
        if self.port:
            raise RuntimeError(f"ServiceServer binds one port; already bound to {self.port}")
        if tls is not None and self.front == "native":
            raise RuntimeError("the native gRPC front serves plaintext only; TLS needs grpc_server=grpcio")
        address = f"{host}:{port}"
        if tls is None:
            bound = self.server.add_insecure_port(address)
        else:
            bound = self.server.add_secure_port(address, server_credentials(tls))
        if bound == 0:
            raise RuntimeError(f"cannot bind {host}:{port}")
        self.port = bound
        return bound

    async def start(self) -> None:
        """Serve, mark every service SERVING, log ``grpc_server_started`` (front, port)."""
        await self.server.start()
        for name in ["", *self.service_names]:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("grpc_server_started", front=self.front, port=self.port, services=self.service_names)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Mark NOT_SERVING, stop taking calls, let in-flight calls finish within ``grace_s`` seconds.

        On the native front the request guard first refuses new calls and waits for the unary and server-streaming
        ones in their handlers, then NATIVE_FLUSH_S passes before the server stops: pygrpc-native 0.5's stop closes
        its front as soon as the handlers returned, and an answer its IO threads had not written yet was lost (the
        client saw UNAVAILABLE "Stream removed" after GOAWAY; seen on a loaded machine)."""
        await self.health.enter_graceful_shutdown()
        if self.front == "native":
            loop = asyncio.get_running_loop()
            end = loop.time() + grace_s
            await self._guard.drain(grace_s)
            await asyncio.sleep(NATIVE_FLUSH_S)
            grace_s = max(0.0, end - loop.time())
        await self.server.stop(grace_s)


def install_signal_handlers(stop: Callable[[], Awaitable[None]]) -> asyncio.Event:
    """SIGTERM/SIGINT run ``stop()`` once on the running loop; the returned event is set when it finished."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    started = False
    tasks: set[asyncio.Task[None]] = set()

    def _on_signal() -> None:
        nonlocal started
        if started:
            return
        started = True

        async def _run() -> None:
            try:
                await stop()
            finally:
                done.set()

        task = loop.create_task(_run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal)
    return done
