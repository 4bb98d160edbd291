"""The producer gateway client adapter: ProducerGateway.Send (used by mqadmin sendMessage) and RecallMessage.

Mirrors DefaultMQProducer#send as seen through RocketMQ 5's proxy. Runs on the caller's asyncio loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.channels import ChannelPool
from mq_common.channels import seconds as _seconds
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check

__all__ = ["GatewayMessage", "GatewaySendResult", "gateway_recall", "gateway_send"]


@dataclass(frozen=True, slots=True)
class GatewayMessage:
    """A message for ProducerGateway.Send. Mirrors org.apache.rocketmq.common.message.Message; at most one of
    ``delay_time_level`` / ``deliver_time_ms`` (ms since the epoch) / ``delay_time_sec`` / ``delay_time_ms``
    (0 = not set) says when it is delivered (mq_client.producer.Message has the rules)."""

    topic: str
    body: bytes
    tag: str = ""
    keys: tuple[str, ...] = ()
    sharding_key: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_time_level: int = 0
    deliver_time_ms: int = 0
    delay_time_sec: int = 0
    delay_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class GatewaySendResult:
    """Mirrors org.apache.rocketmq.client.producer.SendResult; ``send_status`` is SendStatus' name;
    ``recall_handle`` is a timer message's (:func:`gateway_recall` takes it), else ""."""

    send_status: str
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    recall_handle: str = ""


async def gateway_send(
    pool: ChannelPool,
    addr: str,
    message: GatewayMessage,
    producer_group: str = "",
    send_timeout_ms: int = 0,
    timeout_ms: int = 10_000,
) -> GatewaySendResult:
    """ProducerGateway.Send at ``addr``; ``send_timeout_ms`` 0 means the gateway's default (3000 ms).

    Raises error_for_code(code, remark, broker_name) when the gateway reports a failed send, and
    RemotingError / RemotingTimeoutError / InvalidParameterError on transport failure."""
    request = gateway_pb2.SendRequest(
        message=gateway_pb2.Message(
            topic=message.topic,
            body=message.body,
            tag=message.tag,
            keys=list(message.keys),
            sharding_key=message.sharding_key,
            properties=dict(message.properties),
            flag=message.flag,
            delay_time_level=message.delay_time_level,
            deliver_time_ms=message.deliver_time_ms,
            delay_time_sec=message.delay_time_sec,
            delay_time_ms=message.delay_time_ms,
        ),
        producer_group=producer_group,
        send_timeout_ms=send_timeout_ms,
    )
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(addr))
    resp = await _invoke(stub.Send(request, timeout=_seconds(timeout_ms)), addr)
    result = resp.result
    _check(result.code, result.remark, result.broker_name)
    status = common_pb2.SendStatus.Name(result.send_status).removeprefix("SEND_STATUS_")
    return GatewaySendResult(
        send_status=status,
        msg_id=result.msg_id,
        offset_msg_id=result.offset_msg_id,
        broker_name=result.broker_name,
        queue_id=result.queue_id,
        queue_offset=result.queue_offset,
        recall_handle=result.recall_handle,
    )


async def gateway_recall(
    pool: ChannelPool,
    addr: str,
    topic: str,
    recall_handle: str,
    producer_group: str = "",
    recall_timeout_ms: int = 0,
    timeout_ms: int = 10_000,
) -> str:
    """ProducerGateway.RecallMessage at ``addr``: cancel a timer message not delivered yet; returns its UNIQ_KEY.
    ``recall_timeout_ms`` 0 means the gateway's default (3000 ms). Mirrors DefaultMQProducer#recallMessage.

    Raises error_for_code(code, remark) when the gateway refuses (ILLEGAL_OPERATION 604 for a garbage handle, a
    delivery time already passed, an unknown or already recalled message; see gateway.proto), and RemotingError /
    RemotingTimeoutError / InvalidParameterError on transport failure."""
    request = gateway_pb2.RecallMessageRequest(
        topic=topic, recall_handle=recall_handle, producer_group=producer_group, timeout_ms=recall_timeout_ms
    )
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(addr))
    resp = await _invoke(stub.RecallMessage(request, timeout=_seconds(timeout_ms)), addr)
    _check(resp.code, resp.remark)
    return resp.msg_id
