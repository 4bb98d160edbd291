"""The official RocketMQ 5 Python SDK (PyPI rocketmq-python-client 5.1.2, unmodified, from `make sdks`) against
the gateway's apache.rocketmq.v2 service on a real local cluster (name server, two broker groups, gateway).

The SDK runs in its own virtual environment, one subprocess per scenario (tests/v2/sdk/python_sdk_scenarios.py):
its stubs cannot share a process with the project's. Scenarios and assertions: tests/v2/sdk/sdk_checks.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

import sdk_checks
from sdk_testkit import SdkRunner, python_runner, sdk_cluster, topic_and_group

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("python-sdk-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    return python_runner(tmp_path_factory.mktemp("python-sdk-home"))


def test_python_sdk_send_and_simple_consumer(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_send_and_simple_consumer(cluster, runner, *topic_and_group(cluster, "py_simple"))


def test_python_sdk_empty_receive_waits_for_the_long_poll(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_empty_receive_waits(cluster, runner, *topic_and_group(cluster, "py_empty"))


def test_python_sdk_push_consumer_retries_then_dlq(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_push_consumer_retries_then_dlq(cluster, runner, *topic_and_group(cluster, "py_push"))


def test_python_sdk_on_two_gateway_replicas(cluster: LocalCluster, runner: SdkRunner) -> None:
    sdk_checks.check_two_gateway_replicas(cluster, runner, *topic_and_group(cluster, "py_replicas"))
