"""The request guard every ServiceServer installs: undecodable or over-bound requests never reach a handler.

gRPC's own answer to a request its deserializer cannot parse is ``UNKNOWN`` with no log line, and a parse
allocates per element before any handler could count. :class:`RequestGuard` wraps each method's request
deserializer: the raw bytes are first checked against the method's element bounds (mq_common.wire_bounds, no
allocation per element), then parsed; a request that fails either is answered ``INVALID_ARGUMENT`` with a details
string saying what was wrong in words (the bound's setting name, or "cannot decode <type>"), never an exception
type, and leaves one structlog warning (``request_refused_by_guard``: method, peer, reason), at most
LOG_BURST per LOG_WINDOW_S (the next line then carries how many were suppressed), so a flood cannot fill a disk.
On a stream request (SendStream, Telemetry) such a frame ends the stream with the same status.

Runs on the service's asyncio loop (gRPC aio calls deserializers and interceptors there).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor

from mq_common.grpc_front import GrpcAioDeadline
from mq_common.logging import get_logger
from mq_common.wire_bounds import BoundExceeded, FieldBound, Malformed, build_plan, check_bounds

log = get_logger("mq_common.grpc_guard")

DEFAULT_MAX_CONCURRENT_STREAMS: Final = 1024
"""HTTP/2 streams (calls in flight) one client connection may hold open; gRPC's default is unbounded."""
LOG_BURST: Final = 20
LOG_WINDOW_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """What the guard enforces. ``bounds``: full method name (``/mq.broker.v1.Broker/SendStream``) -> its
    FieldBounds (every other top-level repeated field of a request gets wire_bounds.DEFAULT_MAX_ELEMENTS).
    ``max_concurrent_streams``: the gRPC server option ``grpc.max_concurrent_streams`` (per connection)."""

    bounds: Mapping[str, tuple[FieldBound, ...]] = field(default_factory=dict)
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS

    def server_options(self) -> list[tuple[str, int]]:
        """The gRPC server options these limits set."""
        return [("grpc.max_concurrent_streams", self.max_concurrent_streams)]


DEFAULT_REQUEST_LIMITS: Final = RequestLimits()


@dataclass(frozen=True, slots=True)
class _Refused:
    """What the wrapped deserializer returns instead of raising: the words of the refusal."""

    reason: str


class _LogLimiter:
    """At most LOG_BURST warnings per LOG_WINDOW_S seconds; counts the ones it drops."""

    def __init__(self) -> None:
        self._window_start = 0.0
        self._logged = 0
        self._suppressed = 0

    def warn(self, method: str, peer: str, reason: str) -> None:
        now = time.monotonic()
        if now - self._window_start >= LOG_WINDOW_S:
            self._window_start, self._logged = now, 0
        if self._logged >= LOG_BURST:
            self._suppressed += 1
            return
        self._logged += 1
        log.warning("request_refused_by_guard", method=method, peer=peer, reason=reason, suppressed=self._suppressed)
        self._suppressed = 0


def _guarded_deserializer(deserialize: Callable[[bytes], Any], plan: Any, type_name: str) -> Callable[[bytes], Any]:
    def guarded(raw: bytes) -> Any:
        try:
            check_bounds(raw, plan)
        except BoundExceeded as exc:
            return _Refused(f"request refused: {exc}")
        except Malformed:
            return _Refused(f"cannot decode the request as {type_name}")
        try:
            return deserialize(raw)
        except Exception:  # the parser's DecodeError, or anything else it raises on hostile bytes
            return _Refused(f"cannot decode the request as {type_name}")

    return guarded


def _raw(data: bytes) -> bytes:
    return data


def _same(context: Any) -> Any:
    return context


def _request_descriptor(method: str) -> Descriptor | None:
    """The request type of ``/<service>/<method>`` from the default descriptor pool (None when unknown)."""
    service_name, _, method_name = method.lstrip("/").partition("/")
    try:
        service = descriptor_pool.Default().FindServiceByName(service_name)
        return service.methods_by_name[method_name].input_type
    except KeyError:
        return None


class RequestGuard(grpc.aio.ServerInterceptor):
    """Installed first by mq_common.grpc_server.ServiceServer (the outermost interceptor). Mirrors what the
    RocketMQ 5 proxy gets from grpc-java's message parsing (INVALID_ARGUMENT on a bad message) plus count bounds.
    ``grpc_aio_deadline``: hand handlers a mq_common.grpc_front.GrpcAioDeadline over their context (the native
    front's ServiceServer sets it, so ``time_remaining()`` is None without a deadline on both fronts)."""

    def __init__(self, limits: RequestLimits, *, grpc_aio_deadline: bool = False) -> None:
        self._limits = limits
        self._adapt: Callable[[Any], Any] = GrpcAioDeadline if grpc_aio_deadline else _same
        # Per registered method (bounded by the services' protos): its bounds plan and request type name, so a
        # call costs no descriptor lookup.
        self._plans: dict[str, tuple[Any, str]] = {}
        # Per method: the last handler the continuation gave and its guarded wrapper. Registered handlers are the
        # same object call after call (unless an inner interceptor makes one per call), so the wrapper is reused.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}
        self._log = _LogLimiter()
        # Unary and server-streaming calls inside their handler now; after drain() began, new ones are refused.
        self.in_flight = 0
        self._closing = False
        self._drained = asyncio.Event()

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new unary and server-streaming calls (UNAVAILABLE, as a stopping server) and wait up to
        ``timeout_s`` for the ones inside their handlers; True when none is left. Runs on the server's loop."""
        self._closing = True
        if self.in_flight == 0:
            return True
        try:
            async with asyncio.timeout(timeout_s):
                await self._drained.wait()
        except TimeoutError:
            return False
        return True

    async def _enter(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if self._closing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        self.in_flight += 1

    def _leave(self) -> None:
        self.in_flight -= 1
        if self._closing and self.in_flight == 0:
            self._drained.set()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = str(handler_call_details.method)
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        # A handler that parses the raw bytes itself (the gateway's SendBatch) still gets its bounds checked.
        deserialize = handler.request_deserializer or _raw
        planned = self._plans.get(method)
        if planned is None:
            descriptor = _request_descriptor(method)
            type_name = descriptor.name if descriptor is not None else "its request type"
            planned = self._plans[method] = (build_plan(self._limits.bounds.get(method, ()), descriptor), type_name)
        guarded = _guarded_deserializer(deserialize, *planned)
        wrapped = self._wrap(handler, guarded, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], guarded: Callable[[bytes], Any], method: str
    ) -> grpc.RpcMethodHandler[Any, Any]:
        serializer = handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._unary(handler.unary_unary, method), guarded, serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._unary_stream(handler.unary_stream, method), guarded, serializer
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._stream_unary(handler.stream_unary, method), guarded, serializer
            )
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(
            self._stream_stream(handler.stream_stream, method), guarded, serializer
        )

    async def _refuse(self, refused: _Refused, context: grpc.aio.ServicerContext[Any, Any], method: str) -> None:
        self._log.warn(method, context.peer(), refused.reason)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, refused.reason)

    async def _checked(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any], method: str
    ) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Refused):
                await self._refuse(request, context, method)
            yield request

    def _unary(self, behavior: Callable[..., Any], method: str) -> Callable[..., Awaitable[Any]]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if isinstance(request, _Refused):
                await self._refuse(request, context, method)
            await self._enter(context)
            try:
                return await behavior(request, self._adapt(context))
            finally:
                self._leave()

        return wrapped

    def _stream_unary(self, behavior: Callable[..., Any], method: str) -> Callable[..., Awaitable[Any]]:
        async def wrapped(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            return await behavior(self._checked(requests, context, method), self._adapt(context))

        return wrapped

    def _unary_stream(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behavior):
            # A coroutine that answers with context.write() (grpc's health Watch) stays a coroutine.
            async def written(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
                if isinstance(request, _Refused):
                    await self._refuse(request, context, method)
                await self._enter(context)
                try:
                    await behavior(request, self._adapt(context))
                finally:
                    self._leave()

            return written

        async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if isinstance(request, _Refused):
                await self._refuse(request, context, method)
            await self._enter(context)
            try:
                async for response in behavior(request, self._adapt(context)):
                    yield response
            finally:
                self._leave()

        return wrapped

    def _stream_stream(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behavior):

            async def written(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> None:
                await behavior(self._checked(requests, context, method), self._adapt(context))

            return written

        async def wrapped(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async for response in behavior(self._checked(requests, context, method), self._adapt(context)):
                yield response

        return wrapped
