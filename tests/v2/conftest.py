"""Fixtures of the v2 (RocketMQ 5 gRPC API) tests: one real local cluster per module (mqnamesrv + one mqbroker +
mqgateway processes on 127.0.0.1) and an in-process GatewayController over it per test, with raw v2 stubs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2_grpc
from mq_client.admin.admin_client import MQAdminClient
from mq_common.auth.metadata import AuthMetadataProvider
from mq_common.errors import MQError
from mq_common.protocol import TopicConfig
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings
from mq_gateway.v2.servicer import ConsumerActivities
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests, unique_topic
from mq_local.topics import ROUTE_WAIT_S, create_topic_on_cluster

# The folder's helper modules (unwired_consumer.py, v2_consumer_testkit.py) import by name (--import-mode=importlib).
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def metadata(client_id: str = "v2-test-client", language: str = "PYTHON") -> tuple[tuple[str, str], ...]:
    """The headers an SDK sends (only x-mq-client-id is required)."""
    return (("x-mq-client-id", client_id), ("x-mq-language", language), ("x-mq-request-id", "req-1"))


def resource(name: str) -> definition_pb2.Resource:
    return definition_pb2.Resource(name=name)


async def make_typed_topic(
    cluster: LocalCluster, hint: str, message_type: str, queues: int = 4, broker: str | None = None
) -> str:
    """A new topic declared ``message.type=<message_type>`` (as ``mqadmin updateTopic -a +message.type=...``) with
    ``queues`` queues on every broker, or only on ``broker`` (a broker name: ``updateTopic -b``); its name once
    routed."""
    name = unique_topic(hint)
    config = TopicConfig(name, queues, queues, attributes={"+message.type": message_type})
    spec = cluster.spec
    if broker is None:
        await create_topic_on_cluster(
            cluster.namesrv_addr, config, spec.cluster_name, tls=spec.tls_client, credentials=spec.admin_credentials
        )
        return name
    async with MQAdminClient([cluster.namesrv_addr], tls=spec.tls_client, credentials=spec.admin_credentials) as admin:
        await admin.update_topic(config, broker_addr=cluster.broker_addrs[broker])
        deadline = time.monotonic() + ROUTE_WAIT_S
        while True:
            with contextlib.suppress(MQError):
                route = await admin.topic_route(name)
                if any(q.broker_name == broker for q in route.queue_datas):
                    return name
            assert time.monotonic() < deadline, f"{name} not routed on {broker}"
            await asyncio.sleep(0.1)


@dataclass
class Gateway:
    """A started in-process gateway, a channel to it and its v2 stub."""

    controller: GatewayController
    channel: grpc.aio.Channel
    stub: service_pb2_grpc.MessagingServiceStub
    namesrv_addr: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(spec_for_tests(tmp_path_factory.mktemp("v2"), broker_groups=1, start_wait_s=60.0)) as c:
        yield c


async def start_auth_gateway(cluster: LocalCluster, provider: AuthMetadataProvider) -> GatewayController:
    """A started in-process gateway with authentication and authorisation on, users and ACLs from ``provider``."""
    settings = GatewaySettings(
        listen_host="127.0.0.1",
        listen_port=0,
        namesrv_addr=cluster.namesrv_addr,
        authentication_enabled=True,
        authorization_enabled=True,
    )
    controller = GatewayController(settings, auth_provider=provider)
    await controller.start()
    return controller


async def start_gateway(cluster: LocalCluster, consumer: ConsumerActivities | None = None, **settings: Any) -> Gateway:
    controller = GatewayController(
        GatewaySettings(listen_host="127.0.0.1", listen_port=0, namesrv_addr=cluster.namesrv_addr, **settings),
        consumer=consumer,
    )
    await controller.start()
    channel = grpc.aio.insecure_channel(controller.addr)
    return Gateway(controller, channel, service_pb2_grpc.MessagingServiceStub(channel), cluster.namesrv_addr)  # type: ignore[no-untyped-call]


@pytest.fixture
async def gateway(cluster: LocalCluster) -> AsyncIterator[Gateway]:
    gw = await start_gateway(cluster)
    try:
        yield gw
    finally:
        await gw.channel.close()
        await gw.controller.stop(0)
