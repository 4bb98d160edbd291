"""Which gRPC server implementation (the "front") a ServiceServer runs: grpcio's ``grpc.aio`` or pygrpc-native's.

``pygrpc_native.aio.server()`` (PyPI pygrpc-native) takes ``grpc.aio.server()``'s arguments and serves the same
servicers and interceptors, with HTTP/2 and gRPC framing in Rust outside the GIL: a do-nothing v2 SendMessage costs
about a third of grpc.aio's server CPU (docs/architecture.md, "The gRPC front"). What differs, and what this module
does about it:

- Unary and server-streaming methods registered with ``add_registered_method_handlers`` (grpcio-tools >= 1.64 stubs,
  all of this project's) are served natively on ONE insecure port. Client-streaming and bidi methods (the broker's
  SendStream, the v2 Telemetry, server reflection) go to a grpc.aio server behind it on a Unix socket, where
  ``context.peer()`` is that socket (``unix:...``), not the client.
- No TLS: ``native`` with TLS on is refused (:func:`resolve_front`); ``auto`` then chooses grpcio.
- pygrpc-native 0.5's aio context answers ``time_remaining()`` of a call without a deadline with ``sys.maxsize``
  seconds (grpcio's sync value) where grpc.aio answers None, which handlers read as "no deadline":
  :class:`GrpcAioDeadline` (applied by mq_common.grpc_guard.RequestGuard on the native front) answers None again.
- Options it cannot honour raise (closing connections by age or idleness, a connection cap, response compression):
  :func:`native_options` drops them; ServiceServer sets none of them today.

Everything here runs once at start-up, on the service's loop or the main thread.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import grpc

GrpcServerChoice = Literal["grpcio", "native", "auto"]
"""The setting (``MQ_<SERVICE>_GRPC_SERVER``): ``auto`` is native when TLS is off and pygrpc-native imports."""
GrpcFront = Literal["grpcio", "native"]
"""What a ServiceServer runs once the choice is resolved."""

NATIVE_MODULE: Final = "pygrpc_native"
GRPC_SERVER_ENV_SUFFIX: Final = "_GRPC_SERVER"
"""Every service's env name for the choice ends so: MQ_GATEWAY_GRPC_SERVER, MQ_BROKER_GRPC_SERVER, ..."""

# Server options pygrpc-native 0.5 raises ValueError on (it cannot do them: grpcio closes connections by age or
# idleness, caps connections, compresses responses). A ServiceServer on the native front never passes them.
NATIVE_REFUSED_OPTIONS: Final = frozenset(
    {
        "grpc.max_connection_age_ms",
        "grpc.max_connection_age_grace_ms",
        "grpc.max_connection_idle_ms",
        "grpc.max_allowed_incoming_connections",
        "grpc.default_compression_algorithm",
        "grpc.default_compression_level",
    }
)


# What pygrpc-native's aio context answers for a call without a deadline (float(sys.maxsize) seconds); a real
# deadline is at most gRPC's largest timeout, 99,999,999 hours (3.6e11 s).
NATIVE_NO_DEADLINE_S: Final = float(sys.maxsize)


class GrpcFrontError(RuntimeError):
    """The chosen front cannot run here (``native`` with TLS on, or pygrpc-native not installed)."""


def native_front_available() -> bool:
    """Whether ``pygrpc_native.aio`` imports (its wheels exist for Linux and macOS, CPython >= 3.10; a wheel whose
    shared library cannot load counts as absent)."""
    try:
        importlib.import_module(f"{NATIVE_MODULE}.aio")
    except ImportError:
        return False
    return True


def resolve_front(choice: GrpcServerChoice, *, tls_enabled: bool) -> GrpcFront:
    """The front for ``choice``: ``grpcio`` as asked; ``native`` as asked, raising GrpcFrontError when TLS is on
    (pygrpc-native serves plaintext only) or pygrpc-native is not installed; ``auto`` is native when TLS is off and
    pygrpc-native is installed, else grpcio."""
    if choice == "grpcio":
        return "grpcio"
    available = native_front_available()
    if choice == "native":
        if tls_enabled:
            raise GrpcFrontError(
                "grpc_server=native cannot serve TLS (pygrpc-native is plaintext only): use grpc_server=grpcio or auto"
            )
        if not available:
            raise GrpcFrontError("grpc_server=native needs the pygrpc-native package, which is not installed")
        return "native"
    return "native" if available and not tls_enabled else "grpcio"


def native_options(options: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``options`` without NATIVE_REFUSED_OPTIONS (pygrpc-native raises on them when set)."""
    return [(name, value) for name, value in options if name not in NATIVE_REFUSED_OPTIONS]


def aio_server(
    front: GrpcFront, options: Sequence[tuple[str, Any]], interceptors: Sequence[grpc.aio.ServerInterceptor]
) -> grpc.aio.Server:
    """A new, unstarted ``grpc.aio.Server`` on ``front``. Raises GrpcFrontError when ``native`` cannot import."""
    if front == "grpcio":
        return grpc.aio.server(options=options, interceptors=interceptors)
    try:
        native = importlib.import_module(f"{NATIVE_MODULE}.aio")
    except ImportError as exc:
        raise GrpcFrontError(f"grpc_server=native: cannot import pygrpc-native: {exc}") from exc
    server: grpc.aio.Server = native.server(options=native_options(options), interceptors=interceptors)
    return server


class GrpcAioDeadline:
    """A servicer context whose ``time_remaining()`` answers None without a deadline, as grpc.aio's does; every
    other attribute is the wrapped context's. One per call, created on the service's loop."""

    __slots__ = ("_context",)

    def __init__(self, context: Any) -> None:
        self._context = context

    def time_remaining(self) -> float | None:
        """Seconds left before the call's deadline; None when it has none."""
        remaining: float | None = self._context.time_remaining()
        return None if remaining is None or remaining >= NATIVE_NO_DEADLINE_S else remaining

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)
