"""The official RocketMQ 5 Node.js SDK with sessionCredentials {accessKey, accessSecret} against a gateway with
authentication and authorisation on (users and ACLs from an in-memory provider): its signed calls (uppercase hex,
UTC date-time) pass, it sends and receives; a wrong secret is refused with UNAUTHORIZED (40100) and stores nothing."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache.rocketmq.v2 import definition_pb2
from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_checks import check_signed_send_and_receive, signed_user_provider
from sdk_testkit import SdkRunner, node_runner, sample_messages, sdk_cluster, stored

from tests.v2.conftest import start_auth_gateway

pytestmark = pytest.mark.integration
SECRET = "node-secret-8Hd"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("node-sdk-auth-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    return node_runner(tmp_path_factory.mktemp("node-sdk-auth-home"))


def provider() -> InMemoryAuthMetadataProvider:
    return signed_user_provider("node-user", SECRET, "node_auth")


async def test_node_sdk_sends_and_receives_with_credentials(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic, group = await make_topic(cluster, "node_auth"), unique_topic("node_auth_group")
    gateway = await start_auth_gateway(cluster, provider())
    try:
        credentials = {"access_key": "node-user", "secret_key": SECRET}
        await asyncio.to_thread(check_signed_send_and_receive, cluster, runner, gateway.addr, topic, group, credentials)
    finally:
        await gateway.stop(0)


async def test_node_sdk_with_a_wrong_secret_is_refused_unauthorized(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic = await make_topic(cluster, "node_auth_wrong")
    gateway = await start_auth_gateway(cluster, provider())
    try:
        cfg = {
            "endpoints": gateway.addr,
            "topic": topic,
            "messages": sample_messages("node-wrong", 1),
            "access_key": "node-user",
            "secret_key": "not-the-secret",
            "request_timeout_s": 3,
        }
        out = await asyncio.to_thread(runner.run, "refused", cfg)
        assert out["refused"] is True, out
        assert (out["name"], out["code"]) == ("UnauthorizedException", definition_pb2.UNAUTHORIZED), out
        assert "not-the-secret" not in out["message"]
        assert await asyncio.to_thread(stored, cluster, topic) == []
    finally:
        await gateway.stop(0)
