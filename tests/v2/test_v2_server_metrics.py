"""v2 RPCs land in the gateway's rocketmq_rpc_latency with protocol_type="grpc_v2", the v2 code name and the
client's language (unknown languages as OTHER); v1 calls keep protocol_type="grpc"."""

from __future__ import annotations

import pytest
from apache.rocketmq.v2 import service_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import make_topic
from prometheus_client.parser import text_string_to_metric_families

from tests.v2.conftest import metadata, resource, start_gateway

pytestmark = pytest.mark.integration


async def test_v2_calls_are_observed_with_their_language(cluster: LocalCluster) -> None:
    gateway = await start_gateway(cluster, metrics_port=free_port())
    try:
        topic = await make_topic(cluster, "v2_metrics")
        route = service_pb2.QueryRouteRequest(topic=resource(topic))
        await gateway.stub.QueryRoute(route, metadata=metadata(language="PYTHON"), timeout=10)
        await gateway.stub.Heartbeat(service_pb2.HeartbeatRequest(), metadata=metadata(language="KLINGON"))
        await gateway.stub.Heartbeat(service_pb2.HeartbeatRequest())  # no client id: CLIENT_ID_REQUIRED
        v1 = gateway_pb2_grpc.ProducerGatewayStub(gateway.channel)  # type: ignore[no-untyped-call]
        await v1.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=b"x")), timeout=10)
        metrics = gateway.controller.metrics
        assert metrics is not None
        text = metrics.exposition().decode()
    finally:
        await gateway.channel.close()
        await gateway.controller.stop(0)

    counts = {
        (
            sample.labels["protocol_type"],
            sample.labels["method"],
            sample.labels["response_code"],
            sample.labels["language"],
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "rocketmq_rpc_latency_count"
    }
    assert counts[("grpc_v2", "QueryRoute", "OK", "PYTHON")] == 1
    assert counts[("grpc_v2", "Heartbeat", "OK", "OTHER")] == 1  # KLINGON is no LanguageCode
    assert counts[("grpc_v2", "Heartbeat", "CLIENT_ID_REQUIRED", "OTHER")] == 1
    assert counts[("grpc", "Send", "SUCCESS", "OTHER")] == 1
