"""gRPC status -> the client's transport errors (Mirrors NettyRemotingClient#invokeSync's exceptions).

- DEADLINE_EXCEEDED -> RemotingTimeoutError (RPC_TIME_OUT, -1006);
- INVALID_ARGUMENT -> InvalidParameterError (INVALID_PARAMETER, 29): the server refused a malformed request;
- UNAVAILABLE and every other status -> RemotingError (RPC_SEND_TO_CHANNEL_FAILED, -1004).
"""

from __future__ import annotations

import grpc
from mq_common.errors import InvalidParameterError, MQError, RemotingError, RemotingTimeoutError


def transport_error(exc: grpc.aio.AioRpcError, addr: str) -> MQError:
    """The MQError for a failed call to ``addr`` (``"host:port"``)."""
    detail = f"{addr}: {exc.code().name} {exc.details() or ''}".strip()
    code = exc.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RemotingTimeoutError(f"wait response on the channel <{addr}> timeout: {detail}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidParameterError(exc.details() or detail)
    return RemotingError(f"connect to <{addr}> failed: {detail}")
