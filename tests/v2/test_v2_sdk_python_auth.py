"""The official RocketMQ 5 Python SDK with SessionCredentials against a gateway with authentication and
authorisation on (users and ACLs from an in-memory provider): its signed calls pass, it sends and receives."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_checks import consumer_cfg
from sdk_testkit import SdkRunner, assert_stored, python_runner, sample_messages, sdk_cluster

from tests.v2.conftest import start_auth_gateway

pytestmark = pytest.mark.integration
SECRET = "sdk-secret-4Kp"
MESSAGES = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("python-sdk-auth-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    return python_runner(tmp_path_factory.mktemp("python-sdk-auth-home"))


def sdk_acl() -> Acl:
    entries = (
        PolicyEntry(Resource.parse("Topic:py_auth*"), frozenset({Action.PUB, Action.SUB})),
        PolicyEntry(Resource.parse("Group:py_auth*"), frozenset({Action.SUB})),
    )
    return Acl("User:sdk-user", (Policy(entries=entries),))


async def test_python_sdk_sends_and_receives_with_credentials(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic, group = await make_topic(cluster, "py_auth"), unique_topic("py_auth_group")
    provider = InMemoryAuthMetadataProvider((User("sdk-user", SECRET),), (sdk_acl(),))
    gateway = await start_auth_gateway(cluster, provider)
    try:
        credentials = {"access_key": "sdk-user", "secret_key": SECRET}
        sent = sample_messages("py-auth", MESSAGES)
        produce = {"endpoints": gateway.addr, "topic": topic, "messages": sent, **credentials}
        receipts = (await asyncio.to_thread(runner.run, "produce", produce))["receipts"]
        ids = [r["message_id"] for r in receipts]
        await asyncio.to_thread(assert_stored, cluster, topic, sent, ids)
        cfg = {**consumer_cfg(gateway.addr, group, topic, count=MESSAGES), **credentials}
        out = await asyncio.to_thread(runner.run, "drain", cfg)
        assert sorted({m["message_id"] for m in out["messages"]}) == sorted(ids)
    finally:
        await gateway.stop(0)
