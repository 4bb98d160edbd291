"""mqadmin's transaction views (issue 33) against a real local cluster (mqnamesrv + two mqbroker processes, fast
check-back): ``queryTransactions`` lists a topic's open transactions per broker (msg id, producer group, transaction
id, age, check count, keys; never the committed or rolled-back ones), ``queryMsgById`` shows a transaction message's
state (OPEN with age and check count, COMMITTED, ROLLED_BACK, CHECK_MAX), bad input gets a code; and
``updateSubGroup -o true`` turns consumeMessageOrderly on, as ``subGroupList`` shows."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from mq_client.admin.cli import app
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_client.producer.send_result import SendResult
from mq_client.producer.transaction import LocalTransactionState, TransactionMQProducer
from mq_common.codec import MessageExt
from mq_common.constants import TRANS_HALF_TOPIC
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests, unique_topic
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

CHECK_ENV = {
    "MQ_BROKER_TRANSACTION_TIMEOUT_MS": "1000",
    "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "1000",
    "MQ_BROKER_TRANSACTION_CHECK_MAX": "6",
}
PRODUCER_GROUP = "tx_admin_pg"
WAIT_S = 60.0
ENV = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}


@dataclass(frozen=True)
class Admin:
    namesrv_addr: str

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(app, ["-n", self.namesrv_addr, *args], env=ENV)

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--output", "json"))

    def fails(self, code: int, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith(f"{ResponseCode.name_of(code)} ({code}): "), result.stderr
        assert "Traceback" not in result.output
        return result.stderr


@dataclass(frozen=True)
class Sent:
    topic: str
    committed: SendResult
    rolled_back: SendResult
    immune: SendResult  # open, CHECK_IMMUNITY_TIME_IN_SECONDS 600: never checked during the test
    checked: SendResult  # open, checked back every second (the producer answers UNKNOW) until CHECK_MAX


class Listener:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState(arg)

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        tmp_path_factory.mktemp("tx-admin"), 2, broker_env=CHECK_ENV, auto_create_topic_enable=False, start_wait_s=60.0
    )
    with LocalCluster(spec) as started:
        yield started


async def _send(cluster: LocalCluster) -> Sent:
    topic = await make_topic(cluster, "tx_admin", queues=2)
    producer = TransactionMQProducer.connect(
        ProducerConfig(producer_group=PRODUCER_GROUP), [cluster.namesrv_addr], Listener()
    )
    await producer.start()
    try:

        async def send(body: str, state: str, keys: tuple[str, ...], **props: str) -> SendResult:
            msg = Message(topic, body.encode(), tags="TagTx", keys=keys, properties=props)
            result = await producer.send_message_in_transaction(msg, state)
            assert result.local_transaction_state is LocalTransactionState(state)
            return result.send_result

        return Sent(
            topic,
            await send("committed", "COMMIT_MESSAGE", ("k-committed",)),
            await send("rolled-back", "ROLLBACK_MESSAGE", ("k-rolled",)),
            await send("immune", "UNKNOW", ("k-immune", "order-7"), CHECK_IMMUNITY_TIME_IN_SECONDS="600"),
            await send("checked", "UNKNOW", ("k-checked",)),
        )
    finally:
        await producer.shutdown()


@pytest.fixture(scope="module")
def sent(cluster: LocalCluster) -> Sent:
    return asyncio.run(_send(cluster))


@pytest.fixture
def admin(cluster: LocalCluster) -> Admin:
    return Admin(cluster.namesrv_addr)


def _until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.3)
    return found


def _listed(admin: Admin, topic: str, *args: str) -> dict[str, dict[str, Any]]:
    document = admin.json("queryTransactions", "-t", topic, *args)
    assert document["topic"] == topic
    return {tx["msg_id"]: tx | {"broker": b["broker_name"]} for b in document["brokers"] for tx in b["transactions"]}


def _transaction(admin: Admin, offset_msg_id: str) -> dict[str, Any]:
    detail = admin.json("queryMsgById", "-i", offset_msg_id)["messages"][0]
    return detail["transaction"]  # type: ignore[no-any-return]


def test_query_transactions_lists_the_open_ones_per_broker(cluster: LocalCluster, admin: Admin, sent: Sent) -> None:
    document = admin.json("queryTransactions", "-t", sent.topic)
    assert sorted(b["broker_name"] for b in document["brokers"]) == sorted(cluster.broker_addrs)
    assert all(b["error"] == "" for b in document["brokers"])
    listed = _listed(admin, sent.topic)
    assert set(listed) <= {sent.immune.msg_id, sent.checked.msg_id}, "never a committed or rolled-back one"
    immune = listed[sent.immune.msg_id]
    assert immune["broker"] == sent.immune.message_queue.broker_name
    assert (immune["producer_group"], immune["transaction_id"], immune["keys"], immune["tags"]) == (
        PRODUCER_GROUP, sent.immune.msg_id, "k-immune order-7", "TagTx"
    )  # fmt: skip
    assert immune["check_times"] == 0
    assert 0 <= immune["age_s"] < WAIT_S * 3
    assert immune["age_ms"] >= 0

    def checked_once() -> dict[str, Any] | None:
        tx = _listed(admin, sent.topic).get(sent.checked.msg_id)
        return tx if tx is not None and tx["check_times"] >= 1 else None

    checked = _until(checked_once, "the open transaction is checked back and listed with its check count")
    assert checked["keys"] == "k-checked"
    assert checked["broker"] == sent.checked.message_queue.broker_name

    table = admin.ok("queryTransactions", "-t", sent.topic)
    assert f"Open transactions: {sent.topic}" in table
    assert sent.immune.msg_id in table
    assert "open transaction(s)" in table

    limited = admin.json("queryTransactions", "-t", sent.topic, "-m", "1")
    assert all(len(b["transactions"]) <= 1 for b in limited["brokers"])


def test_query_msg_by_id_shows_each_transaction_state(admin: Admin, sent: Sent) -> None:
    immune = _transaction(admin, sent.immune.offset_msg_id)
    assert (immune["state"], immune["real_topic"], immune["uniq_key"]) == ("OPEN", sent.topic, sent.immune.msg_id)
    assert immune["open"]["check_times"] == 0
    assert immune["open"]["age_ms"] >= 0
    assert immune["error"] == ""
    detail = admin.ok("queryMsgById", "-i", sent.immune.offset_msg_id)
    assert "Transaction State:" in detail
    assert "OPEN" in detail
    assert "Transaction Check Times:" in detail
    assert TRANS_HALF_TOPIC in detail

    assert _transaction(admin, sent.committed.offset_msg_id)["state"] == "COMMITTED"
    assert _transaction(admin, sent.rolled_back.offset_msg_id)["state"] == "ROLLED_BACK"
    real = admin.json("queryMsgByUniqueKey", "-i", sent.committed.msg_id, "-t", sent.topic)["messages"]
    (committed,) = [m for m in real if m["topic"] == sent.topic]
    on_topic = _transaction(admin, committed["offset_msg_id"])
    assert (on_topic["state"], on_topic["real_topic"]) == ("COMMITTED", sent.topic)

    def checked_max() -> bool:
        return bool(_transaction(admin, sent.checked.offset_msg_id)["state"] == "CHECK_MAX")

    _until(checked_max, "checked transactionCheckMax times: moved to TRANS_CHECK_MAX_TIME_TOPIC")
    assert sent.checked.msg_id not in _listed(admin, sent.topic)
    assert sent.immune.msg_id in _listed(admin, sent.topic), "the immune one stays open"


async def _send_plain(cluster: LocalCluster, topic: str) -> SendResult:
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group="tx_admin_plain"), [cluster.namesrv_addr])
    await producer.start()
    try:
        return await producer.send(Message(topic, b"plain"))
    finally:
        await producer.shutdown()


def test_a_plain_message_has_no_transaction_rows(cluster: LocalCluster, admin: Admin, sent: Sent) -> None:
    plain = asyncio.run(_send_plain(cluster, sent.topic))
    detail = admin.json("queryMsgById", "-i", plain.offset_msg_id)["messages"][0]
    assert "transaction" not in detail
    assert "Transaction State:" not in admin.ok("queryMsgById", "-i", plain.offset_msg_id)
    printed = admin.json("printMsg", "-t", sent.topic)
    bodies = sorted(m["body"] for q in printed["queues"] for m in q["messages"])
    assert bodies == ["committed", "plain"], "no rolled-back, open or discarded transaction reached the topic"


def test_bad_input_gets_a_code(admin: Admin, sent: Sent) -> None:
    admin.fails(ResponseCode.INVALID_PARAMETER, "queryTransactions", "-t", "bad topic!")
    admin.fails(ResponseCode.INVALID_PARAMETER, "queryTransactions", "-t", sent.topic, "-m", "0")
    admin.fails(ResponseCode.INVALID_PARAMETER, "queryTransactions", "-t", sent.topic, "-m", "100001")
    admin.fails(ResponseCode.TOPIC_NOT_EXIST, "queryTransactions", "-t", unique_topic("no_such_tx_topic"))
    assert admin("queryTransactions", "-t", sent.topic, "-m", "many").exit_code == 2


def _group_row(table: str, group: str) -> list[str]:
    for line in table.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│")]
        if group in cells:
            return cells
    raise AssertionError(f"{group} not in {table}")


def test_update_sub_group_orderly_is_listed(cluster: LocalCluster, admin: Admin, tmp_path: Path) -> None:
    group = unique_topic("orderly_group")
    cluster_name = cluster.spec.cluster_name
    admin.ok("updateSubGroup", "-c", cluster_name, "-g", group, "-o", "true")
    listing = admin.json("subGroupList", "-c", cluster_name)
    found = [g for b in listing["brokers"] for g in b["groups"] if g["group_name"] == group]
    assert len(found) == len(cluster.broker_addrs)
    assert all(g["consume_message_orderly"] is True for g in found)
    header = _group_row(admin.ok("subGroupList", "-c", cluster_name), "#Group")
    row = _group_row(admin.ok("subGroupList", "-c", cluster_name), group)
    assert row[header.index("#Orderly")] == "true"

    admin.ok("updateSubGroup", "-c", cluster_name, "-g", group, "-o", "false")
    listing = admin.json("subGroupList", "-c", cluster_name)
    found = [g for b in listing["brokers"] for g in b["groups"] if g["group_name"] == group]
    assert found
    assert all(g["consume_message_orderly"] is False for g in found)
    row = _group_row(admin.ok("subGroupList", "-c", cluster_name), group)
    assert row[header.index("#Orderly")] == "false"
