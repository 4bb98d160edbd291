"""mqadmin's consumer-side verbs against a real local cluster (two broker groups): updateSubGroup, subGroupList,
deleteSubGroup, consumerProgress (lag going down as offsets are committed), consumerConnection, resetOffsetByTime,
deleteTopic, each in table and ``--output json`` form, and their errors (unknown group/topic/cluster -> exit 1 with
the code; bad input -> exit 2)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest
from mq_client.admin.admin_client import MQAdminClient
from mq_client.broker_client import BrokerClient
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import MQError
from mq_common.protocol import ConsumeType, HeartbeatData, MessageModel, MessageQueue, SubscriptionData
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic

if TYPE_CHECKING:
    from conftest import Mqadmin

pytestmark = pytest.mark.integration

CLUSTER = "DefaultCluster"
CLOCK_WAIT_S = 5.0


def _send(cluster: LocalCluster, topic: str, bodies: Sequence[str], tags: str = "TagA") -> None:
    async def main() -> None:
        async with MQAdminClient([cluster.namesrv_addr], gateway_addr=cluster.gateway_addr) as admin:
            for body in bodies:
                assert (await admin.send_message(topic, body.encode(), tags=tags)).send_status == "SEND_OK"

    asyncio.run(main())


def _stored(cluster: LocalCluster, topic: str) -> dict[MessageQueue, list[MessageExt]]:
    """Every message of ``topic`` by queue."""

    async def main() -> dict[MessageQueue, list[MessageExt]]:
        stored: dict[MessageQueue, list[MessageExt]] = {}
        async with MQAdminClient([cluster.namesrv_addr]) as admin:
            for broker in sorted(cluster.broker_addrs):
                for m in await admin.consume_message(topic, broker, count=1000):
                    stored.setdefault(MessageQueue(topic, broker, m.queue_id), []).append(m)
        return stored

    return asyncio.run(main())


def _commit(cluster: LocalCluster, group: str, offsets: dict[MessageQueue, int]) -> None:
    async def main() -> None:
        async with MQAdminClient([cluster.namesrv_addr]) as admin:
            await admin.update_consumer_offsets(group, offsets)

    asyncio.run(main())


def _max_offsets(mqadmin: Mqadmin, topic: str) -> dict[MessageQueue, int]:
    status = mqadmin.json("topicStatus", "-t", topic)
    return {MessageQueue(topic, o["broker_name"], o["queue_id"]): o["max_offset"] for o in status["offsets"]}


def _new_group(mqadmin: Mqadmin, hint: str) -> str:
    group = unique_topic(hint)
    mqadmin.json("updateSubGroup", "-c", CLUSTER, "-g", group)
    return group


def _group_on(listing: dict[str, object], addr: str, group: str) -> dict[str, object] | None:
    for broker in listing["brokers"]:  # type: ignore[attr-defined]
        if broker["broker_addr"] == addr:
            return next((g for g in broker["groups"] if g["group_name"] == group), None)
    raise AssertionError(f"{addr} not listed: {listing}")


def test_update_list_and_delete_subscription_groups(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    addr_a, addr_b = consumer_cluster.broker_addrs["broker-a"], consumer_cluster.broker_addrs["broker-b"]
    group = unique_topic("sub_group")
    created = mqadmin.json(
        "updateSubGroup", "-c", CLUSTER, "-g", group, "-r", "3", "-q", "2", "-o", "true", "-i", "0", "-w", "1",
        "--attributes", "+owner=ops",
    )  # fmt: skip
    assert sorted(created["updated"]) == sorted([addr_a, addr_b])
    config = created["subscription_group_config"]
    assert (config["group_name"], config["retry_max_times"], config["retry_queue_nums"]) == (group, 3, 2)

    listing = mqadmin.json("subGroupList", "-c", CLUSTER)
    for addr in (addr_a, addr_b):
        on_broker = _group_on(listing, addr, group)
        assert on_broker is not None
        # as UpdateSubGroupSubCommand: broadcast and consume-from-min off unless given; the rest as asked
        assert on_broker["consume_broadcast_enable"] is False
        assert on_broker["consume_from_min_enable"] is False
        assert on_broker["consume_message_orderly"] is True
        assert on_broker["consume_enable"] is True
        assert (on_broker["retry_max_times"], on_broker["retry_queue_nums"]) == (3, 2)
        assert on_broker["attributes"] == {"owner": "ops"}

    disabled = mqadmin("updateSubGroup", "-b", addr_a, "-g", group, "-s", "false")
    assert disabled.exit_code == 0, disabled.output
    assert f"create subscription group to {addr_a} success." in disabled.stdout
    listing = mqadmin.json("subGroupList", "-c", CLUSTER)
    assert _group_on(listing, addr_a, group)["consume_enable"] is False  # type: ignore[index]
    assert _group_on(listing, addr_b, group)["consume_enable"] is True  # type: ignore[index]
    assert group in mqadmin.ok("subGroupList", "-b", addr_b)

    deleted = mqadmin("deleteSubGroup", "-c", CLUSTER, "-g", group, "-r", "true")
    assert deleted.exit_code == 0, deleted.output
    assert f"delete subscription group [{group}] from broker [{addr_a}] in cluster [{CLUSTER}] success." in (
        deleted.stdout
    )
    listing = mqadmin.json("subGroupList", "-c", CLUSTER)
    assert _group_on(listing, addr_a, group) is None
    assert _group_on(listing, addr_b, group) is None


def test_subscription_group_errors(mqadmin: Mqadmin) -> None:
    mqadmin.fails(ResponseCode.BROKER_NOT_EXIST, "updateSubGroup", "-c", "NoSuchCluster", "-g", "G1")
    mqadmin.fails(ResponseCode.BROKER_NOT_EXIST, "subGroupList", "-c", "NoSuchCluster")
    mqadmin.fails(ResponseCode.RPC_SEND_TO_CHANNEL_FAILED, "subGroupList", "-b", "127.0.0.1:1")
    mqadmin.fails(ResponseCode.INVALID_PARAMETER, "updateSubGroup", "-c", CLUSTER, "-g", "x" * 121)
    assert mqadmin("updateSubGroup", "-c", CLUSTER, "-g", "G1", "-r", "many").exit_code == 2


def test_consumer_progress_shows_lag_going_down_as_offsets_are_committed(
    consumer_cluster: LocalCluster, mqadmin: Mqadmin
) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "progress", queues=2))
    group = _new_group(mqadmin, "progress_group")
    _send(consumer_cluster, topic, [f"p{i}" for i in range(12)])
    maxima = _max_offsets(mqadmin, topic)
    assert sum(maxima.values()) == 12

    _commit(consumer_cluster, group, dict.fromkeys(maxima, 0))
    start = mqadmin.json("consumerProgress", "-g", group, "-t", topic)
    assert start["diff_total"] == 12
    rows = {(q["broker_name"], q["queue_id"]): q for q in start["queues"] if q["topic"] == topic}
    assert {k: (q["broker_offset"], q["consumer_offset"], q["diff"]) for k, q in rows.items()} == {
        (mq.broker_name, mq.queue_id): (n, 0, n) for mq, n in maxima.items()
    }

    on_a = {mq: n for mq, n in maxima.items() if mq.broker_name == "broker-a"}
    _commit(consumer_cluster, group, on_a)
    middle = mqadmin.json("consumerProgress", "-g", group, "-t", topic)
    assert middle["diff_total"] == 12 - sum(on_a.values()) < start["diff_total"]

    _commit(consumer_cluster, group, maxima)
    assert mqadmin.json("consumerProgress", "-g", group, "-t", topic)["diff_total"] == 0
    table = mqadmin.ok("consumerProgress", "-g", group)  # every topic the group has offsets for
    assert topic in table
    assert "broker-b" in table
    assert "Consume Diff Total: 0" in table
    assert "Consume Inflight Total: 0" in table


def test_consumer_progress_errors(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    mqadmin.fails(ResponseCode.CONSUMER_NOT_ONLINE, "consumerProgress", "-g", unique_topic("nobody"))
    topic = asyncio.run(make_topic(consumer_cluster, "progress_err", queues=1))
    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "consumerProgress", "-g", "G1", "-t", f"{topic}_missing")
    mqadmin.fails(ResponseCode.INVALID_PARAMETER, "consumerProgress", "-g", "bad group")


def test_consumer_connection(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    group = _new_group(mqadmin, "connected")
    client_id = f"127.0.0.1@{group}@1"
    heartbeat = HeartbeatData(
        client_id,
        group,
        ConsumeType.CONSUME_ACTIVELY,
        MessageModel.CLUSTERING,
        (SubscriptionData("ConnTopic", "TagA || TagB"),),
        language="PYTHON",
        version="V5_3_0",
    )

    async def beat() -> None:
        pool = ChannelPool()
        try:
            await ConsumerBrokerCalls(pool).heartbeat(consumer_cluster.broker_addrs["broker-a"], heartbeat)
        finally:
            await pool.close()

    asyncio.run(beat())
    info = mqadmin.json("consumerConnection", "-g", group)
    assert [(c["client_id"], c["language"], c["version"]) for c in info["connections"]] == [
        (client_id, "PYTHON", "V5_3_0")
    ]
    assert info["connections"][0]["client_addr"].startswith("127.0.0.1:")
    assert info["subscriptions"] == [{"topic": "ConnTopic", "sub_string": "TagA || TagB"}]
    assert (info["consume_type"], info["message_model"]) == ("CONSUME_ACTIVELY", "CLUSTERING")
    table = mqadmin.ok("consumerConnection", "-g", group, "-b", consumer_cluster.broker_addrs["broker-a"])
    assert client_id in table
    assert "TagA || TagB" in table
    assert "ConsumeType: CONSUME_ACTIVELY" in table

    mqadmin.fails(
        ResponseCode.CONSUMER_NOT_ONLINE,
        "consumerConnection",
        "-g",
        group,
        "-b",
        consumer_cluster.broker_addrs["broker-b"],
    )
    mqadmin.fails(ResponseCode.CONSUMER_NOT_ONLINE, "consumerConnection", "-g", unique_topic("offline"))


def _wait_clock_past(timestamp_ms: int) -> None:
    deadline = time.monotonic() + CLOCK_WAIT_S
    while time.time() * 1000 <= timestamp_ms:
        assert time.monotonic() < deadline, "clock did not move"
        time.sleep(0.005)


def test_reset_offset_by_time(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "reset", queues=2))
    group = _new_group(mqadmin, "reset_group")
    _send(consumer_cluster, topic, [f"early{i}" for i in range(6)])
    early = _stored(consumer_cluster, topic)
    split_ms = max(m.store_timestamp_ms for messages in early.values() for m in messages) + 1
    _wait_clock_past(split_ms)  # every later message is stored at or after split_ms
    _send(consumer_cluster, topic, [f"late{i}" for i in range(5)])
    maxima = _max_offsets(mqadmin, topic)
    _commit(consumer_cluster, group, maxima)

    reset = mqadmin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", str(split_ms))
    assert {(o["broker_name"], o["queue_id"]): o["offset"] for o in reset["offsets"]} == {
        (mq.broker_name, mq.queue_id): len(early.get(mq, [])) for mq in maxima
    }
    assert mqadmin.json("consumerProgress", "-g", group, "-t", topic)["diff_total"] == 5

    table = mqadmin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "2001-01-01#00:00:00:000")
    assert "#brokerName" in table
    assert mqadmin.json("consumerProgress", "-g", group, "-t", topic)["diff_total"] == 11

    mqadmin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now", "-f", "false")  # never forward
    assert mqadmin.json("consumerProgress", "-g", group, "-t", topic)["diff_total"] == 11
    mqadmin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")  # force: true by default
    assert mqadmin.json("consumerProgress", "-g", group, "-t", topic)["diff_total"] == 0

    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "resetOffsetByTime", "-g", group, "-t", f"{topic}_no", "-s", "now")
    assert mqadmin("resetOffsetByTime", "-g", group, "-t", topic, "-s", "last tuesday").exit_code == 2


def _topic_stats_codes(cluster: LocalCluster, topic: str) -> list[int]:
    """The code each broker answers GetTopicStats of ``topic`` with (asked directly, not through a route)."""

    async def main() -> list[int]:
        codes: list[int] = []
        pool = ChannelPool()
        try:
            for addr in sorted(cluster.broker_addrs.values()):
                try:
                    await BrokerClient(pool).get_topic_stats(addr, topic)
                except MQError as exc:
                    codes.append(exc.code)
                else:
                    codes.append(ResponseCode.SUCCESS)
        finally:
            await pool.close()
        return codes

    return asyncio.run(main())


def test_delete_topic(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "doomed", queues=1))
    _send(consumer_cluster, topic, ["a", "b"])
    assert _topic_stats_codes(consumer_cluster, topic) == [ResponseCode.SUCCESS] * 2
    deleted = mqadmin.json("deleteTopic", "-t", topic, "-c", CLUSTER)
    assert sorted(deleted["deleted_from"]) == sorted(consumer_cluster.broker_addrs.values())
    # the name server dropped the route, and the brokers no longer have the topic
    assert "No topic route info in name server for the topic: " in mqadmin.fails(
        ResponseCode.TOPIC_NOT_EXIST, "topicRoute", "-t", topic
    )
    assert topic not in mqadmin.json("topicList")["topics"]
    assert _topic_stats_codes(consumer_cluster, topic) == [ResponseCode.TOPIC_NOT_EXIST] * 2
    assert "from NameServer success." in mqadmin.ok("deleteTopic", "-t", topic, "-c", CLUSTER)  # again: no error
    mqadmin.fails(ResponseCode.BROKER_NOT_EXIST, "deleteTopic", "-t", topic, "-c", "NoSuchCluster")
    assert mqadmin("deleteTopic", "-t", topic).exit_code == 2
