"""A real TLS cluster (``mqlocal up --tls``'s processes: name server and broker with mutual TLS, gateway with TLS
and no client certificate): v1 and v2 clients send and receive over TLS, plaintext clients are refused, mqadmin
works with --tls, and a fake broker without the component certificate cannot register."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_client.admin.cli import app
from mq_common.channels import ChannelPool
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig
from mq_local.cluster import LocalCluster
from mq_local.readiness import health_status
from mq_local.testing import make_topic, read_all, spec_for_tests
from typer.testing import CliRunner

pytestmark = pytest.mark.integration
V2_META = (("x-mq-client-id", "tls-test-client"), ("x-mq-language", "PYTHON"))
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("tls-cluster") / "data", 1, tls=True, auto_create_topic_enable=False)
    with LocalCluster(spec) as cluster:
        yield cluster


def files(cluster: LocalCluster) -> Path:
    tls_files = cluster.spec.tls_files
    assert tls_files is not None
    return tls_files.directory


def external_client(cluster: LocalCluster) -> TlsClientConfig:
    """What an application needs for the gateway: the CA only (no client certificate)."""
    return TlsClientConfig(ca_file=files(cluster) / "ca.pem")


@pytest.fixture
async def gateway_pool(tls_cluster: LocalCluster) -> AsyncIterator[ChannelPool]:
    pool = ChannelPool(external_client(tls_cluster))
    yield pool
    await pool.close()


async def test_v1_send_over_tls_is_stored(tls_cluster: LocalCluster, gateway_pool: ChannelPool) -> None:
    topic = await make_topic(tls_cluster, "tls_v1")
    stub = gateway_pb2_grpc.ProducerGatewayStub(gateway_pool.get(tls_cluster.gateway_addr))
    sent = await stub.Send(
        gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=b"v1 tls")), timeout=30
    )
    assert sent.result.code == ResponseCode.SUCCESS, sent.result.remark
    stored = await read_all(tls_cluster.namesrv_addr, topic, tls=tls_cluster.spec.tls_client)
    assert [m.body for _, m in stored] == [b"v1 tls"]


async def test_v2_send_and_receive_over_tls(tls_cluster: LocalCluster, gateway_pool: ChannelPool) -> None:
    topic = await make_topic(tls_cluster, "tls_v2", queues=1)
    stub = service_pb2_grpc.MessagingServiceStub(gateway_pool.get(tls_cluster.gateway_addr))  # type: ignore[no-untyped-call]
    message = definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic),
        body=b"v2 tls",
        system_properties=definition_pb2.SystemProperties(message_id="01TLS", message_type=definition_pb2.NORMAL),
    )
    sent = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[message]), metadata=V2_META, timeout=30)
    assert sent.status.code == definition_pb2.Code.OK, sent.status.message
    assert await receive_bodies(stub, topic) == [b"v2 tls"]


async def receive_bodies(stub: service_pb2_grpc.MessagingServiceStub, topic: str) -> list[bytes]:
    request = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name="tls_v2_group"),
        message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=-1),
        filter_expression=definition_pb2.FilterExpression(type=definition_pb2.FilterType.TAG, expression="*"),
        batch_size=8,
    )
    request.invisible_duration.FromMilliseconds(60_000)
    request.long_polling_timeout.FromMilliseconds(2_000)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        bodies = [
            r.message.body
            async for r in stub.ReceiveMessage(request, metadata=V2_META, timeout=30)
            if r.WhichOneof("content") == "message"
        ]
        if bodies:
            return bodies
    return []


async def test_plaintext_clients_are_refused(tls_cluster: LocalCluster) -> None:
    pool = ChannelPool()
    try:
        stub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(tls_cluster.gateway_addr))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="t", body=b"x")), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await pool.close()
    for addr in (tls_cluster.namesrv_addr, *tls_cluster.broker_addrs.values()):
        assert health_status(addr) == "UNREACHABLE"
        # The CA alone is not enough where mutual TLS is required.
        assert health_status(addr, tls=external_client(tls_cluster)) == "UNREACHABLE"
        assert health_status(addr, tls=tls_cluster.spec.tls_client) == "SERVING"


async def test_a_fake_broker_without_the_component_certificate_cannot_register(tls_cluster: LocalCluster) -> None:
    topic = await make_topic(tls_cluster, "tls_fake_broker")
    real = tls_cluster.broker_addrs["broker-a"]
    fake = namesrv_pb2.RegisterBrokerRequest(
        cluster_name=tls_cluster.spec.cluster_name,
        broker_name="broker-a",
        broker_id=0,
        broker_addr="127.0.0.66:10911",
        topic_config_table={topic: common_pb2.TopicConfig(topic_name=topic, read_queue_nums=1, write_queue_nums=1)},
        data_version=common_pb2.DataVersion(state_version=2**63 - 1, timestamp_ms=1, counter=1),
    )
    pool = ChannelPool(tls_cluster.spec.tls_client)  # the admin certificate: verified, but not a broker
    try:
        stub = namesrv_pb2_grpc.NameServerStub(pool.get(tls_cluster.namesrv_addr))
        refused = await stub.RegisterBroker(fake, timeout=10)
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
        unregister = namesrv_pb2.UnregisterBrokerRequest(
            cluster_name=tls_cluster.spec.cluster_name, broker_addr=real, broker_name="broker-a", broker_id=0
        )
        assert (await stub.UnregisterBroker(unregister, timeout=10)).code == ResponseCode.NO_PERMISSION
        route = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic), timeout=10)
        assert dict(route.route.broker_datas[0].broker_addrs) == {0: real}
    finally:
        await pool.close()


def test_mqadmin_over_tls(tls_cluster: LocalCluster) -> None:
    directory = files(tls_cluster)
    base = ["-n", tls_cluster.namesrv_addr]
    tls_args = [
        "--tls",
        "--tls-ca-file",
        str(directory / "ca.pem"),
        "--tls-cert-file",
        str(directory / "admin.pem"),
        "--tls-key-file",
        str(directory / "admin-key.pem"),
    ]
    env = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}
    listed = CliRunner().invoke(app, [*base, *tls_args, "clusterList"], env=env)
    assert listed.exit_code == 0, listed.output
    assert "broker-a" in listed.stdout
    plaintext = CliRunner().invoke(app, [*base, "clusterList"], env=env)
    assert plaintext.exit_code == 1, plaintext.output
    by_env = CliRunner().invoke(
        app,
        [*base, "clusterList"],
        env={
            **env,
            "MQ_ADMIN_TLS_ENABLED": "true",
            "MQ_ADMIN_TLS_CA_FILE": tls_args[2],
            "MQ_ADMIN_TLS_CERT_FILE": tls_args[4],
            "MQ_ADMIN_TLS_KEY_FILE": tls_args[6],
        },
    )
    assert by_env.exit_code == 0, by_env.output
