"""In-process checks of the metrics kit and of each service's metric set against metric_names.yaml."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
import structlog
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_broker.consumer.pop.order_info import ConsumerOrderInfoManager
from mq_broker.metrics import BrokerMetrics, message_type
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from mq_common.errors import RETRIABLE_BROKER_CODES, RemotingError
from mq_common.grpc_server import CHANNEL_OPTIONS, ServiceServer
from mq_common.metrics import OTHER_TOPIC, NodeIdentity, TopicLabels
from mq_common.protocol import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from mq_common.request_context import REQUEST_ID_METADATA_KEY, RequestContextInterceptor, current_request_id
from mq_common.response_code import ResponseCode
from mq_gateway.metrics import GatewayMetrics, ObservedTransport
from mq_namesrv.metrics import NamesrvMetrics
from mq_namesrv.route_info_manager import RouteInfoManager
from obs_testkit import check_exposition, expected_for
from prometheus_client.parser import text_string_to_metric_families


def broker_metrics(max_topics: int = 256) -> BrokerMetrics:
    return BrokerMetrics(NodeIdentity("c1", "broker", "broker-a"), max_topics=max_topics, flush_disk_type="SYNC_FLUSH")


def samples(
    metrics: BrokerMetrics | GatewayMetrics | NamesrvMetrics,
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def labels(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset({"cluster": "c1", "node_type": "broker", "node_id": "broker-a", **kw}.items())


def stored(topic: str, body: bytes, properties: str = "", sys_flag: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=0, body=body, properties_string=properties, sys_flag=sys_flag)


def test_message_type_label_follows_rocketmq_precedence() -> None:
    """transaction, then delay (a level or any timer time), then fifo, else normal."""
    assert message_type(stored("t", b"x", "DELAY\x013\x02__SHARDINGKEY\x01k\x02")) == "delay"
    assert message_type(stored("t", b"x", "TIMER_DELIVER_MS\x011\x02")) == "delay"
    assert message_type(stored("t", b"x", "REAL_TOPIC\x01t\x02TIMER_OUT_MS\x011\x02")) == "delay"
    assert message_type(stored("t", b"x", "__SHARDINGKEY\x01k\x02")) == "fifo"
    assert message_type(stored("t", b"x", "DELAY\x011\x02", sys_flag=4)) == "transaction"
    assert message_type(stored("t", b"x", "KEYS\x01TIMER_\x02")) == "normal"


def test_topic_labels_keep_the_first_topics_then_fold_into_other() -> None:
    cap = TopicLabels(2)
    assert [cap(t) for t in ("a", "b", "c", "a", "d", "b")] == ["a", "b", OTHER_TOPIC, "a", OTHER_TOPIC, "b"]
    assert TopicLabels(0)("a") == OTHER_TOPIC


def test_broker_on_put_counts_stored_messages_by_topic_and_type_and_caps_topics() -> None:
    m = broker_metrics(max_topics=1)
    batch = [
        stored("t1", b"x" * 100),
        stored("t1", b"y" * 5000, properties="__SHARDINGKEY\x01k\x02"),
        stored("t1", b"z" * 10, sys_flag=4),
        stored("t2", b"w" * 2000),
        stored("t1", b"refused"),
    ]
    ok = PutMessageResult(PutMessageStatus.PUT_OK)
    results = [ok, ok, PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT), ok]
    results.append(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
    m.on_put(batch, results, 2.5, "127.0.0.1:5000")
    got = samples(m)
    assert got[("rocketmq_messages_in_total", labels(topic="t1", message_type="normal"))] == 1
    assert got[("rocketmq_messages_in_total", labels(topic="t1", message_type="fifo"))] == 1
    assert got[("rocketmq_messages_in_total", labels(topic="t1", message_type="transaction"))] == 1
    assert got[("rocketmq_messages_in_total", labels(topic=OTHER_TOPIC, message_type="normal"))] == 1
    assert got[("rocketmq_throughput_in_total", labels(topic="t1", message_type="fifo"))] == 5000
    size = labels(topic="t1", message_type="fifo")
    assert got[("rocketmq_message_size_bucket", size | {("le", "4096.0")})] == 0
    assert got[("rocketmq_message_size_bucket", size | {("le", "524288.0")})] == 1
    assert got[("rocketmq_message_size_bucket", size | {("le", "+Inf")})] == 1
    assert got[("rocketmq_message_size_sum", size)] == 5000
    assert got[("mq_broker_put_latency_ms_count", labels(flush_disk_type="SYNC_FLUSH"))] == 1


def test_flush_observer_counts_messages_per_flush_and_timeouts() -> None:
    m = broker_metrics()
    ok = PutMessageResult(PutMessageStatus.PUT_OK)
    m.on_put([stored("t", b"a")] * 3, [ok] * 3, 1.0, "")
    m.on_flush(0.4)
    m.on_flush_timeout(2)
    got = samples(m)
    assert got[("mq_broker_messages_per_flush_sum", labels())] == 3
    assert got[("mq_broker_flush_latency_ms_count", labels())] == 1
    assert got[("mq_broker_flush_disk_timeout_total", labels())] == 2


@pytest.mark.parametrize("service", ["namesrv", "broker", "gateway"])
def test_in_process_families_match_the_metric_list(service: str) -> None:
    if service == "namesrv":
        metrics: BrokerMetrics | GatewayMetrics | NamesrvMetrics = NamesrvMetrics(
            NodeIdentity("c1", "namesrv", "127.0.0.1:9876"), RouteInfoManager(), max_topics=10
        )
        metrics.observe_rpc("RegisterBroker", "SUCCESS", 1.0)
    elif service == "broker":
        metrics = broker_metrics()
        metrics.observe_rpc("SendBatch", "SUCCESS", 1.0)
        metrics.on_messages_out("t", "g", 2, 200, is_retry=False)
        metrics.on_send_to_dlq("g", "t")
        order_info = ConsumerOrderInfoManager(None)
        order_info.update("", "t", "g", 0, 1, 60_000, [0, 1], 1)
        metrics.bind_fifo(order_info)
        metrics.on_fifo_order_wait("t", "g", 5.0)
    else:
        metrics = GatewayMetrics(NodeIdentity("c1", "proxy", "127.0.0.1:8081"), max_topics=10)
        metrics.on_call("batch", "success", 0.01, 100, 0)
    assert check_exposition(metrics.exposition().decode(), service, require_all=False) == []
    assert expected_for(service)


async def test_request_id_from_metadata_is_bound_and_rpc_observed(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    observed: list[tuple[str, str]] = []

    class Echo(gateway_pb2_grpc.ProducerGatewayServicer):
        async def SendOneway(self, request: object, context: object) -> gateway_pb2.SendOnewayResponse:
            seen.append((current_request_id(), str(structlog.contextvars.get_contextvars().get("request_id"))))
            return gateway_pb2.SendOnewayResponse(code=13, remark="bad")

    interceptor = RequestContextInterceptor(observe=lambda m, c, _ms: observed.append((m, c)), generate=True)
    server = ServiceServer(["mq.gateway.v1.ProducerGateway"], [interceptor])
    gateway_pb2_grpc.add_ProducerGatewayServicer_to_server(Echo(), server.server)
    port = server.bind("127.0.0.1", 0)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as channel:
            stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
            await stub.SendOneway(gateway_pb2.SendOnewayRequest(), metadata=((REQUEST_ID_METADATA_KEY, "rid-42"),))
            await stub.SendOneway(gateway_pb2.SendOnewayRequest())
    finally:
        await server.stop(0)
    assert seen[0] == ("rid-42", "rid-42")
    assert len(seen[1][0]) == 16
    assert seen[1][0] == seen[1][1]
    assert observed == [("SendOneway", "MESSAGE_ILLEGAL")] * 2


class _FakeBroker:
    """A BrokerTransport answering fixed codes, or raising."""

    def __init__(self, codes: list[int], error: Exception | None = None) -> None:
        self.codes = codes
        self.error = error

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        return (await self.send_batch(addr, [request], timeout_ms))[0]

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        if self.error is not None:
            raise self.error
        return [SendMessageResponseHeader(c, "", "", 0, -1) for c in self.codes[: len(requests)]]

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        if self.error is not None:
            raise self.error
        code = self.codes[0]
        return SendMessageBatchResponseHeader(code, "", "", request.queue_id, 0, 0 if code else request.message_count)


def gateway_samples(metrics: GatewayMetrics) -> dict[tuple[str, str], float]:
    """Every sample of ``metrics`` by (name, its reason or result label, or "")."""
    return {
        (s.name, s.labels.get("reason", s.labels.get("result", ""))): s.value
        for f in text_string_to_metric_families(metrics.exposition().decode())
        for s in f.samples
    }


async def test_observed_transport_counts_batch_sizes_and_retriable_failures() -> None:
    metrics = GatewayMetrics(NodeIdentity("c1", "proxy", "gw"), max_topics=10)
    request = SendMessageRequestHeader(producer_group="g", topic="t", body=b"x")
    codes = [0, ResponseCode.SYSTEM_BUSY, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SYSTEM_BUSY]
    await ObservedTransport(_FakeBroker(codes), metrics, RETRIABLE_BROKER_CODES).send_batch("b", [request] * 4, 1000)
    failing = ObservedTransport(_FakeBroker([], RemotingError("down")), metrics, RETRIABLE_BROKER_CODES)
    with pytest.raises(RemotingError):
        await failing.send_batch("b", [request] * 3, 1000)
    got = gateway_samples(metrics)
    assert got[("mq_gateway_send_retries_total", "SYSTEM_BUSY")] == 2
    assert got[("mq_gateway_send_retries_total", ResponseCode.name_of(RemotingError("x").code))] == 3
    assert got[("mq_gateway_coalesced_batch_messages_sum", "")] == 7
    assert got[("mq_gateway_broker_call_latency_ms_count", "error")] == 1


async def test_observed_transport_counts_every_message_of_a_failed_message_batch() -> None:
    """A MessageBatch call that fails (transport error) or is refused with a retriable code is retried with all its
    messages: each of them counts as a retry, and the call observes its message count."""
    metrics = GatewayMetrics(NodeIdentity("c1", "proxy", "gw"), max_topics=10)
    batch = SendMessageBatchRequestHeader(producer_group="g", topic="t", body=b"...", message_count=50)
    await ObservedTransport(_FakeBroker([0]), metrics, RETRIABLE_BROKER_CODES).send_message_batch("b", batch, 1000)
    busy = ObservedTransport(_FakeBroker([ResponseCode.SYSTEM_BUSY]), metrics, RETRIABLE_BROKER_CODES)
    await busy.send_message_batch("b", batch, 1000)
    failing = ObservedTransport(_FakeBroker([], RemotingError("down")), metrics, RETRIABLE_BROKER_CODES)
    with pytest.raises(RemotingError):
        await failing.send_message_batch("b", batch, 1000)
    got = gateway_samples(metrics)
    assert got[("mq_gateway_send_retries_total", "SYSTEM_BUSY")] == 50
    assert got[("mq_gateway_send_retries_total", ResponseCode.name_of(RemotingError("x").code))] == 50
    assert got[("mq_gateway_coalesced_batch_messages_sum", "")] == 150
    assert got[("mq_gateway_coalesced_batch_messages_count", "")] == 3


def test_fifo_figures_fold_pairs_past_the_bound_and_age_the_oldest_block() -> None:
    """Blocked queues summed and the oldest block kept per (topic, consumer_group) label pair (pairs past
    max_consumer_pairs fold into _other); a pair whose queues are all acked exports 0 and 0."""
    m = BrokerMetrics(
        NodeIdentity("c1", "broker", "broker-a"), max_topics=10, flush_disk_type="SYNC_FLUSH", max_consumer_pairs=1
    )
    order_info = ConsumerOrderInfoManager(None)
    m.bind_fifo(order_info)
    now = int(time.time() * 1000)
    order_info.update("", "t", "g", 0, now - 1_000, 60_000, [0], now)
    order_info.update("", "t", "g", 1, now - 5_000, 60_000, [0], now)
    order_info.update("", "t2", "g", 0, now - 9_000, 60_000, [0], now)
    order_info.update("", "t3", "g", 0, now - 20_000, 60_000, [0], now)
    samples(m)  # pairs are named in the order first seen: t here
    assert order_info.commit_and_next("t3", "g", 0, 0, now - 20_000) == 1
    got = samples(m)
    first = labels(topic="t", consumer_group="g")
    other = labels(topic=OTHER_TOPIC, consumer_group=OTHER_TOPIC)
    assert got[("mq_broker_fifo_blocked_queues", first)] == 2
    assert 5_000 <= got[("mq_broker_fifo_block_age_ms", first)] < 60_000
    assert got[("mq_broker_fifo_blocked_queues", other)] == 1  # t2 blocked, t3 acked
    assert 9_000 <= got[("mq_broker_fifo_block_age_ms", other)] < 60_000
    assert got[("mq_broker_fifo_order_wait_ms_count", other)] == 1  # t3's block ended on its ack
    assert got[("mq_broker_fifo_order_wait_ms_sum", other)] >= 20_000
