"""FIFO (orderly) consumption with the official RocketMQ 5 SDKs (Python rocketmq-python-client 5.1.2 and Node.js
rocketmq-client-nodejs 1.0.8, unmodified, from `make sdks`) on a real local cluster (name server, one broker group,
gateway): on a FIFO topic (message.type=FIFO) with an orderly group (consumeMessageOrderly=true), 3 groups x 8
messages sent with message_group arrive in send order per group; a SimpleConsumer (one message a receive) that
holds (never acks) the first message of g0 gets no later g0 message until that one comes back (delivery_attempt 2)
and is acked; a PushConsumer (FIFO by the group's settings) consumes each group in order; each group's messages are
stored on the queue of Java's String#hashCode of the group, whatever the SDK's language. The Python SDK retries a
failed message in place (the customized backoff of the gateway's settings); the Node.js SDK does not implement that
backoff, so it allows one attempt and forwards the failed message to the DLQ, and the group moves on.

The gateway's shortest receive invisible time is lowered to 2 s so a held message comes back quickly.
Scripts: tests/v2/sdk/python_sdk_fifo.py and node_sdk_fifo.js, one subprocess per scenario (sdk_testkit).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from mq_client.producer.selectors import queue_index_for_key
from mq_common.channels import ChannelPool
from mq_common.constants import MessageConst
from mq_common.protocol import SubscriptionGroupConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all, spec_for_tests, unique_topic

from tests.v2.conftest import make_typed_topic
from tests.v2.v2_consumer_testkit import update_group

sys.path.insert(0, str(Path(__file__).resolve().parent / "sdk"))

from sdk_testkit import HERE, SdkRunner, node_runner, python_runner

pytestmark = pytest.mark.integration
GROUPS: Final = 3
PER_GROUP: Final = 8
INVISIBLE_S: Final = 2
QUEUES: Final = 4  # one broker group: make_typed_topic's 4 queues
DEADLINE_S: Final = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        tmp_path_factory.mktemp("sdk-fifo-cluster"),
        broker_groups=1,
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000"},
        gateway_env={"MQ_GATEWAY_MIN_INVISIBLE_TIME_MS_FOR_RECV": str(INVISIBLE_S * 1000)},
        start_wait_s=90.0,
    )
    with LocalCluster(spec) as started:
        yield started


def _script(runner: SdkRunner, name: str) -> SdkRunner:
    return dataclasses.replace(runner, command=(runner.command[0], str(HERE / name)))


@pytest.fixture(scope="module", params=["python", "node"])
def runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SdkRunner:
    home = tmp_path_factory.mktemp(f"{request.param}-sdk-fifo-home")
    if request.param == "python":
        return _script(python_runner(home), "python_sdk_fifo.py")
    return _script(node_runner(home), "node_sdk_fifo.js")


def fifo_topic_and_group(cluster: LocalCluster, hint: str) -> tuple[str, str]:
    """A new FIFO topic and a new orderly group on its broker."""

    async def make() -> tuple[str, str]:
        topic = await make_typed_topic(cluster, hint, "FIFO")
        group = unique_topic(f"{hint}_group")
        pool = ChannelPool()
        try:
            await update_group(cluster, pool, topic, SubscriptionGroupConfig(group, consume_message_orderly=True))
        finally:
            await pool.close()
        return topic, group

    return asyncio.run(make())


def first_deliveries_in_send_order(out: dict[str, Any]) -> None:
    """Per message group, the first delivery of each message comes in send order."""
    for i in range(GROUPS):
        first: list[str] = []
        for d in out["deliveries"]:
            if d["body"].startswith(f"g{i}-") and d["body"] not in first:
                first.append(d["body"])
        assert first == [f"g{i}-{j}" for j in range(PER_GROUP)], (i, out["deliveries"])


def stored_on_their_group_queues(cluster: LocalCluster, topic: str) -> None:
    """Each message group's messages are stored on one queue, in send order: the queue of Java's String#hashCode of
    the group modulo the writable queues, chosen by the gateway whatever the SDK's language."""
    stored = asyncio.run(read_all(cluster.namesrv_addr, topic))
    assert len(stored) == GROUPS * PER_GROUP
    for i in range(GROUPS):
        group = f"g{i}"
        mine = [(mq, m) for mq, m in stored if m.properties.get(MessageConst.SHARDING_KEY) == group]
        assert {mq.queue_id for mq, _ in mine} == {queue_index_for_key(group, QUEUES)}, group
        assert [m.body.decode() for _, m in mine] == [f"{group}-{j}" for j in range(PER_GROUP)]


def test_sdk_fifo_held_message_blocks_its_group_until_redelivered(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic, group = fifo_topic_and_group(cluster, f"{runner.name}_fifo_hold")
    cfg = {
        "endpoints": cluster.gateway_addr, "topic": topic, "group": group, "groups": GROUPS,
        "per_group": PER_GROUP, "invisible_s": INVISIBLE_S, "await_s": 5, "deadline_s": DEADLINE_S,
    }  # fmt: skip
    out = runner.run("hold", cfg)
    stored_on_their_group_queues(cluster, topic)
    first_deliveries_in_send_order(out)
    g0 = [(d["body"], d["delivery_attempt"]) for d in out["deliveries"] if d["body"].startswith("g0-")]
    assert g0 == [("g0-0", 1), ("g0-0", 2), *((f"g0-{j}", 1) for j in range(1, PER_GROUP))], out["deliveries"]
    held, again = (d["ms"] for d in out["deliveries"] if d["body"] == "g0-0")
    assert again - held >= INVISIBLE_S * 1000 - 100, (held, again)


def test_sdk_fifo_push_consumer_consumes_each_group_in_order(cluster: LocalCluster, runner: SdkRunner) -> None:
    topic, group = fifo_topic_and_group(cluster, f"{runner.name}_fifo_push")
    cfg = {
        "endpoints": cluster.gateway_addr, "topic": topic, "group": group, "groups": GROUPS,
        "per_group": PER_GROUP, "deadline_s": DEADLINE_S,
    }  # fmt: skip
    out = runner.run("push", cfg)
    if "fifo" in out:
        assert out["fifo"] is True
    first_deliveries_in_send_order(out)
    for i in range(GROUPS):
        bodies = [d["body"] for d in out["deliveries"] if d["body"].startswith(f"g{i}-")]
        expected = [f"g{i}-{j}" for j in range(PER_GROUP)]
        if i == 1 and runner.name == "python":  # the failed g1-3 is consumed again before g1-4
            expected.insert(4, "g1-3")
        assert bodies == expected, (i, out["deliveries"])
