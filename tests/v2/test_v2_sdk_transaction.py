"""Transactional messages with the official RocketMQ 5 SDKs (Python rocketmq-python-client 5.1.2 and Node.js
rocketmq-client-nodejs 1.0.8, unmodified, from `make sdks`) on a real local cluster (name server, two broker groups,
gateway): on a TRANSACTION topic a committed transaction's message is received, a rolled-back one's never is, and the
receipts' transaction ids name the half message (mq_gateway.v2.transactions), so any gateway replica can end them;
one left open is checked back through the SDK's TransactionChecker (broker TransactionChecks stream -> gateway ->
RecoverOrphanedTransactionCommand on the client's Telemetry stream -> EndTransaction SOURCE_SERVER_CHECK) and then
received.

Scripts: tests/v2/sdk/python_sdk_transaction.py and node_sdk_transaction.js, one subprocess per scenario
(sdk_testkit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests, unique_topic

from tests.v2.conftest import make_typed_topic

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_testkit import HERE, SdkRunner, node_runner, python_runner

pytestmark = pytest.mark.integration


# Checks every 500 ms of transactions older than 2 s (RocketMQ's 30 s / 6 s would make a slow test).
CHECK_ENV = {"MQ_BROKER_TRANSACTION_TIMEOUT_MS": "2000", "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        tmp_path_factory.mktemp("sdk-transaction-cluster"),
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000", **CHECK_ENV},
        start_wait_s=90.0,
    )
    with LocalCluster(spec) as started:
        yield started


@pytest.fixture(scope="module", params=["python", "node"])
def runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    home = tmp_path_factory.mktemp(f"{request.param}-sdk-transaction-home")
    if request.param == "python":
        base = python_runner(home)
        return dataclasses.replace(base, command=(base.command[0], str(HERE / "python_sdk_transaction.py")))
    base = node_runner(home)
    return dataclasses.replace(base, command=(base.command[0], str(HERE / "node_sdk_transaction.js")))


def test_sdk_committed_transaction_is_received_and_a_rolled_back_one_never(
    cluster: LocalCluster, runner: SdkRunner
) -> None:
    topic = asyncio.run(make_typed_topic(cluster, f"{runner.name}_tx", "TRANSACTION"))
    cfg = {
        "endpoints": cluster.gateway_addr,
        "topic": topic,
        "group": unique_topic(f"{runner.name}_tx_group"),
        "listen_s": 6,
        "await_s": 5,
    }
    out: dict[str, Any] = runner.run("commit_rollback", cfg)
    assert [r["body"] for r in out["received"]] == ["committed"], out["received"]
    assert out["received"][0]["topic"] == topic
    ids = out["transaction_ids"]
    assert ids["committed"] != ids["rolled-back"]
    assert out["asked"] == [], "both ended by the producer: nothing to check back"


def test_sdk_open_transaction_is_checked_back_and_then_received(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic = asyncio.run(make_typed_topic(cluster, f"{runner.name}_txcheck", "TRANSACTION"))
    cfg = {
        "endpoints": cluster.gateway_addr,
        "topic": topic,
        "group": unique_topic(f"{runner.name}_txcheck_group"),
        "deadline_s": 30,
        "await_s": 5,
    }
    out: dict[str, Any] = runner.run("checked", cfg)
    assert [r["body"] for r in out["received"]] == ["open-one"], out
    assert out["asked"] == ["open-one"], "asked once: the COMMIT answer ended it"
