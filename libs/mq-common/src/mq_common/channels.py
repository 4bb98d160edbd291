"""One grpc.aio channel per peer address, shared by every client adapter of a process (an edge module).

Mirrors NettyRemotingClient's channelTables. Use and close a pool on one asyncio loop (channels belong to the
loop that created them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Generic, TypeVar

import grpc

from mq_common.errors import InvalidParameterError
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.tls import TlsClientConfig, channel_credentials, channel_options

DEFAULT_RPC_TIMEOUT_MS: Final = 3000
# gRPC's default reconnect backoff grows to 120 s, during which calls to a restarted peer fail fast with
# UNAVAILABLE; RocketMQ's client reconnects on the next invoke, so cap the backoff low.
MAX_RECONNECT_BACKOFF_MS: Final = 3000
CLIENT_CHANNEL_OPTIONS: Final[list[tuple[str, int]]] = [
    *CHANNEL_OPTIONS,
    ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
]

_S = TypeVar("_S")


def seconds(timeout_ms: int) -> float:
    """A gRPC ``timeout=`` (seconds) for ``timeout_ms``, at least 1 ms."""
    return max(timeout_ms, 1) / 1000.0


class ChannelPool:
    """One grpc.aio channel per ``"host:port"`` (CLIENT_CHANNEL_OPTIONS), created lazily on first use.

    Plaintext by default; with ``tls`` every channel is a TLS channel over one ChannelCredentials built here
    (reads the PEM files once, blocking; raises OSError when they cannot be read). ``interceptors`` (e.g.
    mq_common.auth.interceptor.signing_interceptors) wrap every call of every channel. ``stream_metadata`` gives
    the metadata a long-lived stream-stream call is opened with (mq_common.auth.interceptor.signing_pool: the
    signed headers, instead of a stream-stream interceptor, which costs grpc.aio a queue hop per write).
    """

    def __init__(
        self,
        tls: TlsClientConfig | None = None,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        stream_metadata: Callable[[], Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        self._stream_metadata = stream_metadata
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._interceptors = list(interceptors) or None
        self.tls = tls
        self._credentials = channel_credentials(tls) if tls is not None else None
        self._options: list[tuple[str, int | str]] = [*CLIENT_CHANNEL_OPTIONS, *channel_options(tls)]

    def stream_metadata(self) -> tuple[tuple[str, str], ...] | None:
        """The metadata to open a stream-stream call with now (None: none)."""
        return tuple(self._stream_metadata()) if self._stream_metadata is not None else None

    def get(self, addr: str) -> grpc.aio.Channel:
        """The channel to ``addr`` (``"host:port"``), creating it if needed. Never blocks; never raises for a
        dead peer (calls on it fail with UNAVAILABLE). Raises InvalidParameterError for an empty address."""
        channel = self._channels.get(addr)
        if channel is None:
            if not addr:
                raise InvalidParameterError("broker or name server address is empty")
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(addr, options=self._options, interceptors=self._interceptors)
            else:
                channel = grpc.aio.secure_channel(
                    addr, self._credentials, options=self._options, interceptors=self._interceptors
                )
            self._channels[addr] = channel
        return channel

    async def close(self) -> None:
        """Close every channel; in-flight calls are cancelled. The pool may be reused afterwards."""
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await channel.close()


class StubCache(Generic[_S]):
    """One stub per peer address over a :class:`ChannelPool`, built again when the pool's channel changed (a stub
    builds a callable per method: worth keeping on a hot path)."""

    def __init__(self, pool: ChannelPool, make_stub: Callable[[grpc.aio.Channel], _S]) -> None:
        self._pool = pool
        self._make_stub = make_stub
        self._stubs: dict[str, tuple[grpc.aio.Channel, _S]] = {}

    def get(self, addr: str) -> _S:
        """The stub of ``addr``'s current channel. Raises like :meth:`ChannelPool.get`."""
        channel = self._pool.get(addr)
        cached = self._stubs.get(addr)
        if cached is None or cached[0] is not channel:
            cached = self._stubs[addr] = (channel, self._make_stub(channel))
        return cached[1]
