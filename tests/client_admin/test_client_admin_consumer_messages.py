"""mqadmin against a real local cluster: ``--output json`` on the cluster, topic, send and query verbs (parsed with
json.loads, checked against what was sent), queryMsgByOffset and printMsg (time ranges, tag filter, the -m bound),
their errors, and the installed ``mqadmin`` console script itself."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic

if TYPE_CHECKING:
    from conftest import Mqadmin

pytestmark = pytest.mark.integration

CLUSTER = "DefaultCluster"
SCRIPT_TIMEOUT_S = 60


def _send(mqadmin: Mqadmin, cluster: LocalCluster, topic: str, body: str, tags: str, key: str) -> dict[str, object]:
    sent = mqadmin.json("sendMessage", "-t", topic, "-p", body, "-c", tags, "-k", key, "-g", cluster.gateway_addr)
    assert sent["send_status"] == "SEND_OK"
    assert sent["topic"] == topic
    return sent  # type: ignore[no-any-return]


def test_cluster_and_topic_verbs_in_json(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    brokers = mqadmin.json("clusterList")["brokers"]
    assert {(b["broker_name"], b["broker_id"], b["addr"]) for b in brokers} == {
        (name, 0, addr) for name, addr in consumer_cluster.broker_addrs.items()
    }
    assert all(b["cluster"] == CLUSTER and b["last_update_timestamp_ms"] > 0 for b in brokers)

    topic = unique_topic("json_topic")
    addr = consumer_cluster.broker_addrs["broker-b"]
    updated = mqadmin.json("updateTopic", "-t", topic, "-b", addr, "-r", "2", "-w", "2")
    assert updated["updated"] == [addr]
    assert (updated["topic_config"]["topic_name"], updated["topic_config"]["write_queue_nums"]) == (topic, 2)

    deadline = time.monotonic() + 30
    while mqadmin("topicRoute", "-t", topic).exit_code != 0:  # until broker-b registers the topic
        assert time.monotonic() < deadline, "topic never routed"
        time.sleep(0.1)
    route = mqadmin.json("topicRoute", "-t", topic)
    assert [(q["broker_name"], q["read_queue_nums"], q["perm"]) for q in route["queue_datas"]] == [("broker-b", 2, 6)]
    assert route["broker_datas"][0]["broker_addrs"] == {"0": addr}
    assert topic in mqadmin.json("topicList")["topics"]
    status = mqadmin.json("topicStatus", "-t", topic)
    assert [(o["broker_name"], o["queue_id"], o["max_offset"]) for o in status["offsets"]] == [
        ("broker-b", 0, 0),
        ("broker-b", 1, 0),
    ]


def test_send_consume_and_query_verbs_in_json(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "json_query", queues=1))
    sent = [_send(mqadmin, consumer_cluster, topic, f"body-{i}", "TagJ", f"key-{i}") for i in range(3)]

    first = sent[0]
    consumed = mqadmin.json(
        "consumeMessage", "-t", topic, "-b", str(first["broker_name"]), "-i", str(first["queue_id"]), "-o",
        str(first["queue_offset"]), "-c", "1",
    )  # fmt: skip
    assert [(m["body"], m["msg_id"], m["tags"], m["keys"]) for m in consumed["messages"]] == [
        ("body-0", first["msg_id"], "TagJ", ["key-0"])
    ]
    assert sorted(m["body"] for m in mqadmin.json("consumeMessage", "-t", topic)["messages"]) == [
        "body-0", "body-1", "body-2"
    ]  # fmt: skip

    by_key = mqadmin.json("queryMsgByKey", "-t", topic, "-k", "key-1")
    assert [m["body"] for m in by_key["messages"]] == ["body-1"]
    by_uniq = mqadmin.json("queryMsgByUniqueKey", "-t", topic, "-i", str(sent[2]["msg_id"]))
    assert [m["body"] for m in by_uniq["messages"]] == ["body-2"]
    by_id = mqadmin.json("queryMsgById", "-i", str(sent[2]["offset_msg_id"]))
    assert [(m["body"], m["offset_msg_id"]) for m in by_id["messages"]] == [("body-2", sent[2]["offset_msg_id"])]


def test_query_msg_by_offset(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "by_offset", queues=1))
    sent = [_send(mqadmin, consumer_cluster, topic, f"o{i}", "TagO", f"ko{i}") for i in range(2)]
    second = sent[1]
    where = ["-t", topic, "-b", str(second["broker_name"]), "-i", str(second["queue_id"])]
    found = mqadmin.json("queryMsgByOffset", *where, "-o", str(second["queue_offset"]))
    assert [(m["body"], m["msg_id"], m["queue_offset"]) for m in found["messages"]] == [
        ("o1", second["msg_id"], second["queue_offset"])
    ]
    table = mqadmin.ok("queryMsgByOffset", *where, "-o", str(second["queue_offset"]))
    assert str(second["offset_msg_id"]) in table
    assert "[ko1]" in table

    past_end = mqadmin.fails(ResponseCode.NO_MESSAGE, "queryMsgByOffset", *where, "-o", "1000")
    assert "OFFSET_ILLEGAL" in past_end
    mqadmin.fails(
        ResponseCode.BROKER_NOT_EXIST, "queryMsgByOffset", "-t", topic, "-b", "broker-z", "-i", "0", "-o", "0"
    )
    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "queryMsgByOffset", "-t", f"{topic}_no", "-b", "broker-a", "-i", "0",
                  "-o", "0")  # fmt: skip
    assert mqadmin("queryMsgByOffset", *where).exit_code == 2  # -o is required


def _store_times(mqadmin: Mqadmin, topic: str) -> dict[str, int]:
    return {m["body"]: m["store_timestamp_ms"] for m in mqadmin.json("consumeMessage", "-t", topic)["messages"]}


def _wait_clock_past(timestamp_ms: int) -> None:
    deadline = time.monotonic() + 5
    while time.time() * 1000 <= timestamp_ms:
        assert time.monotonic() < deadline, "clock did not move"
        time.sleep(0.005)


def test_print_msg_by_time_range_tag_and_bound(consumer_cluster: LocalCluster, mqadmin: Mqadmin) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "print", queues=2))
    for i in range(4):
        _send(mqadmin, consumer_cluster, topic, f"old{i}", "TagA" if i % 2 else "TagB", f"k{i}")
    split_ms = max(_store_times(mqadmin, topic).values()) + 1
    _wait_clock_past(split_ms)
    for i in range(3):
        _send(mqadmin, consumer_cluster, topic, f"new{i}", "TagA", f"n{i}")

    everything = mqadmin.json("printMsg", "-t", topic)
    assert sorted(m["body"] for q in everything["queues"] for m in q["messages"]) == sorted(
        [f"old{i}" for i in range(4)] + [f"new{i}" for i in range(3)]
    )
    assert (everything["total"], everything["max_num_reached"]) == (7, False)
    assert len(everything["queues"]) == 4  # 2 broker groups x 2 queues

    recent = mqadmin.json("printMsg", "-t", topic, "-b", str(split_ms), "-e", "now")
    assert sorted(m["body"] for q in recent["queues"] for m in q["messages"]) == ["new0", "new1", "new2"]
    older = mqadmin.json("printMsg", "-t", topic, "-b", "2001-01-01#00:00:00:000", "-e", str(split_ms))
    assert sorted(m["body"] for q in older["queues"] for m in q["messages"]) == ["old0", "old1", "old2", "old3"]
    tagged = mqadmin.json("printMsg", "-t", topic, "-s", "TagB")
    assert sorted(m["body"] for q in tagged["queues"] for m in q["messages"]) == ["old0", "old2"]
    bounded = mqadmin.json("printMsg", "-t", topic, "-m", "2")
    assert (bounded["total"], bounded["max_num_reached"]) == (2, True)

    table = mqadmin.ok("printMsg", "-t", topic, "-b", str(split_ms), "-d", "false")
    assert "minOffset=" in table
    assert "NOT PRINT BODY" in table
    assert "new0" not in table
    assert "3 message(s)" in table

    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "printMsg", "-t", f"{topic}_no")
    mqadmin.fails(ResponseCode.INVALID_PARAMETER, "printMsg", "-t", topic, "-b", "now", "-e", "0")
    mqadmin.fails(ResponseCode.INVALID_PARAMETER, "printMsg", "-t", topic, "-m", "0")
    assert mqadmin("printMsg", "-t", topic, "-b", "soon").exit_code == 2


def test_installed_console_script_prints_json(consumer_cluster: LocalCluster) -> None:
    script = shutil.which("mqadmin")
    assert script is not None, "the mqadmin console script is not installed in this environment"
    done = subprocess.run(
        [script, "-n", consumer_cluster.namesrv_addr, "clusterList", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {b["addr"] for b in json.loads(done.stdout)["brokers"]} == set(consumer_cluster.broker_addrs.values())
    missing = subprocess.run(
        [script, "-n", consumer_cluster.namesrv_addr, "consumerProgress", "-g", unique_topic("none")],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("CONSUMER_NOT_ONLINE (206): ")
