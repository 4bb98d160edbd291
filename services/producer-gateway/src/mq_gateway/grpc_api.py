"""gRPC face of the gateway: translates mq.gateway.v1 messages <-> the producer core's domain values.

Mirrors the 5.x proxy's SendMessageActivity in spirit. Every send outcome travels as a SendResult:
success = code 0 + send_status; a failure = its ResponseCode + remark (+ broker_name when known). Only a
request as a whole gets a gRPC status: a malformed one (a negative or too large send_timeout_ms, too many
messages in a batch, a SendBatch whose bytes do not parse) INVALID_ARGUMENT; a Send / SendBatch / SendOneway
the in-flight limits kept out for its whole budget RESOURCE_EXHAUSTED (nothing of it was sent; back off and
retry). With auth on (mq_gateway.auth), a call without valid credentials or Pub on its topics gets NO_PERMISSION
16 + remark for every message, before anything is sent. A message's delay level or delivery time is a field of
the message on the same send path; a timer message's SendResult carries its recall handle, which RecallMessage
takes (answered as code + remark + msg_id). Handlers run on the gateway's asyncio loop and never raise anything
else into gRPC.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

import grpc
from apache.rocketmq.v2 import service_pb2
from google.protobuf.message import DecodeError
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer import (
    FlowControlError,
    Message,
    MessageBatch,
    MessageBatchResult,
    ProducerConfig,
    SendResult,
    SendStatus,
)
from mq_client.producer.batch_transaction import BatchTransaction
from mq_client.producer.message_batch import (
    ENCODED_FIXED_PROPERTIES,
    ChunkOutcome,
    EncodedMessageBatch,
    encoded_refusal,
)
from mq_client.producer.route_manager import TopicRouteManager
from mq_client.producer.validators import check_user_properties
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.errors import MessageIllegalError, MQError, internal_error_remark
from mq_common.grpc_guard import RequestLimits
from mq_common.logging import get_logger
from mq_common.message_id import create_uniq_ids
from mq_common.protocol.transaction import EndTransactionRequestHeader, EndTransactionScope, whole_end_counts
from mq_common.response_code import ResponseCode
from mq_common.wire_bounds import method_bounds

from mq_gateway import wire

if TYPE_CHECKING:
    from mq_gateway.auth import GatewayAuth
    from mq_gateway.metrics import GatewayMetrics

log = get_logger("mq_gateway.grpc_api")

SERVICE_NAME: Final = gateway_pb2.DESCRIPTOR.services_by_name["ProducerGateway"].full_name

_STATUS_TO_PROTO: Final = {
    SendStatus.SEND_OK: common_pb2.SEND_STATUS_SEND_OK,
    SendStatus.FLUSH_DISK_TIMEOUT: common_pb2.SEND_STATUS_FLUSH_DISK_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: common_pb2.SEND_STATUS_FLUSH_SLAVE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: common_pb2.SEND_STATUS_SLAVE_NOT_AVAILABLE,
}


class Producer(Protocol):
    """The part of mq_client.producer.DefaultMQProducer the servicer uses."""

    @property
    def config(self) -> ProducerConfig: ...

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult: ...

    async def send_batch(
        self, msgs: Sequence[Message], timeout_ms: int | None = None
    ) -> list[SendResult | MQError]: ...

    async def send_message_batch(
        self, batch: MessageBatch, timeout_ms: int | None = None
    ) -> list[ChunkOutcome] | None: ...

    async def send_encoded_batch(
        self, batch: EncodedMessageBatch, timeout_ms: int | None = None
    ) -> list[ChunkOutcome]: ...

    async def send_oneway(self, msg: Message, timeout_ms: int | None = None) -> str: ...

    async def recall_message(self, topic: str, recall_handle: str, timeout_ms: int | None = None) -> str: ...

    async def end_transaction(
        self, topic: str, broker_name: str, header: EndTransactionRequestHeader, timeout_ms: int | None = None
    ) -> str: ...

    @property
    def routes(self) -> TopicRouteManager: ...


def message_from_proto(msg: gateway_pb2.Message, producer_group: str = "") -> Message:
    """mq.gateway.v1.Message -> Message (with its delay level or delivery time). Raises MessageIllegalError (13) for
    a reserved property name (DELAY and TIMER_* included: a delay is set with the message's own fields). A message
    with a ``transaction_id`` becomes a half message of that transaction (TRAN_MSG, PGROUP = ``producer_group``,
    __transactionId__; this project's extension): MessageIllegalError (13) with a delay or without a producer group.
    """
    properties: dict[str, str] = {}
    if msg.properties:
        check_user_properties(msg.properties)
        properties = dict(msg.properties)
    if msg.transaction_id:
        if msg.delay_time_level or msg.deliver_time_ms or msg.delay_time_sec or msg.delay_time_ms:
            raise MessageIllegalError("a transaction (half) message cannot be delayed")
        if not producer_group:
            raise MessageIllegalError("a transaction (half) message needs the request's producer_group")
        properties[MessageConst.TRANSACTION_PREPARED] = "true"
        properties[MessageConst.PRODUCER_GROUP] = producer_group
        properties[MessageConst.TRANSACTION_ID] = msg.transaction_id
    return Message(
        msg.topic,
        msg.body,
        msg.tag,
        tuple(msg.keys),
        properties,
        msg.flag,
        msg.sharding_key,
        msg.delay_time_level,
        msg.deliver_time_ms,
        msg.delay_time_sec,
        msg.delay_time_ms,
    )


def batch_from_protos(msgs: Sequence[gateway_pb2.Message], producer_group: str = "") -> MessageBatch | None:
    """The messages of a SendBatch as one MessageBatch (columns, no object per message), or None when they are
    not one topic, a message has a delay, a message uses a reserved property name, or their transaction ids differ
    (those take the message by message path, which gives each message its own outcome). Several sharding keys
    become the batch's ``sharding_keys`` column (the producer then sends one MessageBatch per queue). Messages that
    all carry one ``transaction_id`` are half messages of it (``MessageBatch.transaction``, PGROUP =
    ``producer_group``; this project's extension); None when ``producer_group`` is empty (each message is then
    refused with MESSAGE_ILLEGAL 13, see :func:`message_from_proto`). User properties that every half message has
    (the same names and values) travel once, as the batch's (``BatchTransaction.shared_properties``)."""
    if not msgs:
        return None
    rows = [(m.topic, m.sharding_key, m.body, m.tag, m.keys, m.properties, m.flag, m.transaction_id) for m in msgs]
    topics, sharding_keys, bodies, tags, keys, properties, flags, transaction_ids = zip(*rows, strict=True)
    if len(set(topics)) != 1 or len(set(transaction_ids)) != 1:
        return None
    transaction_id = transaction_ids[0]
    if transaction_id and not producer_group:
        return None
    if any(m.delay_time_level or m.deliver_time_ms or m.delay_time_sec or m.delay_time_ms for m in msgs):
        return None
    one_key = len(set(sharding_keys)) == 1
    shared = _shared_properties(properties) if transaction_id else None
    for props in properties if shared is None else (shared,):
        if props:
            try:
                check_user_properties(props)
            except MQError:
                return None
    transaction = None
    if transaction_id:
        transaction = BatchTransaction(producer_group, transaction_id, shared or {})
        properties = () if shared is not None else properties
    return MessageBatch(
        topics[0],
        bodies,
        tags if any(tags) else (),
        keys if any(keys) else (),
        properties if any(properties) else (),
        flags if any(flags) else (),
        sharding_keys[0] if one_key else "",
        () if one_key else sharding_keys,
        transaction,
    )


def _shared_properties(properties: Sequence[Mapping[str, str]]) -> dict[str, str] | None:
    """The user properties of the first message when every message has exactly them (none included), else None."""
    first = dict(properties[0])
    items = first.items()
    count = len(first)
    for props in properties:
        if len(props) != count or any(props.get(name) != value for name, value in items):
            return None
    return first


def chunks_to_proto(chunks: Sequence[ChunkOutcome]) -> tuple[gateway_pb2.SendBatchResponse, int]:
    """The SendBatchResponse of a MessageBatch's chunk outcomes (one SendResult per message, in the batch's order)
    and how many messages were stored."""
    if any(chunk.positions is not None for chunk in chunks):
        return _regrouped_chunks_to_proto(chunks)
    response = gateway_pb2.SendBatchResponse()
    results = response.results
    add = results.add
    stored = 0
    for chunk in chunks:
        result = chunk.result
        if isinstance(result, MessageBatchResult):
            status = _STATUS_TO_PROTO[result.send_status]
            broker_name, queue_id = result.message_queue.broker_name, result.message_queue.queue_id
            first = result.queue_offset
            for i, (msg_id, offset_msg_id) in enumerate(zip(result.msg_ids, result.offset_msg_ids, strict=True)):
                # code 0 (SUCCESS) is the field's default
                add(
                    send_status=status,
                    msg_id=msg_id,
                    offset_msg_id=offset_msg_id,
                    broker_name=broker_name,
                    queue_id=queue_id,
                    queue_offset=first + i,
                )
            stored += len(chunk)
        else:
            failed = error_to_proto(result)
            results.extend([failed] * len(chunk))
    return response, stored


def _regrouped_chunks_to_proto(chunks: Sequence[ChunkOutcome]) -> tuple[gateway_pb2.SendBatchResponse, int]:
    """:func:`chunks_to_proto` for chunks that hold batch positions out of order (a batch sent per queue)."""
    count = sum(map(len, chunks))
    results: list[gateway_pb2.SendResult | None] = [None] * count
    stored = 0
    for chunk in chunks:
        result = chunk.result
        if isinstance(result, MessageBatchResult):
            for position, one in zip(chunk.indices(), result.results(), strict=True):
                results[position] = result_to_proto(one)
            stored += len(chunk)
        else:
            failed = error_to_proto(result)
            for position in chunk.indices():
                results[position] = failed
    assert all(r is not None for r in results), "every batch position has its result"
    return gateway_pb2.SendBatchResponse(results=[r for r in results if r is not None]), stored


def result_to_proto(result: SendResult) -> gateway_pb2.SendResult:
    """SendResult -> mq.gateway.v1.SendResult with code 0."""
    return gateway_pb2.SendResult(
        code=ResponseCode.SUCCESS,
        send_status=_STATUS_TO_PROTO[result.send_status],
        msg_id=result.msg_id,
        offset_msg_id=result.offset_msg_id,
        broker_name=result.message_queue.broker_name,
        queue_id=result.message_queue.queue_id,
        queue_offset=result.queue_offset,
        recall_handle=result.recall_handle,
    )


def error_to_proto(error: MQError) -> gateway_pb2.SendResult:
    """An MQError -> mq.gateway.v1.SendResult with its code, remark and broker name (if it has one)."""
    broker_name = getattr(error, "broker_name", "")
    return gateway_pb2.SendResult(
        code=error.code, remark=error.remark, broker_name=broker_name if isinstance(broker_name, str) else ""
    )


def outcomes_to_proto(outcomes: Iterable[SendResult | MQError | None]) -> gateway_pb2.SendBatchResponse:
    """One SendResult per outcome, in order (None skipped), each built in place in the response (no copy of a
    SendResult per message: the message-by-message path answers transaction half messages this way)."""
    response = gateway_pb2.SendBatchResponse()
    results = response.results
    add = results.add
    for result in outcomes:
        if result is None:
            continue
        if isinstance(result, SendResult):
            queue = result.message_queue
            add(
                send_status=_STATUS_TO_PROTO[result.send_status],
                msg_id=result.msg_id,
                offset_msg_id=result.offset_msg_id,
                broker_name=queue.broker_name,
                queue_id=queue.queue_id,
                queue_offset=result.queue_offset,
                recall_handle=result.recall_handle,
            )
        else:
            results.append(error_to_proto(result))
    return response


def outcome_to_proto(outcome: SendResult | MQError) -> gateway_pb2.SendResult:
    return result_to_proto(outcome) if isinstance(outcome, SendResult) else error_to_proto(outcome)


def _unexpected(rpc: str, exc: Exception) -> gateway_pb2.SendResult:
    log.exception("request_failed", rpc=rpc)
    return gateway_pb2.SendResult(code=ResponseCode.SYSTEM_ERROR, remark=internal_error_remark(rpc))


class ProducerGatewayServicer(gateway_pb2_grpc.ProducerGatewayServicer):
    """mq.gateway.v1.ProducerGateway over one producer core. Runs on the gateway's asyncio loop.

    ``producer_group`` of a request is ignored (the gateway sends as its own group) but for half messages, whose
    PGROUP it is. SendBatch requests of the plain shape take the C path (:mod:`mq_gateway.wire`) when it is built and
    loaded (not with ``MQ_NO_EXTENSIONS=1``); the answers are the same. A SendBatch of half messages of ONE transaction
    (every message with the same ``transaction_id``) goes as one MessageBatch per queue like a plain one (the C path
    or :func:`batch_from_protos`), which the broker stores as half messages (this project's extension); a mix of
    transaction ids, or of half and plain messages, goes message by message.
    """

    def __init__(
        self,
        producer: Producer,
        *,
        max_send_timeout_ms: int,
        max_batch_messages: int,
        metrics: GatewayMetrics | None = None,
        auth: GatewayAuth | None = None,
    ) -> None:
        self._producer = producer
        self._auth = auth if auth is not None and auth.enabled else None
        self._native = wire.AVAILABLE
        self._max_send_timeout_ms = max_send_timeout_ms
        self._max_batch_messages = max_batch_messages
        self._metrics = metrics

    def _done(self, mode: str, begin: float, ok: int, failed: int) -> None:
        """Metrics of one finished call (no-op without metrics)."""
        if self._metrics is not None:
            result = "success" if not failed else ("partial" if ok else "failure")
            self._metrics.on_call(mode, result, time.perf_counter() - begin, ok, failed)

    def _rejected(self, mode: str, begin: float, messages: int) -> None:
        if self._metrics is not None:
            self._metrics.on_rejected(mode, time.perf_counter() - begin, messages)

    async def _refused(
        self, context: grpc.aio.ServicerContext[object, object], topics: Iterable[str]
    ) -> MQError | None:
        """The auth refusal of a send to ``topics`` (NO_PERMISSION 16 + remark), None when allowed or auth is off."""
        if self._auth is None:
            return None
        return await self._auth.refuse_send(context.invocation_metadata(), context.peer(), topics)

    async def _timeout_ms(self, requested_ms: int, context: grpc.aio.ServicerContext[object, object]) -> int | None:
        if requested_ms < 0 or requested_ms > self._max_send_timeout_ms:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"send_timeout_ms must be in [0, {self._max_send_timeout_ms}], got {requested_ms}",
            )
        return requested_ms or None

    async def _batch_timeout_ms(
        self, count: int, requested_ms: int, context: grpc.aio.ServicerContext[object, object]
    ) -> int | None:
        """:meth:`_timeout_ms` of a SendBatch of ``count`` messages; more than max_batch_messages: INVALID_ARGUMENT."""
        if count > self._max_batch_messages:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"too many messages in one SendBatch: {count}, max is {self._max_batch_messages}",
            )
        return await self._timeout_ms(requested_ms, context)

    async def Send(
        self, request: gateway_pb2.SendRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendResponse:
        timeout_ms = await self._timeout_ms(request.send_timeout_ms, context)
        begin = time.perf_counter()
        if refused := await self._refused(context, (request.message.topic,)):
            self._done("send", begin, 0, 1)
            return gateway_pb2.SendResponse(result=error_to_proto(refused))
        try:
            if not request.HasField("message"):
                raise MessageIllegalError("the message is null")
            result = await self._producer.send(message_from_proto(request.message, request.producer_group), timeout_ms)
        except FlowControlError as exc:
            self._rejected("send", begin, 1)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.remark)
        except MQError as exc:
            self._done("send", begin, 0, 1)
            return gateway_pb2.SendResponse(result=error_to_proto(exc))
        except Exception as exc:
            self._done("send", begin, 0, 1)
            return gateway_pb2.SendResponse(result=_unexpected("Send", exc))
        self._done("send", begin, 1, 0)
        return gateway_pb2.SendResponse(result=result_to_proto(result))

    async def SendBatch(
        self, request: gateway_pb2.SendBatchRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendBatchResponse:
        count = len(request.messages)
        timeout_ms = await self._batch_timeout_ms(count, request.send_timeout_ms, context)
        begin = time.perf_counter()
        if refused := await self._refused(context, (m.topic for m in request.messages)):
            self._done("batch", begin, 0, count)
            return gateway_pb2.SendBatchResponse(results=[error_to_proto(refused)] * count)
        batch = batch_from_protos(request.messages, request.producer_group)
        if batch is not None:
            chunks = await self._message_batch_call(
                self._producer.send_message_batch(batch, timeout_ms), count, begin, context
            )
            if isinstance(chunks, gateway_pb2.SendBatchResponse):
                return chunks
            if chunks is not None:
                response, stored = chunks_to_proto(chunks)
                self._done("batch", begin, stored, count - stored)
                return response
        outcomes: list[SendResult | MQError | None] = [None] * count
        valid: list[int] = []
        msgs: list[Message] = []
        for i, proto in enumerate(request.messages):
            try:
                msgs.append(message_from_proto(proto, request.producer_group))
            except MQError as exc:
                outcomes[i] = exc
            else:
                valid.append(i)
        try:
            for i, outcome in zip(valid, await self._producer.send_batch(msgs, timeout_ms), strict=True):
                outcomes[i] = outcome
        except FlowControlError as exc:
            self._rejected("batch", begin, count)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.remark)
        except MQError as exc:
            for i in valid:
                outcomes[i] = exc
        except Exception as exc:
            self._done("batch", begin, 0, count)
            failed = _unexpected("SendBatch", exc)
            return gateway_pb2.SendBatchResponse(
                results=[failed if o is None else outcome_to_proto(o) for o in outcomes]
            )
        if self._metrics is not None:
            ok = sum(1 for o in outcomes if isinstance(o, SendResult))
            self._done("batch", begin, ok, count - ok)
        return outcomes_to_proto(outcomes)

    async def send_batch_raw(
        self, raw: bytes, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendBatchResponse | bytes:
        """SendBatch as :func:`add_to_server` registers it: the serialized request in, a SendBatchResponse or its
        bytes out. The plain shape (see :mod:`mq_gateway.wire`) is encoded in C and sent as one MessageBatch when
        the producer takes it whole; everything else is parsed and served by :meth:`SendBatch`. A request that
        does not parse gets INVALID_ARGUMENT."""
        scanned = wire.scan_send_batch(raw) if self._native else None
        if scanned is not None:
            answer = await self._send_scanned(raw, scanned, context)
            if answer is not None:
                return answer
        try:
            request = gateway_pb2.SendBatchRequest.FromString(raw)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed SendBatchRequest: {exc}")
        return await self.SendBatch(request, context)

    async def _send_scanned(
        self, raw: bytes, scanned: wire.ScannedBatch, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendBatchResponse | bytes | None:
        """The C path of :meth:`send_batch_raw`; None (nothing sent) when the producer would not take the batch
        as one MessageBatch (encoded_refusal): the protobuf path then gives every message its outcome."""
        count = scanned.message_count
        timeout_ms = await self._batch_timeout_ms(count, scanned.send_timeout_ms, context)
        begin = time.perf_counter()
        if refused := await self._refused(context, (scanned.topic,)):
            self._done("batch", begin, 0, count)
            return gateway_pb2.SendBatchResponse(results=[error_to_proto(refused)] * count)
        transaction = None
        if scanned.transaction_id:
            shared = _scanned_properties(scanned.shared_properties)
            if shared is None:
                return None
            transaction = BatchTransaction(scanned.producer_group, scanned.transaction_id, shared)
            if transaction.refusal() is not None:
                return None
        config = self._producer.config
        ids = create_uniq_ids(count)
        total, longest = wire.encoded_size(scanned, ENCODED_FIXED_PROPERTIES, len(ids[0]))
        if transaction is not None:  # the broker appends the batch's properties to each message's
            longest += len(transaction.properties_text().encode())
        if encoded_refusal(
            config, scanned.topic, count, scanned.min_body_bytes, scanned.max_body_bytes, total, longest
        ):
            return None
        body = wire.encode_send_batch(raw, ids, ENCODED_FIXED_PROPERTIES, total)
        batch = EncodedMessageBatch(scanned.topic, body, ids, partial(_first_message, raw), transaction)
        chunks = await self._message_batch_call(
            self._producer.send_encoded_batch(batch, timeout_ms), count, begin, context
        )
        if chunks is None or isinstance(chunks, gateway_pb2.SendBatchResponse):
            return chunks
        result = chunks[0].result if len(chunks) == 1 else None
        if isinstance(result, MessageBatchResult):
            self._done("batch", begin, count, 0)
            return wire.encode_batch_response(
                _STATUS_TO_PROTO[result.send_status],
                _as_list(result.msg_ids),
                _as_list(result.offset_msg_ids),
                result.message_queue.broker_name,
                result.message_queue.queue_id,
                result.queue_offset,
            )
        response, stored = chunks_to_proto(chunks)
        self._done("batch", begin, stored, count - stored)
        return response

    async def _message_batch_call(
        self,
        send: Awaitable[list[ChunkOutcome] | None],
        count: int,
        begin: float,
        context: grpc.aio.ServicerContext[object, object],
    ) -> list[ChunkOutcome] | gateway_pb2.SendBatchResponse | None:
        """Await a producer's MessageBatch send of ``count`` messages: its chunk outcomes (or its None), or the
        response that gives each message the send's MQError (or SYSTEM_ERROR for anything else); a send the
        in-flight limits kept out aborts the call with RESOURCE_EXHAUSTED."""
        try:
            return await send
        except FlowControlError as exc:
            self._rejected("batch", begin, count)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.remark)
        except MQError as exc:
            self._done("batch", begin, 0, count)
            return gateway_pb2.SendBatchResponse(results=[error_to_proto(exc)] * count)
        except Exception as exc:
            self._done("batch", begin, 0, count)
            return gateway_pb2.SendBatchResponse(results=[_unexpected("SendBatch", exc)] * count)

    async def SendOneway(
        self, request: gateway_pb2.SendOnewayRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendOnewayResponse:
        timeout_ms = await self._timeout_ms(request.send_timeout_ms, context)
        begin = time.perf_counter()
        if refused := await self._refused(context, (request.message.topic,)):
            self._done("oneway", begin, 0, 1)
            return gateway_pb2.SendOnewayResponse(code=refused.code, remark=refused.remark)
        try:
            if not request.HasField("message"):
                raise MessageIllegalError("the message is null")
            msg_id = await self._producer.send_oneway(message_from_proto(request.message), timeout_ms)
        except FlowControlError as exc:
            self._rejected("oneway", begin, 1)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, exc.remark)
        except MQError as exc:
            self._done("oneway", begin, 0, 1)
            return gateway_pb2.SendOnewayResponse(code=exc.code, remark=exc.remark)
        except Exception as exc:
            self._done("oneway", begin, 0, 1)
            failed = _unexpected("SendOneway", exc)
            return gateway_pb2.SendOnewayResponse(code=failed.code, remark=failed.remark)
        self._done("oneway", begin, 1, 0)
        return gateway_pb2.SendOnewayResponse(code=ResponseCode.SUCCESS, msg_id=msg_id)

    async def RecallMessage(
        self, request: gateway_pb2.RecallMessageRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.RecallMessageResponse:
        """DefaultMQProducer#recallMessage through the gateway's producer (codes in gateway.proto); with auth on, the
        caller needs Pub on the topic."""
        timeout_ms = await self._timeout_ms(request.timeout_ms, context)
        if refused := await self._refused(context, (request.topic,)):
            return gateway_pb2.RecallMessageResponse(code=refused.code, remark=refused.remark)
        try:
            msg_id = await self._producer.recall_message(request.topic, request.recall_handle, timeout_ms)
        except MQError as exc:
            return gateway_pb2.RecallMessageResponse(code=exc.code, remark=exc.remark)
        except Exception as exc:
            failed = _unexpected("RecallMessage", exc)
            return gateway_pb2.RecallMessageResponse(code=failed.code, remark=failed.remark)
        return gateway_pb2.RecallMessageResponse(code=ResponseCode.SUCCESS, msg_id=msg_id)

    async def EndTransaction(
        self, request: gateway_pb2.EndTransactionRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.EndTransactionResponse:
        """End a whole transaction (or roll back a producer group's leftovers) on every broker master of the topic's
        route, concurrently, one broker EndTransaction each (codes in gateway.proto); with auth on, the caller needs
        Pub on the topic. This project's extension of RocketMQ's END_TRANSACTION."""
        timeout_ms = await self._timeout_ms(request.timeout_ms, context)
        if refused := await self._refused(context, (request.topic,)):
            return gateway_pb2.EndTransactionResponse(code=refused.code, remark=refused.remark)
        if not request.producer_group or request.whole_producer_group == bool(request.transaction_id):
            return gateway_pb2.EndTransactionResponse(
                code=ResponseCode.INVALID_PARAMETER,
                remark="EndTransaction needs a producer_group and either a transaction_id or whole_producer_group",
            )
        if request.whole_producer_group and request.commit:
            return gateway_pb2.EndTransactionResponse(
                code=ResponseCode.INVALID_PARAMETER, remark="a whole producer group can only be rolled back"
            )
        header = EndTransactionRequestHeader(
            producer_group=request.producer_group,
            tran_state_table_offset=-1,
            commit_log_offset=-1,
            commit_or_rollback=(
                MessageSysFlag.TRANSACTION_COMMIT_TYPE if request.commit else MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
            ),
            transaction_id=request.transaction_id,
            topic=request.topic,
            scope=EndTransactionScope.PRODUCER_GROUP
            if request.whole_producer_group
            else EndTransactionScope.TRANSACTION,
        )
        try:
            route = await self._producer.routes.route(request.topic)
            names = sorted({data.broker_name for data in route.broker_datas})
            answers = await asyncio.gather(
                *(self._producer.end_transaction(request.topic, name, header, timeout_ms) for name in names),
                return_exceptions=True,
            )
        except MQError as exc:
            return gateway_pb2.EndTransactionResponse(code=exc.code, remark=exc.remark)
        except Exception as exc:
            failed = _unexpected("EndTransaction", exc)
            return gateway_pb2.EndTransactionResponse(code=failed.code, remark=failed.remark)
        response = gateway_pb2.EndTransactionResponse(code=ResponseCode.SUCCESS)
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, str):
                ended, already = whole_end_counts(answer)
                response.ended_count += ended
                response.already_ended += already
                response.broker_names.append(name)
            elif response.code == ResponseCode.SUCCESS:
                error = answer if isinstance(answer, MQError) else None
                response.code = error.code if error is not None else ResponseCode.SYSTEM_ERROR
                response.remark = f"broker {name}: {error.remark if error is not None else answer!r}"
        log.info(
            "transaction_ended",
            topic=request.topic,
            producer_group=request.producer_group,
            transaction_id=request.transaction_id or "*",
            commit=request.commit,
            code=response.code,
            ended=response.ended_count,
        )
        return response


def _scanned_properties(raw: bytes) -> dict[str, str] | None:
    """The user properties the C scan found on every half message (a serialized Message holding only them), or None
    when they do not parse or use a reserved name (the protobuf path then answers each message)."""
    if not raw:
        return {}
    try:
        properties = dict(gateway_pb2.Message.FromString(raw).properties)
        check_user_properties(properties)
    except (DecodeError, MQError):
        return None
    return properties


def _first_message(raw: bytes) -> Message:
    """Message 0 of a serialized SendBatchRequest (for the send hooks of the C path; a half message with the
    request's producer group)."""
    request = gateway_pb2.SendBatchRequest.FromString(raw)
    return message_from_proto(request.messages[0], request.producer_group)


def _as_list(values: Sequence[str]) -> list[str]:
    return values if isinstance(values, list) else list(values)


def _serialize_send_batch(response: gateway_pb2.SendBatchResponse | bytes) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


def add_to_server(servicer: ProducerGatewayServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``: the generated handlers, but SendBatch takes the serialized request
    (:meth:`ProducerGatewayServicer.send_batch_raw`) and may answer with a serialized response."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Send": grpc.unary_unary_rpc_method_handler(
            servicer.Send,
            request_deserializer=gateway_pb2.SendRequest.FromString,
            response_serializer=gateway_pb2.SendResponse.SerializeToString,
        ),
        "SendBatch": grpc.unary_unary_rpc_method_handler(
            servicer.send_batch_raw, request_deserializer=None, response_serializer=_serialize_send_batch
        ),
        "SendOneway": grpc.unary_unary_rpc_method_handler(
            servicer.SendOneway,
            request_deserializer=gateway_pb2.SendOnewayRequest.FromString,
            response_serializer=gateway_pb2.SendOnewayResponse.SerializeToString,
        ),
        "RecallMessage": grpc.unary_unary_rpc_method_handler(
            servicer.RecallMessage,
            request_deserializer=gateway_pb2.RecallMessageRequest.FromString,
            response_serializer=gateway_pb2.RecallMessageResponse.SerializeToString,
        ),
        "EndTransaction": grpc.unary_unary_rpc_method_handler(
            servicer.EndTransaction,
            request_deserializer=gateway_pb2.EndTransactionRequest.FromString,
            response_serializer=gateway_pb2.EndTransactionResponse.SerializeToString,
        ),
    }
    assert set(handlers) == set(gateway_pb2.DESCRIPTOR.services_by_name["ProducerGateway"].methods_by_name)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)


def request_limits(*, max_batch_messages: int, max_concurrent_streams: int) -> RequestLimits:
    """The request guard's limits of the gateway's two services: messages per v1 SendBatch and per v2
    SendMessage (both ``max_batch_messages``), checked before the request is parsed."""
    v1 = gateway_pb2.DESCRIPTOR.services_by_name["ProducerGateway"]
    v2 = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    messages = ("messages", max_batch_messages, "max_batch_messages", None)
    return RequestLimits(
        dict([method_bounds(v1, "SendBatch", messages), method_bounds(v2, "SendMessage", messages)]),
        max_concurrent_streams=max_concurrent_streams,
    )
