"""RequestGuard reuses the guarded wrapper of a method while the continuation gives it the same handler (the
registered one), and builds a new one when the handler changes (an inner interceptor that makes one per call)."""

from __future__ import annotations

from typing import Any

import grpc
from mq_common.grpc_guard import DEFAULT_REQUEST_LIMITS, RequestGuard

METHOD = "/grpc.health.v1.Health/Check"


class Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def handler(answer: str) -> grpc.RpcMethodHandler[Any, Any]:
    async def behavior(request: Any, context: Any) -> str:
        return answer

    return grpc.unary_unary_rpc_method_handler(behavior, lambda raw: raw, lambda response: response)


async def test_the_wrapper_is_reused_for_the_same_handler_and_rebuilt_for_another() -> None:
    guard = RequestGuard(DEFAULT_REQUEST_LIMITS)
    first, second = handler("first"), handler("second")
    current = first

    async def continuation(details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        return current

    wrapped = await guard.intercept_service(continuation, Details(METHOD))
    assert wrapped is not None
    assert await guard.intercept_service(continuation, Details(METHOD)) is wrapped
    assert await wrapped.unary_unary(b"", None) == "first"
    current = second
    rebuilt = await guard.intercept_service(continuation, Details(METHOD))
    assert rebuilt is not None
    assert rebuilt is not wrapped
    assert await rebuilt.unary_unary(b"", None) == "second"


async def test_an_unknown_method_is_not_kept() -> None:
    guard = RequestGuard(DEFAULT_REQUEST_LIMITS)

    async def continuation(details: grpc.HandlerCallDetails) -> None:
        return None

    assert await guard.intercept_service(continuation, Details("/no.Such/Method")) is None
    assert guard._wrapped == {}
