"""gRPC face of the gateway: translates mq.gateway.v1 messages <-> the producer core's domain values.

Mirrors the 5.x proxy's SendMessageActivity in spirit. Every send outcome travels as a SendResult:
success = code 0 + send_status; a failure = its ResponseCode + remark (+ broker_name when known). Only a
malformed request as a whole (a negative or too large send_timeout_ms, too many messages in a batch) gets
gRPC INVALID_ARGUMENT. Handlers run on the gateway's asyncio loop and never raise anything else into gRPC.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer import Message, SendResult, SendStatus
from mq_client.producer.validators import check_user_properties
from mq_common.errors import MessageIllegalError, MQError
from mq_common.logging import get_logger
from mq_common.response_code import ResponseCode

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

    async def send(self, msg: Message, timeout_ms: int | None = None) -> SendResult: ...

    async def send_batch(
        self, msgs: Sequence[Message], timeout_ms: int | None = None
    ) -> list[SendResult | MQError]: ...


def message_from_proto(msg: gateway_pb2.Message) -> Message:
    """mq.gateway.v1.Message -> Message. Raises MessageIllegalError (13) for a reserved property name."""
    check_user_properties(msg.properties)
    return Message(
        topic=msg.topic,
        body=msg.body,
        tags=msg.tag,
        keys=tuple(msg.keys),
        properties=dict(msg.properties),
        flag=msg.flag,
        sharding_key=msg.sharding_key,
    )


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
    )


def error_to_proto(error: MQError) -> gateway_pb2.SendResult:
    """An MQError -> mq.gateway.v1.SendResult with its code, remark and broker name (if it has one)."""
    broker_name = getattr(error, "broker_name", "")
    return gateway_pb2.SendResult(
        code=error.code, remark=error.remark, broker_name=broker_name if isinstance(broker_name, str) else ""
    )


def outcome_to_proto(outcome: SendResult | MQError) -> gateway_pb2.SendResult:
    return result_to_proto(outcome) if isinstance(outcome, SendResult) else error_to_proto(outcome)


def _unexpected(rpc: str, exc: Exception) -> gateway_pb2.SendResult:
    log.exception("request_failed", rpc=rpc)
    return gateway_pb2.SendResult(code=ResponseCode.SYSTEM_ERROR, remark=f"{rpc} failed: {type(exc).__name__}: {exc}")


class ProducerGatewayServicer(gateway_pb2_grpc.ProducerGatewayServicer):
    """mq.gateway.v1.ProducerGateway over one producer core. Runs on the gateway's asyncio loop.

    ``producer_group`` of a request is accepted and ignored: the gateway sends as its own group.
    """

    def __init__(self, producer: Producer, *, max_send_timeout_ms: int, max_batch_messages: int) -> None:
        self._producer = producer
        self._max_send_timeout_ms = max_send_timeout_ms
        self._max_batch_messages = max_batch_messages

    async def _timeout_ms(self, requested_ms: int, context: grpc.aio.ServicerContext[object, object]) -> int | None:
        if requested_ms < 0 or requested_ms > self._max_send_timeout_ms:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"send_timeout_ms must be in [0, {self._max_send_timeout_ms}], got {requested_ms}",
            )
        return requested_ms or None

    async def Send(
        self, request: gateway_pb2.SendRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendResponse:
        timeout_ms = await self._timeout_ms(request.send_timeout_ms, context)
        try:
            if not request.HasField("message"):
                raise MessageIllegalError("the message is null")
            result = await self._producer.send(message_from_proto(request.message), timeout_ms)
        except MQError as exc:
            return gateway_pb2.SendResponse(result=error_to_proto(exc))
        except Exception as exc:
            return gateway_pb2.SendResponse(result=_unexpected("Send", exc))
        return gateway_pb2.SendResponse(result=result_to_proto(result))

    async def SendBatch(
        self, request: gateway_pb2.SendBatchRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> gateway_pb2.SendBatchResponse:
        count = len(request.messages)
        if count > self._max_batch_messages:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"too many messages in one SendBatch: {count}, max is {self._max_batch_messages}",
            )
        timeout_ms = await self._timeout_ms(request.send_timeout_ms, context)
        outcomes: list[SendResult | MQError | None] = [None] * count
        valid: list[int] = []
        msgs: list[Message] = []
        for i, proto in enumerate(request.messages):
            try:
                msgs.append(message_from_proto(proto))
            except MQError as exc:
                outcomes[i] = exc
            else:
                valid.append(i)
        try:
            for i, outcome in zip(valid, await self._producer.send_batch(msgs, timeout_ms), strict=True):
                outcomes[i] = outcome
        except MQError as exc:
            for i in valid:
                outcomes[i] = exc
        except Exception as exc:
            failed = _unexpected("SendBatch", exc)
            return gateway_pb2.SendBatchResponse(
                results=[failed if o is None else outcome_to_proto(o) for o in outcomes]
            )
        return gateway_pb2.SendBatchResponse(results=[outcome_to_proto(o) for o in outcomes if o is not None])


def add_to_server(servicer: ProducerGatewayServicer, server: grpc.aio.Server) -> None:
    """Register ``servicer`` on ``server``."""
    gateway_pb2_grpc.add_ProducerGatewayServicer_to_server(servicer, server)
