"""SendOneway and the topic deny list through a real mqgateway process in front of a real
local cluster (mqnamesrv + two mqbroker on 127.0.0.1); every acked message is read back from its broker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.errors import MQBrokerError
from mq_common.response_code import ResponseCode
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, send_path_env: Mapping[str, str]) -> Iterator[LocalCluster]:
    spec = ClusterSpec(
        common_env=send_path_env,
        data_dir=tmp_path_factory.mktemp("gw-modes"),
        ports=PortLayout.free(2),
        flush_disk_type="ASYNC_FLUSH",
        auto_create_topic_enable=True,
        broker_env={
            "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(8 * 1024 * 1024),
            "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "10000",
        },
        gateway_env={"MQ_GATEWAY_TOPIC_DENY_LIST": "GwDenied*", "MQ_GATEWAY_COALESCE_LINGER_MS": "2"},
        start_wait_s=60.0,
    )
    with LocalCluster(spec) as c:
        yield c


async def test_oneway_messages_are_stored(cluster: LocalCluster, pool: ChannelPool) -> None:
    stub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(cluster.gateway_addr))
    first = await stub.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic="GwOneway", body=b"s")))
    assert first.result.code == ResponseCode.SUCCESS  # creates the topic
    accepted = [
        await stub.SendOneway(
            gateway_pb2.SendOnewayRequest(message=gateway_pb2.Message(topic="GwOneway", body=b"o%d" % i)), timeout=10
        )
        for i in range(20)
    ]
    assert {a.code for a in accepted} == {ResponseCode.SUCCESS}
    broker = BrokerClient(pool)
    wanted = {a.msg_id for a in accepted}
    found: set[str] = set()
    for _ in range(100):
        found = set()
        for addr in cluster.broker_addrs.values():
            for queue_id in range(4):  # defaultTopicQueueNums
                try:
                    pulled = await broker.pull_message(addr, "GwOneway", queue_id, 0, 100)
                except MQBrokerError as exc:  # auto-created on the brokers that got a message; maybe not this one
                    if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                        raise
                    continue
                found.update(m.uniq_key for m in pulled.messages if m.uniq_key)
        if wanted <= found:
            break
        await asyncio.sleep(0.05)
    assert wanted <= found


async def test_denied_topic_gets_no_permission(cluster: LocalCluster, pool: ChannelPool) -> None:
    stub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(cluster.gateway_addr))
    message = gateway_pb2.Message(topic="GwDeniedOrders", body=b"x")
    result = (await stub.Send(gateway_pb2.SendRequest(message=message), timeout=10)).result
    assert result.code == ResponseCode.NO_PERMISSION
    assert result.remark == "Sending message to topic[GwDeniedOrders] is forbidden: the topic is in the deny list"
