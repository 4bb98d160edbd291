"""The hostile requests of issue 19, each a regression test against real processes: huge element counts refused
before they are parsed, attributes that once made every route vanish, a 400,000-topic registration, undecodable
requests (INVALID_ARGUMENT and one rate-limited log line), refused sends that created topics, client writes
into TBW102 / %RETRY% / %DLQ%, and each request of ``make fuzz`` that got SYSTEM_ERROR / INTERNAL_SERVER_ERROR."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from fuzz_cluster import store_snapshot
from fuzz_harness import V2_METADATA, Answer, is_unexpected, rss_bytes, serving
from google.protobuf import timestamp_pb2
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.grpc_guard import LOG_BURST
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from proto_grammar import varint

EMPTY_ELEMENTS: Final = 33_000_000  # 2 bytes each: a 63 MiB request
MAX_PEAK_GROWTH_BYTES: Final = 1024 * 1024 * 1024  # parsing them cost 3.5 GB (broker +4.9 GB, gateway +1.7 GB)
WAIT_S: Final = 60.0
OPTIONS: Final = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
Code = definition_pb2.Code


def _length_delimited(number: int, payload: bytes) -> bytes:
    return varint((number << 3) | 2) + varint(len(payload)) + payload


async def _raw_unary(addr: str, path: str, data: bytes) -> grpc.aio.AioRpcError | bytes:
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as channel:
        try:
            answer: bytes = await channel.unary_unary(path)(data, timeout=WAIT_S, metadata=V2_METADATA)
        except grpc.aio.AioRpcError as exc:
            return exc
        return answer


def _broker(cluster: LocalCluster) -> tuple[str, str, int]:
    name, addr = next(iter(cluster.broker_addrs.items()))
    return name, addr, cluster.brokers[name].pid


async def _refused_with_bounded_peak(addr: str, pid: int, path: str, data: bytes, bound_name: str) -> None:
    rss_before = rss_bytes(pid)
    answer = await _raw_unary(addr, path, data)
    assert isinstance(answer, grpc.aio.AioRpcError)
    assert answer.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bound_name in str(answer.details())
    assert rss_bytes(pid, "VmHWM") - rss_before < MAX_PEAK_GROWTH_BYTES
    assert await serving(addr)


async def test_a_63_mib_send_stream_frame_of_33_million_empty_requests_is_refused_unparsed(
    cluster: LocalCluster,
) -> None:
    _, addr, pid = _broker(cluster)
    frame = _length_delimited(4, b"\x0a\x00" * EMPTY_ELEMENTS)  # SendStreamRequest.batch.requests
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as channel:
        rss_before = rss_bytes(pid)

        async def frames() -> Any:
            yield frame

        call: Any = channel.stream_stream("/mq.broker.v1.Broker/SendStream")(frames(), timeout=WAIT_S)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in call:
                pass
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_send_batch_requests" in str(refused.value.details())
    assert rss_bytes(pid, "VmHWM") - rss_before < MAX_PEAK_GROWTH_BYTES
    assert await serving(addr)


async def test_a_63_mib_gateway_batch_of_33_million_empty_messages_is_refused_unparsed(cluster: LocalCluster) -> None:
    addr, pid = cluster.gateway_addr, cluster.gateway.pid
    data = b"\x0a\x00" * EMPTY_ELEMENTS
    await _refused_with_bounded_peak(addr, pid, "/mq.gateway.v1.ProducerGateway/SendBatch", data, "max_batch_messages")
    path = "/apache.rocketmq.v2.MessagingService/SendMessage"
    await _refused_with_bounded_peak(addr, pid, path, data, "max_batch_messages")


async def _create_topic(addr: str, config: common_pb2.TopicConfig) -> broker_pb2.CreateTopicResponse:
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        reply: broker_pb2.CreateTopicResponse = await stub.CreateTopic(
            broker_pb2.CreateTopicRequest(topic_config=config), timeout=WAIT_S
        )
        return reply


async def _route_and_last_registration(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """(the topic's queue count in the name server's route, the broker's last registration, ms)."""
    async with grpc.aio.insecure_channel(cluster.namesrv_addr) as channel:
        stub: Any = namesrv_pb2_grpc.NameServerStub(channel)
        route = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic), timeout=10)
        info = await stub.GetBrokerClusterInfo(namesrv_pb2.GetBrokerClusterInfoRequest(), timeout=10)
    queues = sum(q.write_queue_nums for q in route.route.queue_datas) if route.code == 0 else 0
    last = max((live.last_update_timestamp_ms for live in info.broker_live_table.values()), default=0)
    return queues, last


async def _wait_route(cluster: LocalCluster, topic: str, registered_after_ms: int = 0) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:
        queues, last = await _route_and_last_registration(cluster, topic)
        if queues and last > registered_after_ms:
            return queues
        assert time.monotonic() < deadline, f"no route of {topic} registered after {registered_after_ms}"
        await asyncio.sleep(0.2)


async def test_create_topic_with_40_mib_of_attributes_is_refused_and_routes_stay(cluster: LocalCluster) -> None:
    _, addr, pid = _broker(cluster)
    ok = await _create_topic(
        addr, common_pb2.TopicConfig(topic_name="Attributed", read_queue_nums=2, write_queue_nums=2, perm=6)
    )
    assert ok.code == ResponseCode.SUCCESS
    assert await _wait_route(cluster, "Attributed") == 2
    many = {f"+k{i}": "v" * 64 for i in range(600_000)}  # about 40 MiB in 600,000 attributes
    one_huge = {"+message.type": "N" * (40 << 20)}  # 40 MiB in one attribute
    path = "/mq.broker.v1.Broker/CreateTopic"
    for attributes in (many, one_huge):
        config = common_pb2.TopicConfig(
            topic_name="Attributed", read_queue_nums=2, write_queue_nums=2, perm=6, attributes=attributes
        )
        data = broker_pb2.CreateTopicRequest(topic_config=config).SerializeToString()
        await _refused_with_bounded_peak(addr, pid, path, data, "max_topic_attributes")
    refused_at_ms = int(time.time() * 1000)
    assert await _wait_route(cluster, "Attributed", registered_after_ms=refused_at_ms) == 2
    snapshot = await store_snapshot(cluster)
    assert "Attributed" in snapshot.topics


async def test_a_registration_of_400000_topics_is_refused_fast_and_routes_stay(cluster: LocalCluster) -> None:
    broker_name, broker_addr, _ = _broker(cluster)
    assert (
        await _create_topic(
            broker_addr, common_pb2.TopicConfig(topic_name="Kept", read_queue_nums=1, write_queue_nums=1, perm=6)
        )
    ).code == 0
    assert await _wait_route(cluster, "Kept") == 1
    header = namesrv_pb2.RegisterBrokerRequest(
        cluster_name=cluster.spec.cluster_name, broker_name=broker_name, broker_id=0, broker_addr="127.0.0.9:1"
    ).SerializeToString()
    entries = b"".join(_length_delimited(6, _length_delimited(1, b"T%d" % i)) for i in range(400_000))
    answer = await _raw_unary(cluster.namesrv_addr, "/mq.namesrv.v1.NameServer/RegisterBroker", header + entries)
    assert isinstance(answer, grpc.aio.AioRpcError)
    assert answer.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_topics_per_registration" in str(answer.details())
    assert await _wait_route(cluster, "Kept") == 1
    async with grpc.aio.insecure_channel(cluster.namesrv_addr) as channel:
        stub: Any = namesrv_pb2_grpc.NameServerStub(channel)
        route = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="Kept"), timeout=10)
    assert [b.broker_addrs[0] for b in route.route.broker_datas] == [broker_addr]


def _guard_lines(cluster: LocalCluster) -> list[str]:
    return [line for line in cluster.namesrv.log_path.read_text().splitlines() if "request_refused_by_guard" in line]


async def test_undecodable_requests_get_invalid_argument_and_few_log_lines(cluster: LocalCluster) -> None:
    before = len(_guard_lines(cluster))
    path = "/mq.namesrv.v1.NameServer/GetRouteInfoByTopic"
    answers = [await _raw_unary(cluster.namesrv_addr, path, b"\xff\xff\xff\xff") for _ in range(3 * LOG_BURST)]
    assert {a.code() for a in answers if isinstance(a, grpc.aio.AioRpcError)} == {grpc.StatusCode.INVALID_ARGUMENT}
    assert all(isinstance(a, grpc.aio.AioRpcError) for a in answers)
    deadline = time.monotonic() + WAIT_S
    while len(_guard_lines(cluster)) == before:
        assert time.monotonic() < deadline, "no request_refused_by_guard line"
        await asyncio.sleep(0.2)
    lines = _guard_lines(cluster)[before:]
    assert 1 <= len(lines) <= LOG_BURST < len(answers)  # a flood cannot fill the disk
    assert '"method": "/mq.namesrv.v1.NameServer/GetRouteInfoByTopic"' in lines[0]
    assert '"peer": "ipv4:127.0.0.1:' in lines[0]


async def _send(addr: str, request: broker_pb2.SendMessageRequest) -> broker_pb2.SendMessageResponse:
    async with grpc.aio.insecure_channel(addr) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        frame = broker_pb2.SendStreamRequest(frame_id=1, batch=broker_pb2.SendBatchRequest(requests=[request]))

        async def frames() -> Any:
            yield frame

        answers = [a async for a in stub.SendStream(frames(), timeout=WAIT_S)]
    response: broker_pb2.SendMessageResponse = answers[0].batch.responses[0]
    return response


def _send_request(topic: str, body: bytes = b"x", queue_id: int = 0) -> broker_pb2.SendMessageRequest:
    return broker_pb2.SendMessageRequest(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        body=body,
    )


async def test_a_refused_send_to_an_unknown_topic_creates_no_topic(cluster: LocalCluster) -> None:
    _, addr, _ = _broker(cluster)
    empty = await _send(addr, _send_request("NeverCreated", body=b""))
    assert empty.code == ResponseCode.MESSAGE_ILLEGAL
    bad_queue = await _send(addr, _send_request("NeverCreated", queue_id=99))
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER  # QUEUE_ID_ILLEGAL_CODE, as apache/rocketmq#9027
    accepted = await _send(addr, _send_request("CreatedBySend"))
    assert accepted.code == ResponseCode.SUCCESS
    await asyncio.sleep(1.0)  # topics.json is written in the background
    topics = (await store_snapshot(cluster)).topics
    assert "CreatedBySend" in topics
    assert "NeverCreated" not in topics


@pytest.mark.parametrize("topic", ["TBW102", "%RETRY%FuzzGroup", "%DLQ%FuzzGroup"])
async def test_clients_cannot_write_system_topics(cluster: LocalCluster, topic: str) -> None:
    _, addr, _ = _broker(cluster)
    before = await store_snapshot(cluster)
    assert (await _send(addr, _send_request(topic))).code == ResponseCode.NO_PERMISSION
    async with grpc.aio.insecure_channel(cluster.gateway_addr) as channel:
        v1: Any = gateway_pb2_grpc.ProducerGatewayStub(channel)
        message = gateway_pb2.Message(topic=topic, body=b"x")
        sent = await v1.Send(gateway_pb2.SendRequest(message=message), timeout=WAIT_S)
        assert sent.result.code == ResponseCode.MESSAGE_ILLEGAL
        v2: Any = service_pb2_grpc.MessagingServiceStub(channel)
        v2_message = definition_pb2.Message(
            topic=definition_pb2.Resource(name=topic),
            body=b"x",
            system_properties=definition_pb2.SystemProperties(message_id="01", message_type=definition_pb2.NORMAL),
        )
        reply = await v2.SendMessage(
            service_pb2.SendMessageRequest(messages=[v2_message]), timeout=WAIT_S, metadata=V2_METADATA
        )
        assert reply.status.code == Code.ILLEGAL_TOPIC
    assert await store_snapshot(cluster) == before


async def test_a_telemetry_stream_refused_before_reading_answers_invalid_argument(cluster: LocalCluster) -> None:
    """Found by the fuzz: a Telemetry stream without x-mq-client-id whose first frame was still being written when
    the gateway refused it reached the client as INTERNAL "Internal error from Core"; the gateway now reads that
    frame first."""
    frame = b"\x0a\x00" * 200_000  # 400 KB: still in flight when the refusal comes

    async def one(channel: grpc.aio.Channel) -> grpc.StatusCode:
        call: Any = channel.stream_stream("/apache.rocketmq.v2.MessagingService/Telemetry")(timeout=WAIT_S)
        try:
            await call.write(frame)
            await call.done_writing()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            pass
        code: grpc.StatusCode = await call.code()
        return code

    async with grpc.aio.insecure_channel(cluster.gateway_addr, options=OPTIONS) as channel:
        codes = await asyncio.gather(*(one(channel) for _ in range(25)))
    assert set(codes) == {grpc.StatusCode.INVALID_ARGUMENT}


async def test_a_pull_from_an_out_of_range_queue_is_invalid_parameter_not_system_error(cluster: LocalCluster) -> None:
    """Found by ``make fuzz``: PullMessage with queue id 2^31-1 answered SYSTEM_ERROR (RocketMQ <= 5.3's code)."""
    _, addr, _ = _broker(cluster)
    async with grpc.aio.insecure_channel(addr) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        request = broker_pb2.PullMessageRequest(
            consumer_group="FuzzGroup", topic="TBW102", queue_id=2**31 - 1, max_msg_nums=1
        )
        reply = await stub.PullMessage(request, timeout=WAIT_S)
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert reply.remark.startswith(f"queueId[{2**31 - 1}] is illegal, topic:[TBW102]")


async def test_a_query_offset_with_a_timestamp_past_year_9999_is_bad_request(cluster: LocalCluster) -> None:
    """Found by ``make fuzz``: QueryOffset(TIMESTAMP) with seconds 2^63-1 raised inside the gateway (protobuf's
    Timestamp range check) and answered INTERNAL_SERVER_ERROR."""
    async with grpc.aio.insecure_channel(cluster.gateway_addr) as channel:
        v2: Any = service_pb2_grpc.MessagingServiceStub(channel)
        for seconds, nanos in ((2**63 - 1, 0), (-(2**63), 0), (0, -1)):
            request = service_pb2.QueryOffsetRequest(
                message_queue=definition_pb2.MessageQueue(
                    topic=definition_pb2.Resource(name="TBW102"), id=0, broker=definition_pb2.Broker(name="broker-a")
                ),
                query_offset_policy=definition_pb2.QueryOffsetPolicy.TIMESTAMP,
                timestamp=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos),
            )
            reply = await v2.QueryOffset(request, timeout=WAIT_S, metadata=V2_METADATA)
            assert reply.status.code == Code.BAD_REQUEST, reply.status
            assert "not a valid time" in reply.status.message


async def test_send_back_of_an_offset_without_a_message_keeps_rocketmqs_documented_system_error(
    cluster: LocalCluster,
) -> None:
    """The fuzz's SYSTEM_ERROR answers of ConsumerSendMsgBack: RocketMQ's own answer (with this remark) to an
    offset where no message starts, which the harness lists as legitimate; any other SYSTEM_ERROR still counts."""
    _, addr, _ = _broker(cluster)
    async with grpc.aio.insecure_channel(addr) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        request = broker_pb2.ConsumerSendMsgBackRequest(group="FuzzGroup", offset=2**63 - 1)
        reply = await stub.ConsumerSendMsgBack(request, timeout=WAIT_S)
    answer = Answer(f"code:{reply.code}", reply.remark)
    assert answer == Answer("code:1", f"look message by offset failed, {2**63 - 1}")
    assert not is_unexpected("ConsumerSendMsgBack", answer)
    internal = Answer("code:1", "ConsumerSendMsgBack failed on an internal error; the service logged the cause")
    assert is_unexpected("ConsumerSendMsgBack", internal)
    assert is_unexpected("PullMessage", answer)
