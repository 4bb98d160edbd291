"""Bad input gets RocketMQ's response code and a clear remark, and the services keep serving."""

from __future__ import annotations

import time

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES
from mq_common.protocol import SendMessageRequestHeader
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.readiness import health_status
from mq_local.testing import unique_topic

pytestmark = pytest.mark.integration


async def _send(gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str, body: bytes) -> gateway_pb2.SendResult:
    request = gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=body))
    response = await gateway.Send(request, timeout=30)
    return response.result


async def _good_send_still_works(gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str) -> None:
    result = await _send(gateway, topic, b"still serving")
    assert result.code == ResponseCode.SUCCESS, result.remark


def _all_serving(cluster: LocalCluster) -> None:
    for proc in cluster.processes():
        assert proc.running(), f"{proc.name} exited"
        assert health_status(f"127.0.0.1:{proc.port}") == "SERVING", proc.name


async def test_empty_body_is_message_illegal(gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str) -> None:
    result = await _send(gateway, topic, b"")
    assert result.code == ResponseCode.MESSAGE_ILLEGAL
    assert "the message body length is zero" in result.remark
    await _good_send_still_works(gateway, topic)


async def test_topic_with_illegal_characters_is_message_illegal(
    gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str
) -> None:
    result = await _send(gateway, "bad topic/name!", b"x")
    assert result.code == ResponseCode.MESSAGE_ILLEGAL
    assert "contains illegal characters" in result.remark
    await _good_send_still_works(gateway, topic)


async def test_five_mib_body_is_over_the_max_size(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str
) -> None:
    result = await _send(gateway, topic, b"x" * (5 * 1024 * 1024))  # under gRPC's 64 MiB frame limit
    assert result.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE_BYTES}" in result.remark
    await _good_send_still_works(gateway, topic)
    _all_serving(cluster)


async def test_five_mib_body_in_a_batch_fails_only_that_message(
    gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str
) -> None:
    messages = [gateway_pb2.Message(topic=topic, body=b) for b in (b"ok-1", b"y" * (5 * 1024 * 1024), b"ok-2")]
    response = await gateway.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=30)
    assert [r.code for r in response.results] == [0, ResponseCode.MESSAGE_ILLEGAL, 0]


async def test_unknown_topic_with_auto_create_off_is_topic_not_exist(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str
) -> None:
    missing = unique_topic("never_created")
    started = time.monotonic()
    result = await _send(gateway, missing, b"x")
    assert result.code == ResponseCode.TOPIC_NOT_EXIST
    assert "No route info of this topic" in result.remark
    assert missing in result.remark
    assert time.monotonic() - started < 30  # answered within the send budget plus slack, not hung
    await _good_send_still_works(gateway, topic)
    _all_serving(cluster)


async def test_queue_id_out_of_range_sent_straight_to_a_broker(cluster: LocalCluster, topic: str) -> None:
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        addr = cluster.broker_addrs["broker-a"]

        def request(queue_id: int) -> SendMessageRequestHeader:
            return SendMessageRequestHeader(
                producer_group="it_bad_queue",
                topic=topic,
                queue_id=queue_id,
                sys_flag=0,
                born_timestamp_ms=int(time.time() * 1000),
                flag=0,
                properties=encode_properties({"WAIT": "true"}),
                body=b"queue check",
            )

        bad = await client.send_message(addr, request(99), timeout_ms=10_000)
        assert bad.code == ResponseCode.INVALID_PARAMETER
        assert "request queueId[99] is illegal" in bad.remark
        good = await client.send_message(addr, request(3), timeout_ms=10_000)
        assert (good.code, good.queue_id) == (ResponseCode.SUCCESS, 3)
    finally:
        await client.close()  # ends the send stream
        await pool.close()
    _all_serving(cluster)


async def test_a_batch_over_the_gateway_limit_is_refused_as_invalid_argument(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.ProducerGatewayAsyncStub, topic: str
) -> None:
    messages = [gateway_pb2.Message(topic=topic, body=b"m")] * 1001
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await gateway.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    await _good_send_still_works(gateway, topic)
