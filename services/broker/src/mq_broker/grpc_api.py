"""gRPC face of the broker: translates mq.broker.v1 / mq.namesrv.v1 messages <-> domain values, nothing else
(the send, pull and query headers with mq_common.protocol.convert, the converters the clients use too).

Mirrors the request dispatch of org.apache.rocketmq.broker.processor.{SendMessageProcessor,
PullMessageProcessor, QueryMessageProcessor, AdminBrokerProcessor, ConsumerManageProcessor, ClientManageProcessor,
PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor} and,
as a client,
org.apache.rocketmq.broker.out.BrokerOuterAPI.
Handlers run on the service's asyncio loop. Business outcomes travel as ``code`` + ``remark``; a handler never
raises into gRPC: an MQError becomes its code, anything else SYSTEM_ERROR (1) with a remark. Sends come only
as SendStream frames (no unary send RPC); a frame of more than ``max_send_batch_requests`` requests ends the stream
INVALID_ARGUMENT before it is parsed (mq_common.grpc_guard, the limits of :func:`request_limits`). A TopicConfig's
``perm`` is taken as is (0: neither read nor write; see mq_common.protocol.topic).
As a client of the name servers the broker uses mq_common.namesrv_client.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, TypeVar

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.auth.model import Action, Resource
from mq_common.errors import MQError, internal_error_remark
from mq_common.grpc_guard import RequestLimits
from mq_common.logging import get_logger
from mq_common.protocol.convert import (
    ack_request_from_proto,
    ack_response_to_proto,
    batch_request_from_proto,
    batch_response_to_proto,
    change_invisible_request_from_proto,
    change_invisible_response_to_proto,
    consume_stats_request_from_proto,
    consume_stats_to_proto,
    consumer_connection_info_to_proto,
    consumer_queue_offset_from_proto,
    consumer_queue_offset_to_proto,
    data_version_to_proto,
    delete_group_request_from_proto,
    heartbeat_from_proto,
    message_queue_from_proto,
    message_queue_to_proto,
    pop_request_from_proto,
    pop_response_to_proto,
    pull_request_from_proto,
    pull_response_to_proto,
    query_consumer_offset_request_from_proto,
    query_request_from_proto,
    query_response_to_proto,
    reset_offset_request_from_proto,
    search_offset_request_from_proto,
    send_msg_back_request_from_proto,
    send_request_from_proto,
    send_response_to_proto,
    subscription_group_config_from_proto,
    subscription_group_config_to_proto,
    topic_config_from_proto,
    topic_queue_offset_to_proto,
    uniq_key_request_from_proto,
    uniq_key_response_to_proto,
    unregister_client_request_from_proto,
    view_request_from_proto,
    view_response_to_proto,
)
from mq_common.protocol.transaction_convert import end_transaction_request_from_proto
from mq_common.request_context import RpcObserver, bind_request_id
from mq_common.response_code import ResponseCode
from mq_common.wire_bounds import method_bounds

from mq_broker.admin_processor import AdminBrokerProcessor
from mq_broker.auth.grpc_api import AuthServicerMixin
from mq_broker.auth.guard import BrokerAuthGuard, Caller
from mq_broker.auth.metadata_manager import AuthMetadataManager
from mq_broker.consumer.pop.service import PopService
from mq_broker.consumer_manage_processor import ConsumerManageProcessor
from mq_broker.ha.grpc_api import MetadataServicerMixin
from mq_broker.ha.slave_synchronize import MetadataTables
from mq_broker.pull_processor import PullMessageProcessor
from mq_broker.query_processor import QueryMessageProcessor
from mq_broker.send_back_processor import ConsumerSendMsgBackProcessor
from mq_broker.send_processor import SendMessageProcessor
from mq_broker.stream_sessions import SendStreamSessions
from mq_broker.timer.timer_processor import TimerProcessor
from mq_broker.transaction.transactional_message_service import TransactionalMessageService

log = get_logger("mq_broker.grpc_api")

SERVICE_NAME: Final = broker_pb2.DESCRIPTOR.services_by_name["Broker"].full_name
MAX_OFFSETS_PER_UPDATE: Final = 10_000
"""Offsets one UpdateConsumerOffsets call may carry (more: INVALID_PARAMETER)."""
_Resp = TypeVar("_Resp")
_Context = grpc.aio.ServicerContext[object, object]
# The SendStream caller (or why it was refused), set when the stream opens; its frame tasks inherit it.
_STREAM_CALLER: contextvars.ContextVar[Caller | MQError | None] = contextvars.ContextVar("stream_caller", default=None)


def request_limits(
    *,
    max_send_batch_requests: int,
    max_topic_attributes: int,
    max_topic_attributes_bytes: int,
    max_concurrent_streams: int,
) -> RequestLimits:
    """The request guard's limits of mq.broker.v1.Broker: send requests per SendStream frame, the attributes of
    CreateTopic/UpdateTopic (count and encoded bytes), offsets per UpdateConsumerOffsets."""
    service = broker_pb2.DESCRIPTOR.services_by_name["Broker"]
    names = "max_topic_attributes, max_topic_attributes_bytes"
    attributes = ("topic_config.attributes", max_topic_attributes, names, max_topic_attributes_bytes)
    return RequestLimits(
        dict(
            [
                method_bounds(
                    service, "SendStream", ("batch.requests", max_send_batch_requests, "max_send_batch_requests", None)
                ),
                method_bounds(service, "CreateTopic", attributes),
                method_bounds(service, "UpdateTopic", attributes),
                method_bounds(service, "UpdateConsumerOffsets", ("offsets", MAX_OFFSETS_PER_UPDATE, "offsets", None)),
            ]
        ),
        max_concurrent_streams=max_concurrent_streams,
    )


# --- translation ----------------------------------------------------------------------------------------------------


def peer_to_host_port(peer: str) -> str:
    """``"ipv4:1.2.3.4:5"`` / ``"ipv6:[::1]:5"`` (grpc peer strings) -> ``"1.2.3.4:5"`` / ``"[::1]:5"``."""
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return peer[len(prefix) :]
    return ""


# --- server ---------------------------------------------------------------------------------------------------------


async def _guard(rpc: str, make_error: Callable[..., _Resp], handler: Callable[[], Awaitable[_Resp]]) -> _Resp:
    """Run ``handler``; an MQError becomes ``make_error(code=..., remark=...)`` (a response class fits), any other
    exception SYSTEM_ERROR."""
    try:
        return await handler()
    except MQError as exc:
        log.info("request_refused", rpc=rpc, code=ResponseCode.name_of(exc.code), remark=exc.remark)
        return make_error(code=exc.code, remark=exc.remark)
    except Exception:
        log.exception("request_failed", rpc=rpc)
        return make_error(code=ResponseCode.SYSTEM_ERROR, remark=internal_error_remark(rpc))


class BrokerServicer(MetadataServicerMixin, AuthServicerMixin, broker_pb2_grpc.BrokerServicer):
    """mq.broker.v1.Broker over the send, pull and admin processors. Runs on the service's asyncio loop.

    ``observe`` (method, response code name, ms) is told about every SendStream frame, as the request-context
    interceptor does for unary calls; the method label names what the frame carried: ``SendBatch`` (a
    SendBatchRequest) or ``SendMessageBatch`` (a SendMessageBatchRequest), the names of the unary RPCs these
    frames replaced, so dashboards and alert rules keep working.

    ``auth_guard`` (mq_broker.auth.guard) checks callers when auth is on: admin RPCs need a super user or a
    component, sends Pub on each topic, pulls/pops/acks/offsets/queue locks Sub on the topic and the group; a refusal is
    NO_PERMISSION 16 (a SendStream frame: every request of the frame) and changes nothing. ``component_identity``
    names a call's verified component certificate (None: none), which passes every check. ``auth_metadata``
    serves the user/ACL RPCs (mq_broker.auth.grpc_api), ``metadata_tables`` the GET_ALL_* RPCs a slave's
    SlaveSynchronize calls and ``runtime_info`` (the KV table of mq_broker.ha.runtime_info) GetBrokerRuntimeInfo
    (mq_broker.ha.grpc_api).
    """

    def __init__(
        self,
        send: SendMessageProcessor,
        pull: PullMessageProcessor,
        admin: AdminBrokerProcessor,
        query: QueryMessageProcessor | None = None,
        observe: RpcObserver | None = None,
        *,
        consumer: ConsumerManageProcessor | None = None,
        send_back: ConsumerSendMsgBackProcessor,
        pop: PopService | None = None,
        auth_metadata: AuthMetadataManager | None = None,
        auth_guard: BrokerAuthGuard | None = None,
        component_identity: Callable[[_Context], str | None] | None = None,
        metadata_tables: MetadataTables | None = None,
        runtime_info: Callable[[], dict[str, str]] | None = None,
        timer: TimerProcessor | None = None,
        transaction: TransactionalMessageService | None = None,
    ) -> None:
        self._timer = timer
        self._transaction = transaction
        self._metadata_tables = metadata_tables
        self._runtime_info = runtime_info
        self._auth_metadata = auth_metadata
        self._auth_guard = auth_guard
        self._component_identity = component_identity
        self._send = send
        self._pull = pull
        self._send_back = send_back
        self._admin = admin
        self._consumer = consumer
        self._pop = pop
        self._query = query if query is not None else QueryMessageProcessor(pull.store)
        self._streams: SendStreamSessions[broker_pb2.SendStreamRequest, broker_pb2.SendStreamResponse] = (
            SendStreamSessions(self._send_frame, _frame_failed, observe)
        )

    async def _run(self, rpc: str, make_error: Callable[..., _Resp], handler: Callable[[], Awaitable[_Resp]]) -> _Resp:
        return await _guard(rpc, make_error, handler)

    def _require(self, caller: Caller, *checks: tuple[Resource, Action]) -> None:
        """Each (resource, action) when authorization is on. Raises MQError NO_PERMISSION 16."""
        if self._auth_guard is not None:
            for resource, action in checks:
                self._auth_guard.require(caller, resource, action)

    def _require_sub(self, context: _Context, topic: str, group: str) -> None:
        """Sub on ``topic`` and on ``group`` for the caller of ``context``. Raises MQError NO_PERMISSION 16."""
        caller = self._caller(context)
        self._require(caller, (Resource.of_topic(topic), Action.SUB), (Resource.of_group(group), Action.SUB))

    def _frame_refusal(self, frame: broker_pb2.SendStreamRequest) -> MQError | None:
        """Why the stream's caller may not send ``frame`` (Pub on each of its topics), None when it may."""
        caller = _STREAM_CALLER.get()
        if caller is None or isinstance(caller, MQError):
            return caller
        guard = self._auth_guard
        if guard is None or not guard.authorization_enabled or caller.is_super:
            return None  # nothing to check: no per-frame topic walk on the put path (components, super users, off)
        if frame.WhichOneof("send") == "message_batch":
            topics = {frame.message_batch.topic}
        else:
            topics = {r.topic for r in frame.batch.requests}
        try:
            self._require(caller, *((Resource.of_topic(t), Action.PUB) for t in sorted(topics)))
        except MQError as exc:
            return exc
        return None

    def close_send_streams(self) -> None:
        """Broker shutdown, after the send processor stopped accepting: every SendStream stops reading, answers
        the frames it has read and ends with OK; a SendStream opened later ends at once."""
        self._streams.close()

    async def _send_batch(self, request: broker_pb2.SendBatchRequest, peer: str) -> broker_pb2.SendBatchResponse:
        async def handle() -> broker_pb2.SendBatchResponse:
            headers = [send_request_from_proto(r) for r in request.requests]
            replies = await self._send.send_batch(headers, peer)
            return broker_pb2.SendBatchResponse(responses=[send_response_to_proto(r) for r in replies])

        def batch_error(code: int, remark: str) -> broker_pb2.SendBatchResponse:
            return broker_pb2.SendBatchResponse(responses=[_send_error(code, remark)] * len(request.requests))

        return await _guard("SendBatch", batch_error, handle)

    async def _send_message_batch(
        self, request: broker_pb2.SendMessageBatchRequest, peer: str
    ) -> broker_pb2.SendMessageBatchResponse:
        async def handle() -> broker_pb2.SendMessageBatchResponse:
            reply = await self._send.send_message_batch(batch_request_from_proto(request), peer)
            return batch_response_to_proto(reply)

        return await _guard("SendMessageBatch", broker_pb2.SendMessageBatchResponse, handle)

    async def SendStream(
        self, request_iterator: AsyncIterator[broker_pb2.SendStreamRequest], context: _Context
    ) -> AsyncIterator[broker_pb2.SendStreamResponse]:
        try:
            _STREAM_CALLER.set(self._caller(context))
        except MQError as exc:
            _STREAM_CALLER.set(exc)
        async for answer in self._streams.serve(request_iterator, peer_to_host_port(context.peer())):
            yield answer

    async def _send_frame(
        self, frame: broker_pb2.SendStreamRequest, peer: str
    ) -> tuple[str, object, broker_pb2.SendStreamResponse]:
        """One SendStream frame -> (method label, what carries its code, answer). Runs in the frame's own task.

        Refused at frame level: no send (INVALID_PARAMETER), read after its deadline (SYSTEM_BUSY, not stored)."""
        bind_request_id(frame.request_id)
        kind = frame.WhichOneof("send")
        method = "SendMessageBatch" if kind == "message_batch" else "SendBatch"
        refused: broker_pb2.SendStreamResponse | None = None
        now_ms = time.time() * 1000.0
        if kind is None:
            refused = _frame_refused(frame, ResponseCode.INVALID_PARAMETER, "SendStream frame carries no send")
        elif frame.deadline_unix_ms and now_ms > frame.deadline_unix_ms:
            remark = _fast_failure_remark(int(now_ms - frame.deadline_unix_ms))
            refused = _frame_refused(frame, ResponseCode.SYSTEM_BUSY, remark)
        elif (denied := self._frame_refusal(frame)) is not None:
            refused = _frame_refused(frame, denied.code, denied.remark)
        if refused is not None:
            return method, refused, refused
        if kind == "message_batch":
            answer = await self._send_message_batch(frame.message_batch, peer)
            return method, answer, broker_pb2.SendStreamResponse(frame_id=frame.frame_id, message_batch=answer)
        batch = await self._send_batch(frame.batch, peer)
        return method, batch, broker_pb2.SendStreamResponse(frame_id=frame.frame_id, batch=batch)

    async def PullMessage(
        self, request: broker_pb2.PullMessageRequest, context: _Context
    ) -> broker_pb2.PullMessageResponse:
        async def handle() -> broker_pb2.PullMessageResponse:
            self._require_sub(context, request.topic, request.consumer_group)
            reply = await self._pull.pull(pull_request_from_proto(request), peer_to_host_port(context.peer()))
            return pull_response_to_proto(reply)

        return await _guard("PullMessage", broker_pb2.PullMessageResponse, handle)

    # --- POP (mq_broker.consumer.pop.PopService; REQUEST_CODE_NOT_SUPPORTED without one) --------------------------

    def _pop_service(self) -> PopService:
        if self._pop is None:
            raise MQError("this broker serves no POP requests", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        return self._pop

    async def PopMessage(
        self, request: broker_pb2.PopMessageRequest, context: _Context
    ) -> broker_pb2.PopMessageResponse:
        async def handle() -> broker_pb2.PopMessageResponse:
            self._require_sub(context, request.topic, request.consumer_group)
            reply = await self._pop_service().pop(pop_request_from_proto(request), peer_to_host_port(context.peer()))
            return pop_response_to_proto(reply)

        return await _guard("PopMessage", broker_pb2.PopMessageResponse, handle)

    async def AckMessage(
        self, request: broker_pb2.AckMessageRequest, context: _Context
    ) -> broker_pb2.AckMessageResponse:
        async def handle() -> broker_pb2.AckMessageResponse:
            header = ack_request_from_proto(request)
            self._require_sub(context, header.topic, header.consumer_group)
            return ack_response_to_proto(await self._pop_service().ack(header))

        return await _guard("AckMessage", broker_pb2.AckMessageResponse, handle)

    async def ChangeInvisibleTime(
        self, request: broker_pb2.ChangeInvisibleTimeRequest, context: _Context
    ) -> broker_pb2.ChangeInvisibleTimeResponse:
        async def handle() -> broker_pb2.ChangeInvisibleTimeResponse:
            header = change_invisible_request_from_proto(request)
            return change_invisible_response_to_proto(await self._pop_service().change_invisible_time(header))

        return await _guard("ChangeInvisibleTime", broker_pb2.ChangeInvisibleTimeResponse, handle)

    async def ConsumerSendMsgBack(
        self, request: broker_pb2.ConsumerSendMsgBackRequest, context: _Context
    ) -> broker_pb2.ConsumerSendMsgBackResponse:
        async def handle() -> broker_pb2.ConsumerSendMsgBackResponse:
            header = send_msg_back_request_from_proto(request)
            await self._send_back.consumer_send_msg_back(header, peer_to_host_port(context.peer()))
            return broker_pb2.ConsumerSendMsgBackResponse(code=ResponseCode.SUCCESS)

        return await _guard("ConsumerSendMsgBack", broker_pb2.ConsumerSendMsgBackResponse, handle)

    async def CreateTopic(
        self, request: broker_pb2.CreateTopicRequest, context: _Context
    ) -> broker_pb2.CreateTopicResponse:
        async def handle() -> broker_pb2.CreateTopicResponse:
            self._admin_caller(context, "CreateTopic")
            self._admin.create_topic(topic_config_from_proto(request.topic_config))
            return broker_pb2.CreateTopicResponse(code=ResponseCode.SUCCESS)

        return await _guard("CreateTopic", broker_pb2.CreateTopicResponse, handle)

    async def UpdateTopic(
        self, request: broker_pb2.UpdateTopicRequest, context: _Context
    ) -> broker_pb2.UpdateTopicResponse:
        async def handle() -> broker_pb2.UpdateTopicResponse:
            self._admin_caller(context, "UpdateTopic")
            self._admin.update_topic(topic_config_from_proto(request.topic_config))
            return broker_pb2.UpdateTopicResponse(code=ResponseCode.SUCCESS)

        return await _guard("UpdateTopic", broker_pb2.UpdateTopicResponse, handle)

    async def GetTopicStats(
        self, request: broker_pb2.GetTopicStatsRequest, context: _Context
    ) -> broker_pb2.GetTopicStatsResponse:
        async def handle() -> broker_pb2.GetTopicStatsResponse:
            offsets = self._admin.get_topic_stats(request.topic)
            return broker_pb2.GetTopicStatsResponse(
                code=ResponseCode.SUCCESS,
                offsets=[topic_queue_offset_to_proto(o) for o in offsets],
            )

        return await _guard("GetTopicStats", broker_pb2.GetTopicStatsResponse, handle)

    async def QueryMessage(
        self, request: broker_pb2.QueryMessageRequest, context: _Context
    ) -> broker_pb2.QueryMessageResponse:
        async def handle() -> broker_pb2.QueryMessageResponse:
            return query_response_to_proto(self._query.query_message(query_request_from_proto(request)))

        return await _guard("QueryMessage", broker_pb2.QueryMessageResponse, handle)

    async def QueryMessageByUniqueKey(
        self, request: broker_pb2.QueryMessageByUniqueKeyRequest, context: _Context
    ) -> broker_pb2.QueryMessageByUniqueKeyResponse:
        async def handle() -> broker_pb2.QueryMessageByUniqueKeyResponse:
            reply = self._query.query_message_by_unique_key(uniq_key_request_from_proto(request))
            return uniq_key_response_to_proto(reply)

        return await _guard("QueryMessageByUniqueKey", broker_pb2.QueryMessageByUniqueKeyResponse, handle)

    async def ViewMessageById(
        self, request: broker_pb2.ViewMessageByIdRequest, context: _Context
    ) -> broker_pb2.ViewMessageByIdResponse:
        async def handle() -> broker_pb2.ViewMessageByIdResponse:
            return view_response_to_proto(self._query.view_message_by_id(view_request_from_proto(request)))

        return await _guard("ViewMessageById", broker_pb2.ViewMessageByIdResponse, handle)

    # --- consumer side (ConsumerManageProcessor; REQUEST_CODE_NOT_SUPPORTED without one) ---------------------------

    def _timer_processor(self) -> TimerProcessor:
        if self._timer is None:
            raise MQError("timers are not served by this broker", ResponseCode.SERVICE_NOT_AVAILABLE)
        return self._timer

    async def RecallMessage(
        self, request: broker_pb2.RecallMessageRequest, context: _Context
    ) -> broker_pb2.RecallMessageResponse:
        async def handle() -> broker_pb2.RecallMessageResponse:
            self._require(self._caller(context), (Resource.of_topic(request.topic), Action.PUB))
            uniq_key = await self._timer_processor().recall(
                request.topic, request.recall_handle, request.producer_group
            )
            return broker_pb2.RecallMessageResponse(code=ResponseCode.SUCCESS, msg_id=uniq_key)

        return await _guard("RecallMessage", broker_pb2.RecallMessageResponse, handle)

    async def EndTransaction(
        self, request: broker_pb2.EndTransactionRequest, context: _Context
    ) -> broker_pb2.EndTransactionResponse:
        async def handle() -> broker_pb2.EndTransactionResponse:
            self._require(self._caller(context), (Resource.of_topic(request.topic), Action.PUB))
            if self._transaction is None:
                raise MQError("transactions are not served by this broker", ResponseCode.SERVICE_NOT_AVAILABLE)
            header = end_transaction_request_from_proto(request)
            if header.is_batch:  # this project's extension: a whole transaction, or a group's leftovers
                whole = await self._transaction.end_whole(header)
                return broker_pb2.EndTransactionResponse(
                    code=ResponseCode.SUCCESS,
                    remark=whole.remark,
                    ended_count=whole.ended,
                    already_ended=whole.already_ended,
                )
            remark = await self._transaction.end_transaction(header)
            return broker_pb2.EndTransactionResponse(code=ResponseCode.SUCCESS, remark=remark)

        return await _guard("EndTransaction", broker_pb2.EndTransactionResponse, handle)

    async def QueryTimers(
        self, request: broker_pb2.QueryTimersRequest, context: _Context
    ) -> broker_pb2.QueryTimersResponse:
        async def handle() -> broker_pb2.QueryTimersResponse:
            self._admin_caller(context, "QueryTimers")
            r = await self._timer_processor().query(request.topic, request.uniq_key)
            return broker_pb2.QueryTimersResponse(
                code=ResponseCode.SUCCESS,
                pending_timers=r.pending_timers,
                earliest_deliver_ms=r.earliest_deliver_ms,
                latest_deliver_ms=r.latest_deliver_ms,
                pending_delay_level_messages=r.pending_delay_level_messages,
                state=r.state,
                message_deliver_ms=r.message_deliver_ms,
            )

        return await _guard("QueryTimers", broker_pb2.QueryTimersResponse, handle)

    def _consumer_processor(self) -> ConsumerManageProcessor:
        if self._consumer is None:
            raise MQError("this broker serves no consumer requests", ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        return self._consumer

    async def UpdateSubscriptionGroup(
        self, request: broker_pb2.UpdateSubscriptionGroupRequest, context: _Context
    ) -> broker_pb2.UpdateSubscriptionGroupResponse:
        async def handle() -> broker_pb2.UpdateSubscriptionGroupResponse:
            self._admin_caller(context, "UpdateSubscriptionGroup")
            config = subscription_group_config_from_proto(request.config)
            self._consumer_processor().update_subscription_group(config)
            return broker_pb2.UpdateSubscriptionGroupResponse(code=ResponseCode.SUCCESS)

        return await _guard("UpdateSubscriptionGroup", broker_pb2.UpdateSubscriptionGroupResponse, handle)

    async def DeleteSubscriptionGroup(
        self, request: broker_pb2.DeleteSubscriptionGroupRequest, context: _Context
    ) -> broker_pb2.DeleteSubscriptionGroupResponse:
        async def handle() -> broker_pb2.DeleteSubscriptionGroupResponse:
            self._admin_caller(context, "DeleteSubscriptionGroup")
            self._consumer_processor().delete_subscription_group(delete_group_request_from_proto(request))
            return broker_pb2.DeleteSubscriptionGroupResponse(code=ResponseCode.SUCCESS)

        return await _guard("DeleteSubscriptionGroup", broker_pb2.DeleteSubscriptionGroupResponse, handle)

    async def GetAllSubscriptionGroups(
        self, request: broker_pb2.GetAllSubscriptionGroupsRequest, context: _Context
    ) -> broker_pb2.GetAllSubscriptionGroupsResponse:
        async def handle() -> broker_pb2.GetAllSubscriptionGroupsResponse:
            configs, version = self._consumer_processor().get_all_subscription_groups()
            return broker_pb2.GetAllSubscriptionGroupsResponse(
                code=ResponseCode.SUCCESS,
                configs=[subscription_group_config_to_proto(c) for c in configs],
                data_version=data_version_to_proto(version),
            )

        return await _guard("GetAllSubscriptionGroups", broker_pb2.GetAllSubscriptionGroupsResponse, handle)

    async def UpdateConsumerOffsets(
        self, request: broker_pb2.UpdateConsumerOffsetsRequest, context: _Context
    ) -> broker_pb2.UpdateConsumerOffsetsResponse:
        async def handle() -> broker_pb2.UpdateConsumerOffsetsResponse:
            if len(request.offsets) > MAX_OFFSETS_PER_UPDATE:
                remark = f"{len(request.offsets)} offsets in one call, at most {MAX_OFFSETS_PER_UPDATE}"
                raise MQError(remark, ResponseCode.INVALID_PARAMETER)
            offsets = [consumer_queue_offset_from_proto(o) for o in request.offsets]
            caller = self._caller(context)
            for topic, group in sorted({(o.topic, o.consumer_group) for o in offsets}):
                self._require(caller, (Resource.of_topic(topic), Action.SUB), (Resource.of_group(group), Action.SUB))
            answers = self._consumer_processor().update_consumer_offsets(offsets, peer_to_host_port(context.peer()))
            return broker_pb2.UpdateConsumerOffsetsResponse(
                code=ResponseCode.SUCCESS, codes=[c for c, _ in answers], remarks=[r for _, r in answers]
            )

        return await _guard("UpdateConsumerOffsets", broker_pb2.UpdateConsumerOffsetsResponse, handle)

    async def QueryConsumerOffset(
        self, request: broker_pb2.QueryConsumerOffsetRequest, context: _Context
    ) -> broker_pb2.QueryConsumerOffsetResponse:
        async def handle() -> broker_pb2.QueryConsumerOffsetResponse:
            header = query_consumer_offset_request_from_proto(request)
            self._require_sub(context, header.topic, header.consumer_group)
            offset = self._consumer_processor().query_consumer_offset(header)
            return broker_pb2.QueryConsumerOffsetResponse(code=ResponseCode.SUCCESS, offset=offset)

        return await _guard("QueryConsumerOffset", broker_pb2.QueryConsumerOffsetResponse, handle)

    async def GetConsumeStats(
        self, request: broker_pb2.GetConsumeStatsRequest, context: _Context
    ) -> broker_pb2.GetConsumeStatsResponse:
        async def handle() -> broker_pb2.GetConsumeStatsResponse:
            stats = self._consumer_processor().get_consume_stats(consume_stats_request_from_proto(request))
            return consume_stats_to_proto(stats)

        return await _guard("GetConsumeStats", broker_pb2.GetConsumeStatsResponse, handle)

    async def SearchOffsetByTimestamp(
        self, request: broker_pb2.SearchOffsetByTimestampRequest, context: _Context
    ) -> broker_pb2.SearchOffsetByTimestampResponse:
        async def handle() -> broker_pb2.SearchOffsetByTimestampResponse:
            header = search_offset_request_from_proto(request)
            offset = self._consumer_processor().search_offset_by_timestamp(header)
            return broker_pb2.SearchOffsetByTimestampResponse(code=ResponseCode.SUCCESS, offset=offset)

        return await _guard("SearchOffsetByTimestamp", broker_pb2.SearchOffsetByTimestampResponse, handle)

    async def ResetOffsetByTimestamp(
        self, request: broker_pb2.ResetOffsetByTimestampRequest, context: _Context
    ) -> broker_pb2.ResetOffsetByTimestampResponse:
        async def handle() -> broker_pb2.ResetOffsetByTimestampResponse:
            self._admin_caller(context, "ResetOffsetByTimestamp")
            header = reset_offset_request_from_proto(request)
            reset = self._consumer_processor().reset_offset_by_timestamp(header, peer_to_host_port(context.peer()))
            return broker_pb2.ResetOffsetByTimestampResponse(
                code=ResponseCode.SUCCESS, offsets=[consumer_queue_offset_to_proto(o) for o in reset]
            )

        return await _guard("ResetOffsetByTimestamp", broker_pb2.ResetOffsetByTimestampResponse, handle)

    async def DeleteTopic(
        self, request: broker_pb2.DeleteTopicRequest, context: _Context
    ) -> broker_pb2.DeleteTopicResponse:
        async def handle() -> broker_pb2.DeleteTopicResponse:
            self._admin_caller(context, "DeleteTopic")
            await self._consumer_processor().delete_topic(request.topic)
            return broker_pb2.DeleteTopicResponse(code=ResponseCode.SUCCESS)

        return await _guard("DeleteTopic", broker_pb2.DeleteTopicResponse, handle)

    async def Heartbeat(self, request: broker_pb2.HeartbeatRequest, context: _Context) -> broker_pb2.HeartbeatResponse:
        async def handle() -> broker_pb2.HeartbeatResponse:
            self._consumer_processor().heartbeat(heartbeat_from_proto(request), peer_to_host_port(context.peer()))
            return broker_pb2.HeartbeatResponse(code=ResponseCode.SUCCESS)

        return await _guard("Heartbeat", broker_pb2.HeartbeatResponse, handle)

    async def UnregisterClient(
        self, request: broker_pb2.UnregisterClientRequest, context: _Context
    ) -> broker_pb2.UnregisterClientResponse:
        async def handle() -> broker_pb2.UnregisterClientResponse:
            self._consumer_processor().unregister_client(unregister_client_request_from_proto(request))
            return broker_pb2.UnregisterClientResponse(code=ResponseCode.SUCCESS)

        return await _guard("UnregisterClient", broker_pb2.UnregisterClientResponse, handle)

    async def GetConsumerListByGroup(
        self, request: broker_pb2.GetConsumerListByGroupRequest, context: _Context
    ) -> broker_pb2.GetConsumerListByGroupResponse:
        async def handle() -> broker_pb2.GetConsumerListByGroupResponse:
            client_ids = self._consumer_processor().consumer_list_by_group(request.consumer_group)
            return broker_pb2.GetConsumerListByGroupResponse(code=ResponseCode.SUCCESS, client_ids=client_ids)

        return await _guard("GetConsumerListByGroup", broker_pb2.GetConsumerListByGroupResponse, handle)

    async def GetConsumerConnectionList(
        self, request: broker_pb2.GetConsumerConnectionListRequest, context: _Context
    ) -> broker_pb2.GetConsumerConnectionListResponse:
        async def handle() -> broker_pb2.GetConsumerConnectionListResponse:
            info = self._consumer_processor().consumer_connection_list(request.consumer_group)
            return consumer_connection_info_to_proto(info)

        return await _guard("GetConsumerConnectionList", broker_pb2.GetConsumerConnectionListResponse, handle)

    async def LockBatchMQ(
        self, request: broker_pb2.LockBatchMQRequest, context: _Context
    ) -> broker_pb2.LockBatchMQResponse:
        async def handle() -> broker_pb2.LockBatchMQResponse:
            queues = [message_queue_from_proto(q) for q in request.mqs]
            for topic in sorted({q.topic for q in queues}):
                self._require_sub(context, topic, request.consumer_group)
            locked = self._consumer_processor().lock_batch_mq(request.consumer_group, request.client_id, queues)
            return broker_pb2.LockBatchMQResponse(
                code=ResponseCode.SUCCESS, lock_ok_mqs=[message_queue_to_proto(q) for q in sorted(locked)]
            )

        return await _guard("LockBatchMQ", broker_pb2.LockBatchMQResponse, handle)

    async def UnlockBatchMQ(
        self, request: broker_pb2.UnlockBatchMQRequest, context: _Context
    ) -> broker_pb2.UnlockBatchMQResponse:
        async def handle() -> broker_pb2.UnlockBatchMQResponse:
            queues = [message_queue_from_proto(q) for q in request.mqs]
            for topic in sorted({q.topic for q in queues}):
                self._require_sub(context, topic, request.consumer_group)
            self._consumer_processor().unlock_batch_mq(request.consumer_group, request.client_id, queues)
            return broker_pb2.UnlockBatchMQResponse(code=ResponseCode.SUCCESS)

        return await _guard("UnlockBatchMQ", broker_pb2.UnlockBatchMQResponse, handle)


def _fast_failure_remark(late_ms: int) -> str:
    """BrokerFastFailure#cleanExpiredRequestInQueue's words: the frame waited past its sender's deadline."""
    return f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {late_ms}ms"


def _frame_refused(frame: broker_pb2.SendStreamRequest, code: int, remark: str) -> broker_pb2.SendStreamResponse:
    return broker_pb2.SendStreamResponse(frame_id=frame.frame_id, code=code, remark=remark)


def _frame_failed(frame: broker_pb2.SendStreamRequest, exc: Exception) -> broker_pb2.SendStreamResponse:
    return _frame_refused(frame, ResponseCode.SYSTEM_ERROR, f"SendStream frame failed: {type(exc).__name__}: {exc}")


def _send_error(code: int, remark: str) -> broker_pb2.SendMessageResponse:
    return broker_pb2.SendMessageResponse(code=code, remark=remark)
