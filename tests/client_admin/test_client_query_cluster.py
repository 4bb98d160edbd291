"""Message queries against a real local cluster (mqnamesrv + two mqbroker + mqgateway processes on 127.0.0.1):
MQAdminClient.query_msg_by_key / query_msg_by_unique_key / query_msg_by_id and the mqadmin verbs
queryMsgByKey, queryMsgByUniqueKey, queryMsgById. Brokers run with tiny index files so they roll."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cli import app
from mq_client.gateway_client import GatewaySendResult
from mq_common.errors import MQError
from mq_common.message_id import create_offset_msg_id, decode_offset_msg_id
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

ENV = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": ""}
runner = CliRunner()


@dataclass(frozen=True, slots=True)
class Sent:
    topic: str
    results: tuple[GatewaySendResult, ...]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(
        tmp_path_factory.mktemp("query-cluster"),
        2,
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_MAX_HASH_SLOT_NUM": "16", "MQ_BROKER_MAX_INDEX_NUM": "8"},
    )
    with LocalCluster(spec) as c:
        yield c


async def _send_all(cluster: LocalCluster) -> Sent:
    topic = await make_topic(cluster, "query_topic", queues=2)
    async with MQAdminClient([cluster.namesrv_addr], gateway_addr=cluster.gateway_addr) as admin:
        results = [
            await admin.send_message(topic, f"q{i}".encode(), tags="TagQ", keys=[f"order-{i % 2}", "common"])
            for i in range(12)
        ]
    assert {r.send_status for r in results} == {"SEND_OK"}
    assert {r.broker_name for r in results} == {"broker-a", "broker-b"}  # the merge has two brokers to ask
    return Sent(topic, tuple(results))


@pytest.fixture(scope="module")
def sent(cluster: LocalCluster) -> Sent:
    return asyncio.run(_send_all(cluster))


async def test_admin_client_queries(cluster: LocalCluster, sent: Sent) -> None:
    async with MQAdminClient([cluster.namesrv_addr]) as admin:
        odd = await admin.query_msg_by_key(sent.topic, "order-1")
        assert sorted(m.body for m in odd) == sorted(f"q{i}".encode() for i in range(1, 12, 2))
        stamps = [m.store_timestamp_ms for m in odd]
        assert stamps == sorted(stamps, reverse=True)  # merged newest first
        assert len(await admin.query_msg_by_key(sent.topic, "common", max_num=3)) == 3

        target = sent.results[5]
        by_uniq = await admin.query_msg_by_unique_key(sent.topic, target.msg_id)
        assert [(m.body, m.uniq_key) for m in by_uniq] == [(b"q5", target.msg_id)]

        by_id = await admin.query_msg_by_id(target.offset_msg_id)
        assert (by_id.body, by_id.offset_msg_id, by_id.keys) == (b"q5", target.offset_msg_id, ["order-1", "common"])

        with pytest.raises(MQError) as none:
            await admin.query_msg_by_key(sent.topic, "no-such-key")
        assert none.value.code == ResponseCode.NO_MESSAGE
        host, port, offset = decode_offset_msg_id(target.offset_msg_id)
        with pytest.raises(MQError) as missing:
            await admin.query_msg_by_id(create_offset_msg_id(host, port, offset + 1))
        assert missing.value.code == ResponseCode.QUERY_NOT_FOUND


def test_mqadmin_query_verbs(cluster: LocalCluster, sent: Sent) -> None:
    ns = ["-n", cluster.namesrv_addr]
    target = sent.results[4]

    by_key = runner.invoke(app, [*ns, "queryMsgByKey", "-t", sent.topic, "-k", "order-0", "-m", "64"], env=ENV)
    assert by_key.exit_code == 0, by_key.output
    assert "6 message(s)" in by_key.stdout
    assert target.msg_id in by_key.stdout

    ranged = runner.invoke(
        app, [*ns, "queryMsgByKey", "-t", sent.topic, "-k", "order-0", "-b", "0", "-e", "1000"], env=ENV
    )
    assert ranged.exit_code == 1
    assert "NO_MESSAGE (208)" in ranged.stderr

    by_uniq = runner.invoke(app, [*ns, "queryMsgByUniqueKey", "-t", sent.topic, "-i", target.msg_id], env=ENV)
    assert by_uniq.exit_code == 0, by_uniq.output
    assert "q4" in by_uniq.stdout
    assert target.offset_msg_id in by_uniq.stdout

    by_id = runner.invoke(app, [*ns, "queryMsgById", "-i", target.offset_msg_id], env=ENV)
    assert by_id.exit_code == 0, by_id.output
    assert "q4" in by_id.stdout
    assert "[order-0 common]" in by_id.stdout  # the Keys row, not swallowed as rich markup

    bad = runner.invoke(app, [*ns, "queryMsgById", "-i", "nonsense"], env=ENV)
    assert bad.exit_code == 1
    assert "INVALID_PARAMETER (29)" in bad.stderr
    assert "Traceback" not in bad.output
