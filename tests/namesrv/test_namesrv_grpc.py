"""The name server over gRPC, in-process on 127.0.0.1:0, plus the ``mqnamesrv`` console script."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import grpc
import pytest
from grpc_health.v1 import health_pb2
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.response_code import ResponseCode
from mq_namesrv.controller import NamesrvController
from mq_namesrv.grpc_api import NameServerServicer
from mq_namesrv.route_info_manager import RouteInfoManager
from mq_namesrv.settings import NamesrvSettings


@pytest.fixture
async def controller() -> AsyncIterator[NamesrvController]:
    ctl = NamesrvController(
        NamesrvSettings(listen_host="127.0.0.1", listen_port=0, scan_not_active_broker_interval_ms=50)
    )
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.stop(0)


@pytest.fixture
async def channel(controller: NamesrvController) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(controller.addr) as ch:
        yield ch


def register_request(
    broker_name: str = "broker-a", broker_addr: str = "127.0.0.1:10911", heartbeat_timeout_ms: int = 0
) -> namesrv_pb2.RegisterBrokerRequest:
    return namesrv_pb2.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name=broker_name,
        broker_id=0,
        broker_addr=broker_addr,
        topic_config_table={
            "TopicA": common_pb2.TopicConfig(topic_name="TopicA", read_queue_nums=4, write_queue_nums=2, perm=6),
        },
        data_version=common_pb2.DataVersion(state_version=0, timestamp_ms=1, counter=1),
        heartbeat_timeout_ms=heartbeat_timeout_ms,
    )


async def test_register_route_cluster_topics_unregister(channel: grpc.aio.Channel) -> None:
    stub = namesrv_pb2_grpc.NameServerStub(channel)
    assert (await stub.RegisterBroker(register_request(), timeout=5)).code == ResponseCode.SUCCESS
    assert (await stub.RegisterBroker(register_request("broker-b", "127.0.0.1:10921"), timeout=5)).code == 0

    route = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicA"), timeout=5)
    assert route.code == ResponseCode.SUCCESS
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.route.queue_datas] == [
        ("broker-a", 4, 2, 6),
        ("broker-b", 4, 2, 6),
    ]
    assert dict(route.route.broker_datas[0].broker_addrs) == {0: "127.0.0.1:10911"}

    info = await stub.GetBrokerClusterInfo(namesrv_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert sorted(info.cluster_addr_table["DefaultCluster"].broker_names) == ["broker-a", "broker-b"]
    live = info.broker_live_table["127.0.0.1:10911"]
    assert live.heartbeat_timeout_ms == 120_000
    assert live.last_update_timestamp_ms > 0
    assert live.data_version.counter == 1

    topics = await stub.GetAllTopicList(namesrv_pb2.GetAllTopicListRequest(), timeout=5)
    assert list(topics.topic_list) == ["TopicA"]

    for name, addr in (("broker-a", "127.0.0.1:10911"), ("broker-b", "127.0.0.1:10921")):
        unreg = namesrv_pb2.UnregisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name=name, broker_id=0, broker_addr=addr
        )
        assert (await stub.UnregisterBroker(unreg, timeout=5)).code == ResponseCode.SUCCESS
    gone = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicA"), timeout=5)
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    assert gone.remark == "No topic route info in name server for the topic: TopicA"


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        (register_request(broker_name=""), "brokerName is blank"),
        (register_request(broker_addr=""), "host:port"),
        (register_request(broker_addr="no-port"), "host:port"),
        (register_request(broker_addr="127.0.0.1:99999"), "out of range"),
        (register_request(heartbeat_timeout_ms=-1), "heartbeatTimeoutMillis"),
    ],
)
async def test_bad_registration_gets_invalid_parameter(
    channel: grpc.aio.Channel, request_: namesrv_pb2.RegisterBrokerRequest, fragment: str
) -> None:
    stub = namesrv_pb2_grpc.NameServerStub(channel)
    resp = await stub.RegisterBroker(request_, timeout=5)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert fragment in resp.remark
    topics = await stub.GetAllTopicList(namesrv_pb2.GetAllTopicListRequest(), timeout=5)
    assert list(topics.topic_list) == []


async def test_bad_unregister_and_blank_topic_get_invalid_parameter(channel: grpc.aio.Channel) -> None:
    stub = namesrv_pb2_grpc.NameServerStub(channel)
    unreg = await stub.UnregisterBroker(
        namesrv_pb2.UnregisterBrokerRequest(cluster_name="c", broker_name=""), timeout=5
    )
    assert unreg.code == ResponseCode.INVALID_PARAMETER
    blank = await stub.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic=" "), timeout=5)
    assert (blank.code, blank.remark) == (ResponseCode.INVALID_PARAMETER, "topic is blank")
    # The server keeps serving after refusing requests.
    assert (await stub.RegisterBroker(register_request(), timeout=5)).code == ResponseCode.SUCCESS


async def test_health_is_serving(controller: NamesrvController, channel: grpc.aio.Channel) -> None:
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    for service in ("", "mq.namesrv.v1.NameServer"):
        resp = await check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_expired_broker_is_removed_by_the_periodic_scan(channel: grpc.aio.Channel) -> None:
    stub = namesrv_pb2_grpc.NameServerStub(channel)
    await stub.RegisterBroker(register_request(heartbeat_timeout_ms=1), timeout=5)
    request = namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicA")
    code: int = ResponseCode.SUCCESS
    for _ in range(100):  # bounded: at most ~5 s
        code = (await stub.GetRouteInfoByTopic(request, timeout=5)).code
        if code == ResponseCode.TOPIC_NOT_EXIST:
            break
        await asyncio.sleep(0.05)
    assert code == ResponseCode.TOPIC_NOT_EXIST
    info = await stub.GetBrokerClusterInfo(namesrv_pb2.GetBrokerClusterInfoRequest(), timeout=5)
    assert dict(info.broker_live_table) == {}


def test_mqnamesrv_logs_started_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("mqnamesrv")
    config = tmp_path / "namesrv.yaml"
    config.write_text("listen_port: 0\nscan_not_active_broker_interval_ms: 1000\n", encoding="utf-8")
    env = {**os.environ, "MQ_NAMESRV_CONFIG_FILE": str(config), "MQ_NAMESRV_LISTEN_HOST": "127.0.0.1"}
    proc = subprocess.Popen([str(script)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        started = None
        for _ in range(50):  # bounded number of lines
            line = proc.stderr.readline()
            if not line:
                break
            event = json.loads(line)
            if event.get("event") == "started":
                started = event
                break
        assert started is not None
        assert started["port"] > 0
        assert started["scan_not_active_broker_interval_ms"] == 1000
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        if proc.stderr is not None:
            proc.stderr.close()


def test_mqnamesrv_refuses_invalid_settings() -> None:
    script = Path(sys.executable).with_name("mqnamesrv")
    env = {**os.environ, "MQ_NAMESRV_LISTEN_PORT": "-3"}
    result = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert "listen_port" in result.stderr


class ExplodingManager(RouteInfoManager):
    def get_all_topic_list(self) -> list[str]:
        raise RuntimeError("boom")


async def test_unexpected_failure_becomes_system_error_not_a_crash() -> None:
    servicer = NameServerServicer(ExplodingManager())
    context = cast("grpc.aio.ServicerContext[object, object]", None)
    resp = await servicer.GetAllTopicList(namesrv_pb2.GetAllTopicListRequest(), context)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "GetAllTopicList failed on an internal error; the service logged the cause"
