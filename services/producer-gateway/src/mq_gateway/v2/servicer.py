"""``apache.rocketmq.v2.MessagingService``: every RPC of RocketMQ 5's gRPC API, served beside mq.gateway.v1.

Per call: the client context from the metadata (no x-mq-client-id -> CLIENT_ID_REQUIRED 40017), the request id
and client id bound to the log context, authentication and authorisation when on (mq_gateway.auth: UNAUTHORIZED
40100 / FORBIDDEN 40300 before any work; Telemetry is authenticated when it opens: UNAUTHENTICATED), the
activity called, the answer observed (rocketmq_rpc_latency). Errors
are in-band (gRPC OK, the code in the response's ``status``): V2Error and MQError map through
:mod:`mq_gateway.v2.codes`, anything unexpected is logged and answers INTERNAL_SERVER_ERROR. Only Telemetry uses
gRPC statuses (INVALID_ARGUMENT). Producer side, route and Telemetry are here; the consumer RPCs go to a
:class:`ConsumerActivities`; RecallMessage to a RecallMessageActivity (mq_gateway.v2.recall; without one, to the
TransactionActivities), EndTransaction to a TransactionActivities (the message-types issue). Handlers run on the
gateway's asyncio loop. Mirrors org.apache.rocketmq.proxy.grpc.v2.GrpcMessagingApplication.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol, TypeVar

import grpc
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq_common.auth.metadata import AuthMetadataUnavailableError
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.request_context import bind_call

from mq_gateway.auth import AuthRefusal, GatewayAuth
from mq_gateway.v2.codes import Code, V2Error, ok_status, status_of
from mq_gateway.v2.context import ClientContext, client_context
from mq_gateway.v2.metrics import V2RpcMetrics
from mq_gateway.v2.permissions import permissions_of
from mq_gateway.v2.recall import RecallMessageActivity
from mq_gateway.v2.route import RouteActivity
from mq_gateway.v2.send import SendMessageActivity
from mq_gateway.v2.telemetry import TelemetryService
from mq_gateway.v2.transactions import TransactionActivities

log = get_logger("mq_gateway.v2.servicer")

SERVICE_NAME: Final = service_pb2.DESCRIPTOR.services_by_name["MessagingService"].full_name
METHOD_PREFIX: Final = f"/{SERVICE_NAME}/"
REFUSAL_READ_WAIT_S: Final = 1.0
# Of a call's deadline, what the send budget leaves for the answer to travel back (an in-band failure status
# beats DEADLINE_EXCEEDED: clients retry on it).
ANSWER_MARGIN_MS: Final = 50
_R = TypeVar("_R")
_Q = TypeVar("_Q")
_Context = grpc.aio.ServicerContext[Any, Any]


class ConsumerActivities(Protocol):
    """The consumer RPCs (implemented in mq_gateway.v2.consumer). Methods answer errors in-band; the servicer
    turns anything they raise into a status."""

    def receive_message(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]: ...
    async def ack_message(
        self, request: service_pb2.AckMessageRequest, ctx: ClientContext
    ) -> service_pb2.AckMessageResponse: ...
    async def change_invisible_duration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, ctx: ClientContext
    ) -> service_pb2.ChangeInvisibleDurationResponse: ...
    async def forward_message_to_dead_letter_queue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, ctx: ClientContext
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse: ...
    async def query_assignment(
        self, request: service_pb2.QueryAssignmentRequest, ctx: ClientContext
    ) -> service_pb2.QueryAssignmentResponse: ...
    async def query_offset(
        self, request: service_pb2.QueryOffsetRequest, ctx: ClientContext
    ) -> service_pb2.QueryOffsetResponse: ...
    async def get_offset(
        self, request: service_pb2.GetOffsetRequest, ctx: ClientContext
    ) -> service_pb2.GetOffsetResponse: ...
    async def update_offset(
        self, request: service_pb2.UpdateOffsetRequest, ctx: ClientContext
    ) -> service_pb2.UpdateOffsetResponse: ...
    def pull_message(
        self, request: service_pb2.PullMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.PullMessageResponse]: ...
    async def subscription_group_config(
        self, group: str, topic: str = ""
    ) -> SubscriptionGroupConfig: ...  # raises MQError
    async def close(self) -> None: ...


def time_remaining_ms(context: _Context) -> float | None:
    """The call's remaining deadline in ms; None without a deadline."""
    remaining = context.time_remaining()
    return None if remaining is None else remaining * 1000.0


def _enter(context: _Context) -> ClientContext:
    """The call's ClientContext, its request id and client id bound to the log context. Raises V2Error
    (CLIENT_ID_REQUIRED 40017)."""
    ctx = client_context(context.invocation_metadata())
    bind_call(ctx.request_id, client_id=ctx.client_id)
    return ctx


def _error_status(exc: Exception, method: str) -> definition_pb2.Status:
    if not isinstance(exc, V2Error | MQError):
        log.exception("v2_handler_failed", method=method)
    return status_of(exc)


class MessagingServiceServicer(service_pb2_grpc.MessagingServiceServicer):
    """Every MessagingService RPC; see the module docstring."""

    def __init__(
        self,
        route: RouteActivity,
        send: SendMessageActivity,
        telemetry: TelemetryService,
        consumer: ConsumerActivities,
        transactions: TransactionActivities | None = None,
        metrics: V2RpcMetrics | None = None,
        send_timeout_ms: int = 3_000,
        auth: GatewayAuth | None = None,
        recall: RecallMessageActivity | None = None,
    ) -> None:
        self.route = route
        self.send = send
        self.telemetry = telemetry
        self.consumer = consumer
        self.transactions = transactions or TransactionActivities()
        self.metrics = metrics
        self._send_timeout_ms = send_timeout_ms
        # None when both auth flags are off: no per-call cost then
        self.auth = auth if auth is not None and auth.enabled else None
        # (request, ctx) activities as (request, ctx, grpc context) handlers, wrapped once
        self._end_transaction = _drop_context(self.transactions.end_transaction)
        self._recall_message = _drop_context(
            recall.recall_message if recall is not None else self.transactions.recall_message
        )
        self._ack_message = _drop_context(consumer.ack_message)
        self._change_invisible_duration = _drop_context(consumer.change_invisible_duration)
        self._forward_to_dlq = _drop_context(consumer.forward_message_to_dead_letter_queue)
        self._query_assignment = _drop_context(consumer.query_assignment)
        self._query_offset = _drop_context(consumer.query_offset)
        self._get_offset = _drop_context(consumer.get_offset)
        self._update_offset = _drop_context(consumer.update_offset)

    async def _call(
        self,
        method: str,
        request: _Q,
        context: _Context,
        handler: Callable[[_Q, ClientContext, _Context], Awaitable[_R]],
        response_type: Callable[..., _R],
    ) -> _R:
        begin = time.perf_counter()
        language = ""
        try:
            ctx = _enter(context)
            language = ctx.language
            if self.auth is not None:
                await self._check_auth(ctx, request, context)
            response = await handler(request, ctx, context)
        except Exception as exc:
            response = response_type(status=_error_status(exc, method))
        if self.metrics is not None:
            code = response.status.code  # type: ignore[attr-defined]
            self.metrics.observe(method, code, language, (time.perf_counter() - begin) * 1000.0)
        return response

    async def _stream(
        self,
        method: str,
        request: _Q,
        context: _Context,
        handler: Callable[[_Q, ClientContext, float | None], AsyncIterator[_R]],
        response_type: Callable[..., _R],
    ) -> AsyncIterator[_R]:
        begin = time.perf_counter()
        language = ""
        code: int = Code.OK
        try:
            ctx = _enter(context)
            language = ctx.language
            if self.auth is not None:
                await self._check_auth(ctx, request, context)
            async for response in handler(request, ctx, time_remaining_ms(context)):
                if response.HasField("status"):  # type: ignore[attr-defined]
                    code = response.status.code  # type: ignore[attr-defined]
                yield response
        except Exception as exc:
            status = _error_status(exc, method)
            code = status.code
            yield response_type(status=status)
        finally:
            if self.metrics is not None:
                self.metrics.observe(method, code, language, (time.perf_counter() - begin) * 1000.0)

    async def _check_auth(self, ctx: ClientContext, request: object, context: _Context) -> None:
        """Authenticate the call and authorise what ``request`` needs (mq_gateway.v2.permissions). Raises
        V2Error UNAUTHORIZED 40100 / FORBIDDEN 40300; AuthMetadataUnavailableError (-> INTERNAL_SERVER_ERROR)."""
        assert self.auth is not None
        try:
            await self.auth.check(
                ctx.authorization, ctx.date_time, ctx.client_id, context.peer(), permissions_of(request)
            )
        except AuthRefusal as refusal:
            raise V2Error(Code.UNAUTHORIZED if refusal.unauthenticated else Code.FORBIDDEN, refusal.remark) from None

    # -- producer side, route, client lifecycle -------------------------------------------------------------
    async def QueryRoute(
        self, request: service_pb2.QueryRouteRequest, context: _Context
    ) -> service_pb2.QueryRouteResponse:
        return await self._call("QueryRoute", request, context, self._query_route, service_pb2.QueryRouteResponse)

    async def _query_route(
        self, request: service_pb2.QueryRouteRequest, ctx: ClientContext, context: _Context
    ) -> service_pb2.QueryRouteResponse:
        return await self.route.query_route(request)

    async def SendMessage(
        self, request: service_pb2.SendMessageRequest, context: _Context
    ) -> service_pb2.SendMessageResponse:
        return await self._call("SendMessage", request, context, self._send_message, service_pb2.SendMessageResponse)

    async def _send_message(
        self, request: service_pb2.SendMessageRequest, ctx: ClientContext, context: _Context
    ) -> service_pb2.SendMessageResponse:
        remaining = context.time_remaining()
        # with a deadline, leave the answer time to reach the client before it
        timeout_ms = self._send_timeout_ms if remaining is None else max(1, int(remaining * 1000.0) - ANSWER_MARGIN_MS)
        return await self.send.send_message(request, context.peer(), timeout_ms)

    async def Heartbeat(
        self, request: service_pb2.HeartbeatRequest, context: _Context
    ) -> service_pb2.HeartbeatResponse:
        return await self._call("Heartbeat", request, context, _heartbeat, service_pb2.HeartbeatResponse)

    async def NotifyClientTermination(
        self, request: service_pb2.NotifyClientTerminationRequest, context: _Context
    ) -> service_pb2.NotifyClientTerminationResponse:
        return await self._call(
            "NotifyClientTermination",
            request,
            context,
            _notify_client_termination,
            service_pb2.NotifyClientTerminationResponse,
        )

    async def EndTransaction(
        self, request: service_pb2.EndTransactionRequest, context: _Context
    ) -> service_pb2.EndTransactionResponse:
        return await self._call(
            "EndTransaction", request, context, self._end_transaction,
            service_pb2.EndTransactionResponse,
        )  # fmt: skip

    async def RecallMessage(
        self, request: service_pb2.RecallMessageRequest, context: _Context
    ) -> service_pb2.RecallMessageResponse:
        return await self._call(
            "RecallMessage", request, context, self._recall_message,
            service_pb2.RecallMessageResponse,
        )  # fmt: skip

    async def SyncLiteSubscription(
        self, request: service_pb2.SyncLiteSubscriptionRequest, context: _Context
    ) -> service_pb2.SyncLiteSubscriptionResponse:
        return await self._call(
            "SyncLiteSubscription", request, context, _lite_unsupported, service_pb2.SyncLiteSubscriptionResponse
        )

    async def Telemetry(
        self, request_iterator: AsyncIterator[service_pb2.TelemetryCommand], context: _Context
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        try:
            ctx = _enter(context)
            if self.auth is not None:
                await self._check_auth(ctx, None, context)
        except V2Error as exc:
            # Read the client's first command before refusing: a status sent while the client still writes
            # reaches it as INTERNAL "Internal error from Core" instead (grpc's client-side race).
            status = (
                grpc.StatusCode.UNAUTHENTICATED if exc.code == Code.UNAUTHORIZED else grpc.StatusCode.INVALID_ARGUMENT
            )
            if await _first_or_none(request_iterator):
                await context.abort(status, exc.message)
            return
        except AuthMetadataUnavailableError as exc:
            if await _first_or_none(request_iterator):
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            return
        async for command in self.telemetry.serve(ctx.client_id, request_iterator, context):
            yield command

    # -- consumer side: forwarded -------------------------------------------------------------------------------
    # grpc.aio serves a method as server-streaming only when it is an async generator function itself
    async def ReceiveMessage(
        self, request: service_pb2.ReceiveMessageRequest, context: _Context
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        handler, kind = self.consumer.receive_message, service_pb2.ReceiveMessageResponse
        async for response in self._stream("ReceiveMessage", request, context, handler, kind):
            yield response

    async def PullMessage(
        self, request: service_pb2.PullMessageRequest, context: _Context
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        handler, kind = self.consumer.pull_message, service_pb2.PullMessageResponse
        async for response in self._stream("PullMessage", request, context, handler, kind):
            yield response

    async def AckMessage(
        self, request: service_pb2.AckMessageRequest, context: _Context
    ) -> service_pb2.AckMessageResponse:
        return await self._call("AckMessage", request, context, self._ack_message, service_pb2.AckMessageResponse)

    async def ChangeInvisibleDuration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, context: _Context
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        return await self._call(
            "ChangeInvisibleDuration", request, context, self._change_invisible_duration,
            service_pb2.ChangeInvisibleDurationResponse,
        )  # fmt: skip

    async def ForwardMessageToDeadLetterQueue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, context: _Context
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        return await self._call(
            "ForwardMessageToDeadLetterQueue", request, context,
            self._forward_to_dlq,
            service_pb2.ForwardMessageToDeadLetterQueueResponse,
        )  # fmt: skip

    async def QueryAssignment(
        self, request: service_pb2.QueryAssignmentRequest, context: _Context
    ) -> service_pb2.QueryAssignmentResponse:
        return await self._call(
            "QueryAssignment", request, context, self._query_assignment,
            service_pb2.QueryAssignmentResponse,
        )  # fmt: skip

    async def QueryOffset(
        self, request: service_pb2.QueryOffsetRequest, context: _Context
    ) -> service_pb2.QueryOffsetResponse:
        return await self._call("QueryOffset", request, context, self._query_offset, service_pb2.QueryOffsetResponse)

    async def GetOffset(
        self, request: service_pb2.GetOffsetRequest, context: _Context
    ) -> service_pb2.GetOffsetResponse:
        return await self._call("GetOffset", request, context, self._get_offset, service_pb2.GetOffsetResponse)

    async def UpdateOffset(
        self, request: service_pb2.UpdateOffsetRequest, context: _Context
    ) -> service_pb2.UpdateOffsetResponse:
        return await self._call(
            "UpdateOffset", request, context, self._update_offset,
            service_pb2.UpdateOffsetResponse,
        )  # fmt: skip


def _drop_context(
    activity: Callable[[_Q, ClientContext], Awaitable[_R]],
) -> Callable[[_Q, ClientContext, _Context], Awaitable[_R]]:
    """An activity taking (request, ctx) as a handler taking (request, ctx, grpc context)."""

    def handler(request: _Q, ctx: ClientContext, context: _Context) -> Awaitable[_R]:
        return activity(request, ctx)

    return handler


async def _heartbeat(
    request: service_pb2.HeartbeatRequest, ctx: ClientContext, context: _Context
) -> service_pb2.HeartbeatResponse:
    """OK: any replica answers, whether or not it has seen the client's Telemetry (the proxy's
    UNRECOGNIZED_CLIENT_TYPE before settings would only be logged by SDKs, and a load balancer may send the
    heartbeat to a replica without the stream)."""
    return service_pb2.HeartbeatResponse(status=ok_status())


async def _notify_client_termination(
    request: service_pb2.NotifyClientTerminationRequest, ctx: ClientContext, context: _Context
) -> service_pb2.NotifyClientTerminationResponse:
    """OK (the client's Telemetry stream ends by itself and takes its session with it)."""
    return service_pb2.NotifyClientTerminationResponse(status=ok_status())


async def _lite_unsupported(
    request: service_pb2.SyncLiteSubscriptionRequest, ctx: ClientContext, context: _Context
) -> service_pb2.SyncLiteSubscriptionResponse:
    raise V2Error(Code.NOT_IMPLEMENTED, "lite topics are not supported by this gateway")


def add_to_server(servicer: MessagingServiceServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``."""
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server)


async def _first_or_none(requests: AsyncIterator[object]) -> bool:
    """Wait up to REFUSAL_READ_WAIT_S for the first request of a stream about to be refused. False when reading it
    already ended the call (the request guard refused the frame); errors otherwise ignored."""
    try:
        async with asyncio.timeout(REFUSAL_READ_WAIT_S):
            await anext(aiter(requests), None)
    except grpc.aio.AbortError:
        return False
    except Exception:  # the client gone, the wait over: refuse all the same
        return True
    return True


__all__ = ["METHOD_PREFIX", "SERVICE_NAME", "ConsumerActivities", "MessagingServiceServicer", "add_to_server"]
