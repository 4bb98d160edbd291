"""The official RocketMQ 5 Python SDK with SessionCredentials against a gateway with authentication and
authorisation on (users and ACLs from an in-memory provider): its signed calls pass, it sends and receives."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_checks import check_signed_send_and_receive, signed_user_provider
from sdk_testkit import SdkRunner, python_runner, sdk_cluster

from tests.v2.conftest import start_auth_gateway

pytestmark = pytest.mark.integration
SECRET = "sdk-secret-4Kp"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("python-sdk-auth-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    return python_runner(tmp_path_factory.mktemp("python-sdk-auth-home"))


async def test_python_sdk_sends_and_receives_with_credentials(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic, group = await make_topic(cluster, "py_auth"), unique_topic("py_auth_group")
    gateway = await start_auth_gateway(cluster, signed_user_provider("sdk-user", SECRET, "py_auth"))
    try:
        credentials = {"access_key": "sdk-user", "secret_key": SECRET}
        await asyncio.to_thread(check_signed_send_and_receive, cluster, runner, gateway.addr, topic, group, credentials)
    finally:
        await gateway.stop(0)
