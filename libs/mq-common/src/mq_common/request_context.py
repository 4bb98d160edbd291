"""Per-RPC context for every service: a request id carried in gRPC metadata and bound into log lines, and the
RPC latency observation (``rocketmq_rpc_latency``).

The gateway takes ``x-mq-request-id`` from the client's metadata (or makes one: 16 hex digits) for each call;
the id lives in a context variable for the call's task, is bound into every structlog line of the call
(``request_id``), and the gateway's BrokerClient sends it on to the broker in the same metadata key, where the
broker's interceptor binds it again. A coalesced broker call carries the id of the call that opened the batch.

Interceptors run on the service's asyncio loop, once per RPC (never per message).
"""

from __future__ import annotations

import contextvars
import inspect
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import grpc
import structlog

REQUEST_ID_METADATA_KEY: Final = "x-mq-request-id"
MAX_REQUEST_ID_CHARS: Final = 64
_current: contextvars.ContextVar[str] = contextvars.ContextVar("mq_request_id", default="")

# (method, response code name, elapsed ms) -> None
RpcObserver = Callable[[str, str, float], None]


def current_request_id() -> str:
    """The request id of the RPC this task serves ('' outside one)."""
    return _current.get()


def outgoing_metadata() -> tuple[tuple[str, str], ...] | None:
    """Metadata for a downstream call made while serving an RPC (None outside one)."""
    rid = _current.get()
    return ((REQUEST_ID_METADATA_KEY, rid),) if rid else None


def new_request_id() -> str:
    return secrets.token_hex(8)


def sanitize_request_id(value: str) -> str:
    """Printable ASCII only (letters, digits, ``-_.:``), at most MAX_REQUEST_ID_CHARS: the id goes into logs."""
    return "".join(c for c in value[:MAX_REQUEST_ID_CHARS] if c.isalnum() or c in "-_.:")


def _incoming_id(details: grpc.HandlerCallDetails) -> str:
    for key, value in details.invocation_metadata or ():
        if key == REQUEST_ID_METADATA_KEY and isinstance(value, str) and value:
            return sanitize_request_id(value)
    return ""


def _bind(rid: str) -> None:
    _current.set(rid)
    structlog.contextvars.bind_contextvars(request_id=rid)


def bind_request_id(raw: str) -> None:
    """Bind a request id that arrived inside a message (a SendStream frame) to the current task, sanitized as a
    header's; an empty id binds nothing. Call it in the task that serves that message."""
    rid = sanitize_request_id(raw)
    if rid:
        _bind(rid)


def bind_call(raw_request_id: str, **fields: str) -> None:
    """Bind a call's request id (sanitized as a header's; empty: a new one) and ``fields`` (e.g. client_id) to the
    current task's log context in one step: for servicers kept out of RequestContextInterceptor."""
    rid = sanitize_request_id(raw_request_id) or new_request_id()
    _current.set(rid)
    structlog.contextvars.bind_contextvars(request_id=rid, **fields)


def response_code_name(response: object) -> str:
    """``SUCCESS`` unless the response has a non-zero ``code`` field (then its ResponseCode name)."""
    code = getattr(response, "code", 0)
    if not code:
        return "SUCCESS"
    from mq_common.response_code import ResponseCode

    return ResponseCode.name_of(int(code))


class RequestContextInterceptor(grpc.aio.ServerInterceptor):
    """Binds the request id of each call and, with ``observe``, reports (method, response code, ms) when the
    handler returns. ``generate``: make an id when the caller sent none (the gateway); else calls without one
    get none (the broker, the name server). The method label is the RPC's short name (``SendBatch``).
    Aborted or failing handlers report ``response_code="GRPC_ERROR"``. Methods in ``self_observed`` (short names)
    are left alone: their servicer binds ids and reports per message (the broker's SendStream, per frame).
    Calls whose method path starts with one of ``self_observed_prefixes`` (``"/apache.rocketmq.v2."``) are left
    alone before anything else is done: a whole service that binds and observes itself, at no per-call cost here.
    """

    def __init__(
        self,
        *,
        observe: RpcObserver | None = None,
        generate: bool = False,
        self_observed: frozenset[str] = frozenset(),
        self_observed_prefixes: tuple[str, ...] = (),
    ) -> None:
        self._observe = observe
        self._generate = generate
        self._self_observed = self_observed
        self._prefixes = self_observed_prefixes

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or (self._prefixes and str(handler_call_details.method).startswith(self._prefixes)):
            return handler
        method = str(handler_call_details.method).rsplit("/", 1)[-1]
        if method in self._self_observed:
            return handler
        rid = _incoming_id(handler_call_details)
        if not rid and self._generate:
            rid = new_request_id()
        if not rid and self._observe is None:
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, rid, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._streaming(handler.stream_stream, rid, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(handler.unary_stream, rid, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        assert handler.stream_unary is not None
        return grpc.stream_unary_rpc_method_handler(
            self._unary(handler.stream_unary, rid, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _unary(self, behavior: Callable[..., Any], rid: str, method: str) -> Callable[..., Awaitable[Any]]:
        observe = self._observe

        async def wrapped(request: Any, context: Any) -> Any:
            if rid:
                _bind(rid)
            begin = time.perf_counter()
            code = "GRPC_ERROR"
            try:
                response = await behavior(request, context)
                code = response_code_name(response)
                return response
            finally:
                if observe is not None:
                    observe(method, code, (time.perf_counter() - begin) * 1000.0)

        return wrapped

    def _streaming(self, behavior: Callable[..., Any], rid: str, method: str) -> Callable[..., Any]:
        observe = self._observe
        if not inspect.isasyncgenfunction(behavior):
            # A coroutine that answers with context.write() (grpc's health Watch) stays a coroutine: `async for`
            # over it fails. It returns None, which response_code_name counts as SUCCESS.
            return self._unary(behavior, rid, method)

        async def wrapped(request: Any, context: Any) -> AsyncIterator[Any]:
            if rid:
                _bind(rid)
            begin = time.perf_counter()
            code = "GRPC_ERROR"
            try:
                async for response in behavior(request, context):
                    yield response
                code = "SUCCESS"
            finally:
                if observe is not None:
                    observe(method, code, (time.perf_counter() - begin) * 1000.0)

        return wrapped
