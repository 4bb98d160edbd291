"""The official RocketMQ 5 Node.js SDK (npm rocketmq-client-nodejs 1.0.8, unmodified, from `make sdks`) against
the gateway's apache.rocketmq.v2 service on a real local cluster (name server, two broker groups, gateway).

The SDK runs under node with NODE_PATH to .tools/rmq5-node, one process per scenario
(tests/v2/sdk/node_sdk_scenarios.js). Scenarios and assertions: tests/v2/sdk/sdk_checks.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

import sdk_checks
from sdk_testkit import SdkRunner, node_runner, sdk_cluster, topic_and_group

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("node-sdk-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    return node_runner(tmp_path_factory.mktemp("node-sdk-home"))


def test_node_sdk_send_and_simple_consumer(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_send_and_simple_consumer(cluster, runner, *topic_and_group(cluster, "node_simple"))


def test_node_sdk_empty_receive_waits_for_the_long_poll(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_empty_receive_waits(cluster, runner, *topic_and_group(cluster, "node_empty"))


def test_node_sdk_push_consumer_retries_then_dlq(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_push_consumer_retries_then_dlq(cluster, runner, *topic_and_group(cluster, "node_push"))


def test_node_sdk_on_two_gateway_replicas(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_two_gateway_replicas(cluster, runner, *topic_and_group(cluster, "node_replicas"))
