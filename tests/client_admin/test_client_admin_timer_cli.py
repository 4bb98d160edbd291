"""mqadmin's timer verbs (issue 32): recallMessage, timerStatus and queryMsgById's timer rows, against a real local
cluster (timer messages sent with DefaultMQProducer to a DELAY topic), plus their bad input (garbage or foreign
handles, retry topics, unknown topics) and the UTC due-time format."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from mq_client.admin.cli import app
from mq_client.admin.cli_timer import utc_ms
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_client.producer.send_result import SendResult
from mq_common.constants import TIMER_TOPIC
from mq_common.protocol import TopicConfig
from mq_common.recall_handle import build_recall_handle, decode_recall_handle
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, unique_topic
from mq_local.topics import create_topic_on_cluster
from typer.testing import CliRunner

if TYPE_CHECKING:
    from conftest import Mqadmin

FAR_MS = 10 * 60_000  # a timer that stays pending for the whole test
DELIVERY_WAIT_S = 20.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------------------------------- no cluster


def test_utc_ms_prints_utc_with_milliseconds_and_the_distance_to_now() -> None:
    due = 1_700_000_000_123  # 2023-11-14 22:13:20.123 UTC
    assert utc_ms(due, now_ms=due - 12_300) == "2023-11-14 22:13:20,123 UTC (in 12.3 s)"
    assert utc_ms(due, now_ms=due + 4_000) == "2023-11-14 22:13:20,123 UTC (4.0 s ago)"
    assert utc_ms(0) == "-"


@pytest.mark.parametrize(
    ("topic", "handle", "code", "remark"),
    [
        ("T", "not a handle!", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        ("T", "djEgVCBicm9rZXItYQ==", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),  # 3 fields
        ("%RETRY%g", build_recall_handle("T", "b", 1, "K"), ResponseCode.ILLEGAL_OPERATION, "topic is not supported"),
        ("bad topic", build_recall_handle("T", "b", 1, "K"), ResponseCode.INVALID_PARAMETER, "topic"),
    ],
)
def test_recall_refuses_bad_input_before_any_call(topic: str, handle: str, code: int, remark: str) -> None:
    """Checked on the client: no name server is asked (the address given answers nothing)."""
    result = CliRunner().invoke(
        app, ["-n", "127.0.0.1:1", "recallMessage", "-t", topic, "-r", handle], env={"MQ_NAMESRV_ADDR": ""}
    )
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"{ResponseCode.name_of(code)} ({code}): "), result.stderr
    assert remark in result.stderr
    assert result.stdout == ""


# ------------------------------------------------------------------------------------------- real cluster


@dataclass(frozen=True)
class Sent:
    topic: str
    far: SendResult  # due in FAR_MS
    far_due_ms: int
    soon: SendResult  # due in a few seconds
    delayed: SendResult  # delay level 6 (2 minutes)


async def _create_delay_topic(cluster: LocalCluster, topic: str) -> None:
    config = TopicConfig(topic, read_queue_nums=2, write_queue_nums=2, attributes={"+message.type": "DELAY"})
    await create_topic_on_cluster(cluster.namesrv_addr, config, cluster.spec.cluster_name)


async def _send_timers(cluster: LocalCluster, topic: str) -> Sent:
    await _create_delay_topic(cluster, topic)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="timer_cli_producer"), [cluster.namesrv_addr])
    await producer.start()
    try:
        far_due = now_ms() + FAR_MS
        far = await producer.send(Message(topic, b"far", deliver_time_ms=far_due))
        soon = await producer.send(Message(topic, b"soon", delay_time_ms=2_000))
        delayed = await producer.send(Message(topic, b"delayed", delay_time_level=6))
    finally:
        await producer.shutdown()
    return Sent(topic, far, far_due, soon, delayed)


@pytest.fixture(scope="module")
def sent(consumer_cluster: LocalCluster) -> Sent:
    return asyncio.run(_send_timers(consumer_cluster, unique_topic("timer_cli")))


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DELIVERY_WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


@pytest.mark.integration
def test_timer_status_lists_pending_timers_and_delay_level_messages_per_broker(
    consumer_cluster: LocalCluster, mqadmin: Mqadmin, sent: Sent
) -> None:
    brokers = {b["broker_name"]: b for b in mqadmin.json("timerStatus", "-t", sent.topic)["brokers"]}
    assert set(brokers) == set(consumer_cluster.broker_addrs)
    far_broker = brokers[sent.far.message_queue.broker_name]
    assert far_broker["broker_addr"] == consumer_cluster.broker_addrs[sent.far.message_queue.broker_name]
    assert far_broker["error"] == ""
    assert far_broker["latest_deliver_ms"] == sent.far_due_ms
    assert sum(b["pending_timers"] for b in brokers.values()) >= 1
    assert sum(b["pending_delay_level_messages"] for b in brokers.values()) == 1
    for b in brokers.values():
        if b["pending_timers"]:
            assert 0 < b["earliest_deliver_ms"] <= b["latest_deliver_ms"]
        else:
            assert (b["earliest_deliver_ms"], b["latest_deliver_ms"]) == (0, 0)

    table = mqadmin.ok("timerStatus", "-t", sent.topic)
    assert f"Timers: {sent.topic}" in table
    assert utc_ms(sent.far_due_ms).split(" (")[0] in table  # the due time, UTC with ms
    assert "pending delay-level message(s)" in table


@pytest.mark.integration
def test_query_msg_by_id_shows_a_pending_timer_then_recall_cancels_it_once(mqadmin: Mqadmin, sent: Sent) -> None:
    detail = mqadmin.json("queryMsgById", "-i", sent.far.offset_msg_id)["messages"][0]
    assert detail["topic"] == TIMER_TOPIC
    assert detail["timer"]["real_topic"] == sent.topic
    assert detail["timer"]["uniq_key"] == sent.far.msg_id
    assert detail["timer"]["deliver_ms"] == sent.far_due_ms
    assert detail["timer"]["state"] == "PENDING"
    table = mqadmin.ok("queryMsgById", "-i", sent.far.offset_msg_id)
    assert "Timer State:" in table
    assert "PENDING" in table
    assert f"[{sent.far_due_ms}]" in table

    handle = decode_recall_handle(sent.far.recall_handle)
    line = mqadmin.ok("recallMessage", "-t", sent.topic, "-r", sent.far.recall_handle, "-g", "timer_cli_producer")
    assert line.startswith(f"RecallResult [recallStatus=RECALL_OK, msgId={sent.far.msg_id}, topic={sent.topic}, ")
    assert f"brokerName={handle.broker_name}" in line
    assert f"[{sent.far_due_ms}]]" in line

    recalled = mqadmin.json("queryMsgById", "-i", sent.far.offset_msg_id)["messages"][0]["timer"]
    assert recalled["state"] == "RECALLED"
    stderr = mqadmin.fails(
        ResponseCode.ILLEGAL_OPERATION, "recallMessage", "-t", sent.topic, "-r", sent.far.recall_handle
    )
    assert stderr.strip()  # the broker's remark: already recalled


@pytest.mark.integration
def test_a_fired_timer_shows_delivered_and_can_no_longer_be_recalled(mqadmin: Mqadmin, sent: Sent) -> None:
    def delivered() -> bool:
        timer = mqadmin.json("queryMsgById", "-i", sent.soon.offset_msg_id)["messages"][0]["timer"]
        return bool(timer["state"] == "DELIVERED")

    _until(delivered, "the 2 s timer never showed DELIVERED")
    stderr = mqadmin.fails(
        ResponseCode.ILLEGAL_OPERATION, "recallMessage", "-t", sent.topic, "-r", sent.soon.recall_handle
    )
    assert stderr.strip()


@pytest.mark.integration
def test_a_delay_level_message_shows_its_due_time_and_state(mqadmin: Mqadmin, sent: Sent) -> None:
    assert sent.delayed.recall_handle == ""
    timer = mqadmin.json("queryMsgById", "-i", sent.delayed.offset_msg_id)["messages"][0]["timer"]
    assert timer["real_topic"] == sent.topic
    assert timer["state"] in {"PENDING", "DELIVERED"}
    assert timer["deliver_ms"] > 0


@pytest.mark.integration
def test_recall_and_timer_status_errors_on_a_real_cluster(
    consumer_cluster: LocalCluster, mqadmin: Mqadmin, sent: Sent
) -> None:
    foreign_broker = build_recall_handle(sent.topic, "no-such-broker", now_ms() + FAR_MS, sent.far.msg_id)
    stderr = mqadmin.fails(ResponseCode.BROKER_NOT_EXIST, "recallMessage", "-t", sent.topic, "-r", foreign_broker)
    assert "no-such-broker" in stderr

    # A handle of another topic (and a message the broker never held) is refused by the broker, not recalled.
    other = unique_topic("timer_cli_other")
    asyncio.run(_create_delay_topic(consumer_cluster, other))
    broker = sent.far.message_queue.broker_name
    unknown = build_recall_handle(sent.topic, broker, now_ms() + FAR_MS, "0" * 32)
    mqadmin.fails(ResponseCode.ILLEGAL_OPERATION, "recallMessage", "-t", sent.topic, "-r", unknown)
    mqadmin.fails(ResponseCode.ILLEGAL_OPERATION, "recallMessage", "-t", other, "-r", sent.soon.recall_handle)

    missing = unique_topic("timer_cli_missing")
    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "timerStatus", "-t", missing)
    mqadmin.fails(ResponseCode.TOPIC_NOT_EXIST, "recallMessage", "-t", missing, "-r", sent.far.recall_handle)


@pytest.mark.integration
def test_query_msg_by_id_of_a_normal_message_has_no_timer_rows(
    consumer_cluster: LocalCluster, mqadmin: Mqadmin
) -> None:
    topic = asyncio.run(make_topic(consumer_cluster, "timer_cli_normal"))
    normal = mqadmin.json("sendMessage", "-t", topic, "-p", "plain", "-g", consumer_cluster.gateway_addr)
    detail = mqadmin.json("queryMsgById", "-i", normal["offset_msg_id"])["messages"][0]
    assert "timer" not in detail
    assert "Timer State:" not in mqadmin.ok("queryMsgById", "-i", normal["offset_msg_id"])
