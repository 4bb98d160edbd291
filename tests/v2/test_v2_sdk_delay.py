"""Delay messages with the official RocketMQ 5 SDKs (Python rocketmq-python-client 5.1.2 and Node.js
rocketmq-client-nodejs 1.0.8, unmodified, from `make sdks`) on a real local cluster (name server, two broker groups,
gateway): on a DELAY topic a delay message arrives no earlier than its time and within 2 s after it, with its
delivery timestamp; a recalled one (the receipt's recall handle) never arrives; a NORMAL topic refuses a DELAY
message. Both SDKs check a message's type against the route's accept_message_types before sending (the gateway's
settings say validate_message_type, as the 5.x proxy's), so that refusal is the SDK's own, quoting the NORMAL type
the gateway's QueryRoute answered; the gateway's own refusal (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE 40014) for a
client that does send is tested in test_v2_message_types.py.

Scripts: tests/v2/sdk/python_sdk_delay.py and node_sdk_delay.js, one subprocess per scenario (sdk_testkit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from mq_common.recall_handle import decode_recall_handle
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, unique_topic

from tests.v2.conftest import make_typed_topic

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_testkit import HERE, SdkRunner, node_runner, python_runner, sdk_cluster

pytestmark = pytest.mark.integration
DELAY_S: Final = 3
LATE_MS: Final = 2_000  # a delay message arrives within this after its time
LATE_S: Final = 3  # the consumer keeps receiving this long after the due time (the recalled one must not come)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with sdk_cluster(tmp_path_factory.mktemp("sdk-delay-cluster")) as started:
        yield started


def _python(home: Path) -> SdkRunner:
    runner = python_runner(home)
    return dataclasses.replace(runner, command=(runner.command[0], str(HERE / "python_sdk_delay.py")))


def _node(home: Path) -> SdkRunner:
    runner = node_runner(home)
    return dataclasses.replace(runner, command=(runner.command[0], str(HERE / "node_sdk_delay.js")))


@pytest.fixture(scope="module", params=["python", "node"])
def runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    home = tmp_path_factory.mktemp(f"{request.param}-sdk-delay-home")
    return _python(home) if request.param == "python" else _node(home)


def test_sdk_delay_message_arrives_on_time_and_a_recalled_one_never(cluster: LocalCluster, runner: SdkRunner) -> None:
    # On one broker: a v2 receive long-polls one broker (as the proxy's), so with the messages spread over two a
    # receive could wait out its await on the other while a message comes due, and the lateness would be the poll's.
    broker = min(cluster.broker_addrs)
    topic = asyncio.run(make_typed_topic(cluster, f"{runner.name}_delay", "DELAY", broker=broker))
    cfg = {
        "endpoints": cluster.gateway_addr,
        "topic": topic,
        "group": unique_topic(f"{runner.name}_delay_group"),
        "delay_s": DELAY_S,
        "late_s": LATE_S,
        "await_s": 5,  # the gateway's shortest long poll (a shorter one leaves Node.js no deadline for it)
    }
    out: dict[str, Any] = runner.run("delay", cfg)
    due_ms = out["due_ms"]
    receipts = out["receipts"]
    for body, receipt in receipts.items():
        handle = decode_recall_handle(receipt["recall_handle"])
        assert (handle.topic, handle.deliver_ms, handle.uniq_key) == (topic, due_ms, receipt["message_id"]), body
    assert out["recalled"] == receipts["recalled"]["message_id"]
    kept = {body for body in receipts if body != "recalled"}
    received = out["received"]
    assert sorted(r["body"] for r in received) == sorted(kept), received
    for r in received:
        assert r["message_id"] == receipts[r["body"]]["message_id"], r
        assert due_ms <= r["received_ms"] <= due_ms + LATE_MS, (r["received_ms"] - due_ms, r)
        assert r["delivery_timestamp"] == due_ms, r
    stored = [m.body.decode() for _, m in asyncio.run(read_all(cluster.namesrv_addr, topic))]
    assert sorted(stored) == sorted(kept), "the recalled message never reaches its topic"


def test_sdk_normal_topic_refuses_a_delay_message(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic = asyncio.run(make_topic(cluster, f"{runner.name}_normal"))
    out = runner.run("refused", {"endpoints": cluster.gateway_addr, "topic": topic})
    assert "not match" in out["text"], out
    # the accept types the gateway's route answered: Python names them, Node.js gives the enum numbers
    accepted = "queue access type:NORMAL" if runner.name == "python" else "acceptMessageTypes=[1]"
    assert accepted in out["text"], out
    assert asyncio.run(read_all(cluster.namesrv_addr, topic)) == []
