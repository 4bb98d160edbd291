"""DeleteTopicInNamesrv over gRPC (in-process name servers on 127.0.0.1:0) and NameServerClient's
delete_topic_in_namesrv, which asks every name server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.channels import ChannelPool
from mq_common.errors import MQError, RemotingError, TopicNotExistError
from mq_common.namesrv_client import NameServerClient
from mq_common.response_code import ResponseCode
from mq_namesrv.controller import NamesrvController
from mq_namesrv.settings import NamesrvSettings

TOPIC = "TopicA"


@pytest.fixture
async def namesrvs() -> AsyncIterator[list[NamesrvController]]:
    controllers = [NamesrvController(NamesrvSettings(listen_host="127.0.0.1", listen_port=0)) for _ in range(2)]
    try:
        for ctl in controllers:
            await ctl.start()
        yield controllers
    finally:
        for ctl in controllers:
            await ctl.stop(0)


def register_request(cluster: str, broker_name: str, broker_addr: str) -> namesrv_pb2.RegisterBrokerRequest:
    return namesrv_pb2.RegisterBrokerRequest(
        cluster_name=cluster,
        broker_name=broker_name,
        broker_id=0,
        broker_addr=broker_addr,
        topic_config_table={TOPIC: common_pb2.TopicConfig(topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4)},
        data_version=common_pb2.DataVersion(state_version=0, timestamp_ms=1, counter=1),
    )


async def register_two_clusters(pool: ChannelPool, addr: str) -> namesrv_pb2_grpc.NameServerAsyncStub:
    stub: namesrv_pb2_grpc.NameServerAsyncStub = namesrv_pb2_grpc.NameServerStub(pool.get(addr))
    for request in (
        register_request("DefaultCluster", "broker-a", "127.0.0.1:10911"),
        register_request("Other", "broker-b", "127.0.0.1:10921"),
    ):
        assert (await stub.RegisterBroker(request, timeout=5)).code == ResponseCode.SUCCESS
    return stub


async def queue_brokers(stub: namesrv_pb2_grpc.NameServerAsyncStub) -> list[str] | int:
    """The broker names of TOPIC's QueueData, or the response code when there is no route."""
    resp = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic=TOPIC), timeout=5)
    return [q.broker_name for q in resp.route.queue_datas] if resp.code == ResponseCode.SUCCESS else resp.code


async def test_delete_topic_by_cluster_then_whole(namesrvs: list[NamesrvController], pool: ChannelPool) -> None:
    stub = await register_two_clusters(pool, namesrvs[0].addr)
    delete = namesrv_pb2.DeleteTopicInNamesrvRequest

    resp = await stub.DeleteTopicInNamesrv(delete(topic=TOPIC, cluster_name="DefaultCluster"), timeout=5)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "")
    assert await queue_brokers(stub) == ["broker-b"]

    assert (await stub.DeleteTopicInNamesrv(delete(topic=TOPIC), timeout=5)).code == ResponseCode.SUCCESS
    assert await queue_brokers(stub) == ResponseCode.TOPIC_NOT_EXIST
    # Unknown topic (now) and unknown cluster: SUCCESS, as RocketMQ.
    assert (await stub.DeleteTopicInNamesrv(delete(topic=TOPIC), timeout=5)).code == ResponseCode.SUCCESS
    unknown_cluster = delete(topic="Nope", cluster_name="NoSuchCluster")
    assert (await stub.DeleteTopicInNamesrv(unknown_cluster, timeout=5)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("topic", "cluster", "remark"),
    [
        ("", "", "The specified topic is blank."),
        (
            "bad topic",
            "",
            "The specified topic: bad topic, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        (TOPIC, "bad\tcluster", "clusterName contains whitespace or control characters: 'bad\\tcluster'"),
    ],
)
async def test_bad_delete_gets_invalid_parameter(
    namesrvs: list[NamesrvController], pool: ChannelPool, topic: str, cluster: str, remark: str
) -> None:
    stub = await register_two_clusters(pool, namesrvs[0].addr)
    request = namesrv_pb2.DeleteTopicInNamesrvRequest(topic=topic, cluster_name=cluster)
    resp = await stub.DeleteTopicInNamesrv(request, timeout=5)
    assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, remark)
    assert await queue_brokers(stub) == ["broker-a", "broker-b"]


async def test_client_deletes_on_every_name_server(namesrvs: list[NamesrvController], pool: ChannelPool) -> None:
    addrs = [ctl.addr for ctl in namesrvs]
    stubs = [await register_two_clusters(pool, addr) for addr in addrs]
    client = NameServerClient(addrs, pool)

    assert await client.delete_topic_in_namesrv(TOPIC, "Other", timeout_ms=5000) == tuple(addrs)
    assert [await queue_brokers(stub) for stub in stubs] == [["broker-a"], ["broker-a"]]
    await client.delete_topic_in_namesrv(TOPIC, timeout_ms=5000)
    assert [await queue_brokers(stub) for stub in stubs] == [ResponseCode.TOPIC_NOT_EXIST] * 2
    with pytest.raises(TopicNotExistError):
        await client.get_route_info_by_topic(TOPIC, timeout_ms=5000)

    with pytest.raises(MQError) as info:
        await client.delete_topic_in_namesrv("bad topic", timeout_ms=5000)
    assert info.value.code == ResponseCode.INVALID_PARAMETER


async def test_client_asks_the_live_name_servers_when_one_is_down(
    namesrvs: list[NamesrvController], pool: ChannelPool
) -> None:
    live = namesrvs[0].addr
    stub = await register_two_clusters(pool, live)
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    client = NameServerClient([dead, live], pool)

    with pytest.raises(RemotingError):
        await client.delete_topic_in_namesrv(TOPIC, timeout_ms=5000)
    assert await queue_brokers(stub) == ResponseCode.TOPIC_NOT_EXIST
