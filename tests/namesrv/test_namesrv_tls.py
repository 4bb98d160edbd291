"""The name server with mutual TLS: only a verified component certificate may RegisterBroker/UnregisterBroker.
Regression tests of issue 19's hostile registrations (a stranger taking over a broker's routes, keeping them
gone, or locking the real broker out with state_version 2^63-1), over real TLS handshakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import trustme
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.channels import ChannelPool
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig
from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings

from tests.common.tls_testkit import issue, write_ca, write_pair
from tests.namesrv.test_namesrv_grpc import register_request

REAL = "127.0.0.1:10911"
STRANGER = "127.0.0.66:10911"


class Certs:
    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.directory = directory
        self.ca_file = write_ca(directory, self.ca)
        self.server = write_pair(directory, "namesrv", issue(self.ca, "namesrv.pyrocketmq"))

    def client(self, name: str | None, ca: trustme.CA | None = None) -> TlsClientConfig:
        if name is None:
            return TlsClientConfig(self.ca_file)
        cert_file, key_file = write_pair(self.directory / "clients", name, issue(ca or self.ca, name))
        return TlsClientConfig(self.ca_file, cert_file, key_file)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


async def started(certs: Certs, identities: str) -> NamesrvController:
    settings = NamesrvSettings(
        listen_host="127.0.0.1",
        listen_port=0,
        tls_enabled=True,
        tls_cert_file=certs.server[0],
        tls_key_file=certs.server[1],
        tls_ca_file=certs.ca_file,
        tls_client_auth="require",  # type: ignore[arg-type]
        component_identities=identities,
    )
    controller = NamesrvController(settings)
    await controller.start()
    return controller


@pytest.fixture
async def namesrv(certs: Certs) -> AsyncIterator[NamesrvController]:
    controller = await started(certs, "broker.pyrocketmq")
    try:
        yield controller
    finally:
        await controller.stop(0)


class Peer:
    """A name server client presenting one certificate (or none)."""

    def __init__(self, namesrv: NamesrvController, tls: TlsClientConfig) -> None:
        self.pool = ChannelPool(tls)
        self.stub = namesrv_pb2_grpc.NameServerStub(self.pool.get(namesrv.addr))

    async def register(self, addr: str, state_version: int = 0) -> namesrv_pb2.RegisterBrokerResponse:
        request = register_request(broker_addr=addr)
        request.data_version.state_version = state_version
        return await self.stub.RegisterBroker(request, timeout=10)

    async def unregister(self, addr: str) -> namesrv_pb2.UnregisterBrokerResponse:
        request = namesrv_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_addr=addr, broker_name="broker-a", broker_id=0
        )
        return await self.stub.UnregisterBroker(request, timeout=10)

    async def master_of_topic_a(self) -> str:
        route = await self.stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicA"), timeout=10)
        assert route.code == ResponseCode.SUCCESS, route.remark
        return route.route.broker_datas[0].broker_addrs[0]


@pytest.fixture
async def broker(namesrv: NamesrvController, certs: Certs) -> AsyncIterator[Peer]:
    peer = Peer(namesrv, certs.client("broker.pyrocketmq"))
    assert (await peer.register(REAL)).code == ResponseCode.SUCCESS
    yield peer
    await peer.pool.close()


@pytest.fixture
async def stranger(namesrv: NamesrvController, certs: Certs) -> AsyncIterator[Peer]:
    """Holds a certificate the CA verified, but not a component identity."""
    peer = Peer(namesrv, certs.client("stranger.pyrocketmq"))
    yield peer
    await peer.pool.close()


async def test_a_strangers_register_broker_does_not_take_over_the_routes(broker: Peer, stranger: Peer) -> None:
    refused = await stranger.register(STRANGER)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "RegisterBroker" in refused.remark
    assert "stranger.pyrocketmq" in refused.remark
    assert await stranger.master_of_topic_a() == REAL  # reading routes needs no component identity


async def test_a_strangers_unregister_broker_keeps_the_routes(broker: Peer, stranger: Peer) -> None:
    for _ in range(3):
        assert (await stranger.unregister(REAL)).code == ResponseCode.NO_PERMISSION
    assert await broker.master_of_topic_a() == REAL


async def test_a_strangers_huge_state_version_does_not_lock_the_real_broker_out(broker: Peer, stranger: Peer) -> None:
    assert (await stranger.register(STRANGER, state_version=2**63 - 1)).code == ResponseCode.NO_PERMISSION
    assert (await broker.register(REAL)).code == ResponseCode.SUCCESS
    assert await broker.master_of_topic_a() == REAL


async def test_a_client_without_a_certificate_or_from_another_ca_is_refused_at_the_handshake(
    namesrv: NamesrvController, certs: Certs, broker: Peer
) -> None:
    for tls in (certs.client(None), certs.client("broker.pyrocketmq", ca=trustme.CA())):
        peer = Peer(namesrv, tls)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await peer.register(STRANGER)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await peer.pool.close()
    assert await broker.master_of_topic_a() == REAL


async def test_the_real_broker_unregisters_itself(broker: Peer) -> None:
    assert (await broker.unregister(REAL)).code == ResponseCode.SUCCESS
    route = await broker.stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicA"), timeout=10)
    assert route.code == ResponseCode.TOPIC_NOT_EXIST


async def test_without_component_identities_any_verified_certificate_registers(certs: Certs) -> None:
    controller = await started(certs, "")
    peer = Peer(controller, certs.client("anyone.pyrocketmq"))
    try:
        assert (await peer.register(REAL)).code == ResponseCode.SUCCESS
    finally:
        await peer.pool.close()
        await controller.stop(0)
