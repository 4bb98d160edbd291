"""The one gRPC status -> MQError mapping of every client adapter (Mirrors NettyRemotingClient#invokeSync's
exceptions).

- DEADLINE_EXCEEDED -> RemotingTimeoutError (RPC_TIME_OUT, -1006): retriable;
- INVALID_ARGUMENT -> InvalidParameterError (INVALID_PARAMETER, 29): the server refused a malformed request,
  which would fail the same way on any server, so it is not retriable (the producer's retry loop reads
  ``retriable``; the name server failover moves on only after a RemotingError);
- UNAVAILABLE and every other status -> RemotingError (RPC_SEND_TO_CHANNEL_FAILED, -1004): retriable.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

import grpc

from mq_common.errors import InvalidParameterError, MQError, RemotingError, RemotingTimeoutError

_R = TypeVar("_R")


class FailedCall(Protocol):
    """What a failed call carries, sync (``grpc.RpcError`` that is a ``grpc.Call``) or asyncio (AioRpcError)."""

    def code(self) -> grpc.StatusCode: ...

    def details(self) -> str | None: ...


def transport_error(exc: FailedCall, addr: str) -> MQError:
    """The MQError for a failed call to ``addr`` (``"host:port"``), from a sync or an asyncio stub."""
    detail = f"{addr}: {exc.code().name} {exc.details() or ''}".strip()
    code = exc.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RemotingTimeoutError(f"wait response on the channel <{addr}> timeout: {detail}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidParameterError(exc.details() or detail)
    return RemotingError(f"connect to <{addr}> failed: {detail}")


async def invoke(call: Awaitable[_R], addr: str) -> _R:
    """Await one gRPC call to ``addr``; a failed status raises :func:`transport_error`'s MQError."""
    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise transport_error(exc, addr) from exc
