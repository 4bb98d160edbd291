"""mq_gateway.auth without a server: the check's outcomes, the decision cache following ACL changes, the v2
per-RPC permissions, bounded metric labels and the broker-backed provider's failover."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.auth.authentication import signed_headers
from mq_common.auth.metadata import CachingAuthMetadataProvider, InMemoryAuthMetadataProvider
from mq_common.auth.model import Acl, Action, Decision, Policy, PolicyEntry, Resource, User
from mq_common.auth.settings import AuthSettings
from mq_common.auth.signature import AuthFailure, sign
from mq_common.errors import MQError
from mq_common.metrics import NodeIdentity
from mq_common.response_code import ResponseCode
from mq_gateway.auth import AuthRefusal, BrokerAuthMetadataProvider, GatewayAuth, peer_ip
from mq_gateway.auth_metrics import ANONYMOUS, UNKNOWN_USER, AuthMetrics
from mq_gateway.metrics import GatewayMetrics
from mq_gateway.v2.permissions import permissions_of

PEER = "ipv4:127.0.0.7:50000"
ORDERS_PUB = (Resource.of_topic("orders"), Action.PUB)


def allow(username: str, key: str, *actions: Action, decision: Decision = Decision.ALLOW) -> Acl:
    entry = PolicyEntry(Resource.parse(key), frozenset(actions), decision)
    return Acl(f"User:{username}", (Policy(entries=(entry,)),))


def new_auth(provider: InMemoryAuthMetadataProvider, **flags: bool) -> GatewayAuth:
    settings = AuthSettings(**({"authentication_enabled": True, "authorization_enabled": True} | flags))
    return GatewayAuth(settings, provider)


def headers(username: str, secret: str) -> tuple[tuple[str, str], ...]:
    return sign(username, secret, datetime.now(UTC))


async def check(auth: GatewayAuth, username: str, secret: str, *permissions: tuple[Resource, Action]) -> User | None:
    header, date_time = signed_headers(headers(username, secret))
    return await auth.check(header, date_time, f"client-{username}", PEER, permissions)


async def test_allowed_forbidden_and_unauthenticated() -> None:
    provider = InMemoryAuthMetadataProvider((User("alice", "pw"),), (allow("alice", "Topic:ord*", Action.PUB),))
    auth = new_auth(provider)
    assert await check(auth, "alice", "pw", ORDERS_PUB) == User("alice", "pw")
    with pytest.raises(AuthRefusal) as forbidden:
        await check(auth, "alice", "pw", (Resource.of_topic("payments"), Action.PUB))
    assert not forbidden.value.unauthenticated
    assert "Topic:payments" in forbidden.value.remark
    with pytest.raises(AuthRefusal) as unauthenticated:
        await check(auth, "alice", "wrong", ORDERS_PUB)
    assert unauthenticated.value.unauthenticated


async def test_a_changed_acl_takes_effect_after_the_cache_refresh() -> None:
    provider = InMemoryAuthMetadataProvider((User("alice", "pw"),), (allow("alice", "Topic:orders", Action.PUB),))
    clock = [0.0]
    cached = CachingAuthMetadataProvider(provider, refresh_ms=1_000, max_entries=10, now_ms=lambda: clock[0])
    auth = GatewayAuth(AuthSettings(authentication_enabled=True, authorization_enabled=True), cached)
    await check(auth, "alice", "pw", ORDERS_PUB)
    provider.acls["User:alice"] = allow("alice", "Topic:orders", Action.PUB, decision=Decision.DENY)
    await check(auth, "alice", "pw", ORDERS_PUB)  # the cached ACL and decision still hold
    clock[0] = 1_000.0
    with pytest.raises(AuthRefusal):
        await check(auth, "alice", "pw", ORDERS_PUB)


async def test_authorisation_alone_trusts_the_claimed_access_key() -> None:
    provider = InMemoryAuthMetadataProvider((User("alice", "pw"),), (allow("alice", "Topic:orders", Action.PUB),))
    auth = new_auth(provider, authentication_enabled=False)
    assert await check(auth, "alice", "not-checked", ORDERS_PUB) is not None
    with pytest.raises(AuthRefusal) as missing:
        await auth.check(None, "", "c", PEER, [ORDERS_PUB])
    assert missing.value.unauthenticated


async def test_both_flags_off_checks_nothing() -> None:
    auth = new_auth(InMemoryAuthMetadataProvider(), authentication_enabled=False, authorization_enabled=False)
    assert not auth.enabled
    assert await auth.check(None, "", "c", PEER, [ORDERS_PUB]) is None


async def test_v1_refusals_are_no_permission() -> None:
    auth = new_auth(InMemoryAuthMetadataProvider((User("alice", "pw"),)))
    refused = await auth.refuse_send(headers("alice", "pw"), PEER, ["orders", "orders"])
    assert refused is not None
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "Topic:orders" in refused.remark


@pytest.mark.parametrize(
    ("peer", "ip"),
    [("ipv4:127.0.0.7:5000", "127.0.0.7"), ("ipv6:[::1]:5000", "::1"), ("unix:/tmp/s", None), ("", None)],
)
def test_peer_ip(peer: str, ip: str | None) -> None:
    assert peer_ip(peer) == ip


def names(request: object) -> list[tuple[str, str]]:
    return [(r.key, a.value) for r, a in permissions_of(request)]


def test_v2_permissions_per_rpc() -> None:
    topic, group = definition_pb2.Resource(name="orders"), definition_pb2.Resource(name="billing")
    queue = definition_pb2.MessageQueue(topic=topic)
    messages = [definition_pb2.Message(topic=topic), definition_pb2.Message(topic=definition_pb2.Resource(name="b"))]
    assert names(service_pb2.SendMessageRequest(messages=messages)) == [("Topic:orders", "Pub"), ("Topic:b", "Pub")]
    assert names(service_pb2.QueryRouteRequest(topic=topic)) == [("Topic:orders", "Any")]
    sub = [("Group:billing", "Sub"), ("Topic:orders", "Sub")]
    assert names(service_pb2.ReceiveMessageRequest(group=group, message_queue=queue)) == sub
    assert names(service_pb2.AckMessageRequest(group=group, topic=topic)) == sub
    assert names(service_pb2.PullMessageRequest(group=group, message_queue=queue)) == sub
    assert names(service_pb2.EndTransactionRequest(topic=topic)) == [("Topic:orders", "Pub")]
    producer = service_pb2.HeartbeatRequest(client_type=definition_pb2.PRODUCER)
    consumer = service_pb2.HeartbeatRequest(group=group, client_type=definition_pb2.SIMPLE_CONSUMER)
    assert names(producer) == []
    assert names(consumer) == [("Group:billing", "Sub")]
    assert names(service_pb2.NotifyClientTerminationRequest()) == []
    assert names(None) == []


def test_metric_user_labels_are_bounded() -> None:
    metrics = GatewayMetrics(NodeIdentity("c1", "proxy", "gw"), max_topics=4)
    observed = AuthMetrics(metrics, max_users=1)
    observed.on_failure(AuthFailure.BAD_SIGNATURE, "alice")
    observed.on_failure(AuthFailure.BAD_SIGNATURE, "bob")
    observed.on_failure(AuthFailure.UNKNOWN_USER, "random-ak-1")
    observed.on_failure(AuthFailure.NO_CREDENTIALS, "")
    observed.on_denial("alice", ORDERS_PUB)
    text = metrics.exposition().decode()
    node = 'cluster="c1",node_id="gw",node_type="proxy"'
    assert f'mq_gateway_auth_failures_total{{{node},reason="bad_signature",user="alice"}} 1.0' in text
    assert f'mq_gateway_auth_failures_total{{{node},reason="bad_signature",user="_other"}} 1.0' in text
    assert f'mq_gateway_auth_failures_total{{{node},reason="unknown_user",user="{UNKNOWN_USER}"}} 1.0' in text
    assert f'mq_gateway_auth_failures_total{{{node},reason="no_credentials",user="{ANONYMOUS}"}} 1.0' in text
    assert "random-ak-1" not in text
    assert f'mq_gateway_auth_denials_total{{action="Pub",{node},resource_type="Topic",user="alice"}} 1.0' in text


class Calls:
    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.asked: list[str] = []

    async def get_user(self, broker_addr: str, username: str, timeout_ms: int = 0) -> User | None:
        self.asked.append(broker_addr)
        if broker_addr in self.failing:
            raise MQError("down", ResponseCode.SYSTEM_ERROR)
        return User(username, "pw")

    async def get_acl(self, broker_addr: str, subject: str, timeout_ms: int = 0) -> Acl | None:
        raise MQError("The subject is not exist.", ResponseCode.NO_PERMISSION)


async def test_broker_provider_fails_over_and_reads_a_missing_subject_as_no_acl() -> None:
    calls = Calls({"127.0.0.1:1"})

    async def masters() -> list[str]:
        return ["127.0.0.1:1", "127.0.0.1:2"]

    provider = BrokerAuthMetadataProvider(calls, masters, 1_000)
    assert await provider.get_user("alice") == User("alice", "pw")
    assert calls.asked == ["127.0.0.1:1", "127.0.0.1:2"]
    assert await provider.get_acl("User:alice") is None
    calls.failing.add("127.0.0.1:2")
    with pytest.raises(MQError, match="down"):
        await provider.get_user("alice")
