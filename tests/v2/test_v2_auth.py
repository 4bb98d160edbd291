"""Authentication and authorisation through a real gateway (both APIs) over a real cluster, users and ACLs from an
in-memory provider: refusals get UNAUTHORIZED 40100 / FORBIDDEN 40300 (v2) or NO_PERMISSION 16 (v1) and store
nothing; allowed users send and receive."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_common.auth.model import Acl, Action, Decision, Policy, PolicyEntry, Resource, User
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, hmac_sha1_hex, sign
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

from tests.v2.conftest import metadata, resource, start_auth_gateway
from tests.v2.test_v2_send_message import v2_message

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
SECRET = "alice-secret-Zq9"
GROUP = "auth_group"
DEADLINE_S = 60.0


def acl(username: str, *entries: tuple[str, tuple[Action, ...], Decision]) -> Acl:
    policy = Policy(entries=tuple(PolicyEntry(Resource.parse(k), frozenset(a), d) for k, a, d in entries))
    return Acl(f"User:{username}", (policy,))


ALLOW = Decision.ALLOW
USERS = (User("alice", SECRET), User("reader", "reader-secret"))
ACLS = (
    acl("alice", ("Topic:auth_*", (Action.PUB, Action.SUB), ALLOW), (f"Group:{GROUP}", (Action.SUB,), ALLOW)),
    acl("reader", ("Topic:auth_*", (Action.SUB,), ALLOW), ("Topic:auth_denied*", (Action.ALL,), Decision.DENY)),
)


class Client:
    """Stubs of both APIs over one channel to the gateway."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.v2 = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        self.v1 = gateway_pb2_grpc.ProducerGatewayStub(channel)  # type: ignore[no-untyped-call]


def signed(username: str, secret: str, now: datetime | None = None) -> tuple[tuple[str, str], ...]:
    return metadata(f"client-{username}") + sign(username, secret, now or datetime.now(UTC))


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[Client]:
    controller = await start_auth_gateway(cluster, InMemoryAuthMetadataProvider(USERS, ACLS))
    channel = grpc.aio.insecure_channel(controller.addr)
    try:
        yield Client(channel)
    finally:
        await channel.close()
        await controller.stop(0)


async def v2_send(client: Client, topic: str, headers: tuple[tuple[str, str], ...]) -> definition_pb2.Status:
    request = service_pb2.SendMessageRequest(messages=[v2_message(topic)])
    answer = await client.v2.SendMessage(request, metadata=headers, timeout=10)
    return answer.status  # type: ignore[no-any-return]


def one_day_old() -> tuple[tuple[str, str], ...]:
    stale = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y%m%dT%H%M%SZ")
    header = f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders={DATE_TIME}, Signature={hmac_sha1_hex(SECRET, stale)}"
    return (*metadata("client-stale"), (DATE_TIME, stale), (AUTHORIZATION, header))


# Headers are made when the case runs: signed at collection time, they would be stale minutes later in a long suite.
REFUSED_V2: dict[str, tuple[Callable[[], tuple[tuple[str, str], ...]], int]] = {
    "no credentials": (metadata, Code.UNAUTHORIZED),
    "wrong signature": (lambda: signed("alice", "not-the-secret"), Code.UNAUTHORIZED),
    "unknown user": (lambda: signed("mallory", SECRET), Code.UNAUTHORIZED),
    "lacking the action": (lambda: signed("reader", "reader-secret"), Code.FORBIDDEN),
    "stale date-time": (one_day_old, Code.UNAUTHORIZED),
}


@pytest.mark.parametrize("case", list(REFUSED_V2))
async def test_v2_refusals_store_nothing(client: Client, cluster: LocalCluster, case: str) -> None:
    topic = await make_topic(cluster, "auth_v2_refused")
    make_headers, code = REFUSED_V2[case]
    headers = make_headers()
    status = await v2_send(client, topic, headers)
    assert status.code == code, status.message
    assert SECRET not in status.message
    assert "reader-secret" not in status.message
    if code == Code.FORBIDDEN:
        assert f"Topic:{topic}" in status.message
        assert "Pub" in status.message
    assert await read_all(cluster.namesrv_addr, topic) == []


async def test_v1_refusals_store_nothing(client: Client, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "auth_v1_refused")
    message = gateway_pb2.Message(topic=topic, body=b"x")
    for headers in (metadata(), signed("alice", "wrong"), signed("reader", "reader-secret")):
        send = await client.v1.Send(gateway_pb2.SendRequest(message=message), metadata=headers, timeout=10)
        assert send.result.code == ResponseCode.NO_PERMISSION, send.result.remark
        batch = await client.v1.SendBatch(
            gateway_pb2.SendBatchRequest(messages=[message, message]), metadata=headers, timeout=10
        )
        assert [r.code for r in batch.results] == [ResponseCode.NO_PERMISSION] * 2
        oneway = await client.v1.SendOneway(
            gateway_pb2.SendOnewayRequest(message=message), metadata=headers, timeout=10
        )
        assert oneway.code == ResponseCode.NO_PERMISSION
        assert SECRET not in send.result.remark + oneway.remark
    assert await read_all(cluster.namesrv_addr, topic) == []


async def test_v1_allowed_user_sends(client: Client, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "auth_v1_allowed")
    message = gateway_pb2.Message(topic=topic, body=b"x")
    headers = signed("alice", SECRET)
    send = await client.v1.Send(gateway_pb2.SendRequest(message=message), metadata=headers, timeout=10)
    assert send.result.code == ResponseCode.SUCCESS, send.result.remark
    batch = await client.v1.SendBatch(
        gateway_pb2.SendBatchRequest(messages=[message] * 3), metadata=headers, timeout=10
    )
    assert [r.code for r in batch.results] == [ResponseCode.SUCCESS] * 3
    assert len(await read_all(cluster.namesrv_addr, topic)) == 4


async def receive_all(client: Client, topic: str, headers: tuple[tuple[str, str], ...]) -> list[definition_pb2.Status]:
    request = service_pb2.ReceiveMessageRequest(
        group=resource(GROUP),
        message_queue=definition_pb2.MessageQueue(topic=resource(topic), id=-1),
        filter_expression=definition_pb2.FilterExpression(type=definition_pb2.FilterType.TAG, expression="*"),
        batch_size=16,
        auto_renew=True,
    )
    request.long_polling_timeout.FromMilliseconds(1_000)
    statuses: list[definition_pb2.Status] = []
    async for response in client.v2.ReceiveMessage(request, metadata=headers, timeout=20):
        if response.HasField("status"):
            statuses.append(response.status)
        if response.HasField("message"):
            statuses.append(definition_pb2.Status(code=Code.OK, message=response.message.body.decode()))
    return statuses


async def test_v2_allowed_user_sends_and_receives(client: Client, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "auth_v2_allowed")
    route = await client.v2.QueryRoute(
        service_pb2.QueryRouteRequest(topic=resource(topic)), metadata=signed("reader", "reader-secret"), timeout=10
    )
    assert route.status.code == Code.OK, route.status.message  # Sub is enough to read a route
    status = await v2_send(client, topic, signed("alice", SECRET))
    assert status.code == Code.OK, status.message
    denied = await receive_all(client, topic, signed("reader", "reader-secret"))  # no Sub on the group
    assert [s.code for s in denied] == [Code.FORBIDDEN]
    assert f"Group:{GROUP}" in denied[0].message
    bodies: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    while not bodies and time.monotonic() < deadline:
        bodies = [s.message for s in (await receive_all(client, topic, signed("alice", SECRET)))[1:]]
    assert bodies == ["body"]


async def test_telemetry_without_credentials_is_unauthenticated(client: Client) -> None:
    async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
        yield service_pb2.TelemetryCommand()

    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in client.v2.Telemetry(commands(), metadata=metadata(), timeout=10):
            pass
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
