"""The v2 MessagingService hosted on the gateway's server beside mq.gateway.v1: reflection, v1 still working,
QueryRoute's shape, Heartbeat / NotifyClientTermination / the not-yet RPCs, CLIENT_ID_REQUIRED, and the real
``mqgateway`` process of a LocalCluster answering v2."""

from __future__ import annotations

import socket

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.constants import PermName
from mq_common.protocol import BrokerData, QueueData, TopicRouteData
from mq_common.response_code import ResponseCode
from mq_gateway.v2.route import address_scheme, advertised_host, gateway_endpoints, message_queues
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

from tests.v2.conftest import Gateway, metadata, resource

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
Permission = definition_pb2.Permission


async def test_reflection_lists_both_services(gateway: Gateway) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(gateway.channel)  # type: ignore[no-untyped-call]
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    names: set[str] = set()
    async for answer in stub.ServerReflectionInfo(iter([request]), timeout=10):
        names |= {s.name for s in answer.list_services_response.service}
    assert {"apache.rocketmq.v2.MessagingService", "mq.gateway.v1.ProducerGateway"} <= names


async def test_v1_still_sends_on_the_same_port(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v1_beside_v2")
    stub = gateway_pb2_grpc.ProducerGatewayStub(gateway.channel)  # type: ignore[no-untyped-call]
    answer = await stub.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=b"v1")), timeout=10)
    assert answer.result.code == ResponseCode.SUCCESS, answer.result.remark


async def test_query_route_answers_the_gateway_as_broker_endpoint(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v2_route", queues=4)
    endpoints = definition_pb2.Endpoints(
        scheme=definition_pb2.IPv4, addresses=[definition_pb2.Address(host="localhost", port=1)]
    )
    request = service_pb2.QueryRouteRequest(topic=resource(topic), endpoints=endpoints)
    answer = await gateway.stub.QueryRoute(request, metadata=metadata(), timeout=10)
    assert answer.status.code == Code.OK, answer.status.message
    assert [q.id for q in answer.message_queues] == [0, 1, 2, 3]
    for queue in answer.message_queues:
        assert queue.topic.name == topic
        assert queue.permission == Permission.READ_WRITE
        assert queue.broker.id == 0
        assert queue.broker.endpoints.scheme == definition_pb2.DOMAIN_NAME
        assert [(a.host, a.port) for a in queue.broker.endpoints.addresses] == [("localhost", gateway.controller.port)]
        assert list(queue.accept_message_types) == [definition_pb2.NORMAL]  # no message.type: NORMAL
    # no endpoints in the request: the gateway's listen address, IPv4
    bare = await gateway.stub.QueryRoute(service_pb2.QueryRouteRequest(topic=resource(topic)), metadata=metadata())
    queue_endpoints = bare.message_queues[0].broker.endpoints
    assert queue_endpoints.scheme == definition_pb2.IPv4
    assert [(a.host, a.port) for a in queue_endpoints.addresses] == [("127.0.0.1", gateway.controller.port)]


async def test_query_route_refusals(gateway: Gateway) -> None:
    unknown = await gateway.stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=resource("V2NoSuchTopic")), metadata=metadata(), timeout=10
    )
    assert unknown.status.code == Code.TOPIC_NOT_FOUND
    illegal = await gateway.stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=resource("bad topic!")), metadata=metadata(), timeout=10
    )
    assert illegal.status.code == Code.ILLEGAL_TOPIC
    anonymous = await gateway.stub.QueryRoute(service_pb2.QueryRouteRequest(topic=resource("T")), timeout=10)
    assert anonymous.status.code == Code.CLIENT_ID_REQUIRED


def test_queue_order_is_read_only_then_write_only_then_read_write() -> None:
    route = TopicRouteData(
        queue_datas=(
            QueueData("b1", read_queue_nums=4, write_queue_nums=2, perm=PermName.PERM_READ | PermName.PERM_WRITE),
            QueueData("b2", read_queue_nums=2, write_queue_nums=3, perm=PermName.PERM_READ | PermName.PERM_WRITE),
            QueueData("b3", read_queue_nums=2, write_queue_nums=2, perm=PermName.PERM_READ),
            QueueData("b4", read_queue_nums=2, write_queue_nums=2, perm=PermName.PERM_WRITE),
            QueueData("b5", read_queue_nums=2, write_queue_nums=2, perm=6),
        ),
        broker_datas=(
            BrokerData("c", "b1", {0: "h:1"}),
            BrokerData("c", "b2", {0: "h:2"}),
            BrokerData("c", "b3", {0: "h:3"}),
            BrokerData("c", "b4", {0: "h:4"}),
            BrokerData("c", "b5", {1: "h:5"}),  # no master: left out
        ),
    )
    endpoints = gateway_endpoints(definition_pb2.Endpoints(), "gw.example", 8081)
    queues = message_queues(resource("T"), route, endpoints)
    got = [(q.broker.name, q.id, q.permission) for q in queues]
    R, W, RW = Permission.READ, Permission.WRITE, Permission.READ_WRITE
    assert got == [
        ("b1", 0, R), ("b1", 1, R), ("b1", 2, RW), ("b1", 3, RW),
        ("b2", 0, W), ("b2", 1, RW), ("b2", 2, RW),
        ("b3", 0, R), ("b3", 1, R),
        ("b4", 0, W), ("b4", 1, W),
    ]  # fmt: skip
    assert {q.broker.id for q in queues} == {0}
    assert address_scheme("127.0.0.21") == definition_pb2.IPv4
    assert address_scheme("::1") == definition_pb2.IPv6
    assert address_scheme("gw.example") == definition_pb2.DOMAIN_NAME
    assert advertised_host("0.0.0.0") == socket.gethostname()
    assert advertised_host("127.0.0.25") == "127.0.0.25"


async def test_lifecycle_and_not_yet_rpcs(gateway: Gateway) -> None:
    stub, md = gateway.stub, metadata()
    beat = await stub.Heartbeat(service_pb2.HeartbeatRequest(client_type=definition_pb2.PRODUCER), metadata=md)
    assert beat.status.code == Code.OK
    bye = await stub.NotifyClientTermination(service_pb2.NotifyClientTerminationRequest(), metadata=md)
    assert bye.status.code == Code.OK
    end = await stub.EndTransaction(
        service_pb2.EndTransactionRequest(topic=definition_pb2.Resource(name="T"), message_id="x", transaction_id="?"),
        metadata=md,
    )
    assert (end.status.code, end.status.message) == (Code.INVALID_TRANSACTION_ID, "transaction id is invalid")
    recall = await stub.RecallMessage(
        service_pb2.RecallMessageRequest(topic=definition_pb2.Resource(name="T"), recall_handle="h"), metadata=md
    )
    assert (recall.status.code, recall.status.message) == (Code.BAD_REQUEST, "recall handle is invalid")
    lite = await stub.SyncLiteSubscription(service_pb2.SyncLiteSubscriptionRequest(), metadata=md)
    assert lite.status.code == Code.NOT_IMPLEMENTED
    assert lite.status.message


async def test_the_mqgateway_process_serves_v2(cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v2_process")
    async with grpc.aio.insecure_channel(cluster.gateway_addr) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        route = await stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=resource(topic)), metadata=metadata(), timeout=10
        )
        assert route.status.code == Code.OK, route.status.message
        message = definition_pb2.Message(
            topic=resource(topic),
            body=b"from the process",
            system_properties=definition_pb2.SystemProperties(message_id="01AB", message_type=definition_pb2.NORMAL),
        )
        sent = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[message]), metadata=metadata())
        assert sent.status.code == Code.OK, sent.status.message
        assert sent.entries[0].message_id == "01AB"
