"""Fixtures: one session-wide local cluster (real processes on 127.0.0.1) for tests that do not kill it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2_grpc
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Name server, broker-a + broker-b (SYNC_FLUSH, auto-create off), gateway."""
    with LocalCluster(spec_for_tests(tmp_path_factory.mktemp("cluster") / "data")) as started:
        yield started


@pytest.fixture
async def topic(cluster: LocalCluster, request: pytest.FixtureRequest) -> str:
    """A fresh topic with 4 queues on each broker of the session cluster."""
    return await make_topic(cluster, request.node.name)


@pytest.fixture
async def gateway(cluster: LocalCluster) -> AsyncIterator[gateway_pb2_grpc.ProducerGatewayAsyncStub]:
    """A ProducerGateway stub on the session cluster's gateway (channel closed after the test)."""
    async with grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS) as channel:
        yield gateway_pb2_grpc.ProducerGatewayStub(channel)
