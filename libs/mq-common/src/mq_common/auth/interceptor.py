"""grpc.aio client interceptors that sign every outbound call (unary and streaming) with an access key.

``ChannelPool(tls, signing_interceptors(credentials))`` signs all calls of a process's channels: each call gets
``x-mq-date-time`` (UTC, ``yyyyMMddTHHmmssZ``) and ``authorization`` (signature.sign). The pair is computed once per
second and reused, so signing costs one HMAC per second, not per call. Runs on the loop that owns the channel.

grpc.aio files an interceptor under the FIRST call kind it subclasses (unary-unary before unary-stream before ...),
so one object implementing all four kinds would sign unary-unary calls only (a SendStream would go unsigned): use
:func:`signing_interceptors` (or :meth:`SigningInterceptor.interceptors`), one interceptor per kind over one cache.
Mirrors org.apache.rocketmq.acl.common.AclClientRPCHook / the SDKs' Signature.metadata.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import grpc

from mq_common.auth.settings import Credentials
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, sign
from mq_common.channels import ChannelPool
from mq_common.tls import TlsClientConfig

_SIGNED_KEYS = frozenset({AUTHORIZATION, DATE_TIME})


class SigningInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor,
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamUnaryClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    """Adds the signed headers of ``credentials`` to every call (replacing any the caller set). As a channel
    interceptor it signs unary-unary calls only (see the module docstring): pass :meth:`interceptors`."""

    def __init__(self, credentials: Credentials, now_s: Callable[[], float] = time.time) -> None:
        self._credentials = credentials
        self._now_s = now_s
        self._second = -1
        self._pairs: tuple[tuple[str, str], ...] = ()

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The signed pairs of the current second (cached for that second)."""
        now = self._now_s()
        second = int(now)
        if second != self._second:
            moment = datetime.fromtimestamp(second, UTC)
            self._pairs = sign(self._credentials.access_key, self._credentials.secret_key, moment)
            self._second = second
        return self._pairs

    def interceptors(self, *, stream_stream: bool = True) -> list[grpc.aio.ClientInterceptor]:
        """This interceptor (unary-unary) and one per streaming kind (stream-stream only with ``stream_stream``),
        all signing through this one's cache."""
        kinds: list[grpc.aio.ClientInterceptor] = [self, _UnaryStreamSigning(self), _StreamUnarySigning(self)]
        return [*kinds, _StreamStreamSigning(self)] if stream_stream else kinds

    def _signed(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        kept: Iterable[tuple[str, Any]] = (kv for kv in (details.metadata or ()) if kv[0] not in _SIGNED_KEYS)
        metadata = grpc.aio.Metadata(*kept, *self.headers())
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details), request)

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details), request)

    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await continuation(self._signed(client_call_details), request_iterator)

    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await continuation(self._signed(client_call_details), request_iterator)


class _UnaryStreamSigning(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, signer: SigningInterceptor) -> None:
        self._signer = signer

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._signer.intercept_unary_stream(continuation, client_call_details, request)


class _StreamUnarySigning(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, signer: SigningInterceptor) -> None:
        self._signer = signer

    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await self._signer.intercept_stream_unary(continuation, client_call_details, request_iterator)


class _StreamStreamSigning(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, signer: SigningInterceptor) -> None:
        self._signer = signer

    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: AsyncIterable[Any] | Iterable[Any]
    ) -> Any:
        return await self._signer.intercept_stream_stream(continuation, client_call_details, request_iterator)


def signing_interceptors(credentials: Credentials | None) -> list[grpc.aio.ClientInterceptor]:
    """``ChannelPool(tls, signing_interceptors(credentials))``: one interceptor per call kind sharing one cache of
    signed headers; none without credentials."""
    return SigningInterceptor(credentials).interceptors() if credentials is not None else []


def signing_pool(tls: TlsClientConfig | None, credentials: Credentials | None) -> ChannelPool:
    """A ChannelPool whose calls carry the signed headers of ``credentials`` (plain ChannelPool(tls) without):
    unary and half-streaming calls through interceptors, stream-stream calls (Broker.SendStream) through
    :meth:`ChannelPool.stream_metadata`, which their opener passes. grpc.aio turns every write of an intercepted
    stream-stream call into a queue hop and a task switch: about 10 % of the gateway's CPU for single-message
    sends, paid per message for a signature needed once per stream."""
    if credentials is None:
        return ChannelPool(tls)
    signer = SigningInterceptor(credentials)
    return ChannelPool(tls, signer.interceptors(stream_stream=False), stream_metadata=signer.headers)
