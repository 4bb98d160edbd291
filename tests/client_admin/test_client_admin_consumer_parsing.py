"""mqadmin's input parsing and JSON output helpers, without a cluster: RocketMQ's timestamp formats, true/false
options, group attributes, --output json's value conversion, and usage errors (exit 2) caught before any call."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
import typer
from mq_client.admin.cli import app
from mq_client.admin.cli_common import jsonable, message_json, parse_timestamp_ms
from mq_client.admin.cli_consumer import parse_attributes, parse_bool
from mq_common.codec import MessageExt
from mq_common.protocol import ConsumerConnectionInfo, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from typer.testing import CliRunner

ENV = {"COLUMNS": "200", "MQ_NAMESRV_ADDR": ""}
# Nothing listens there: a verb that got past its usage checks would fail with exit 1, not 2.
DEAD_NAMESRV = ["-n", "127.0.0.1:1"]
runner = CliRunner()


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp_ms("1676730526212") == 1676730526212
    expected = int(datetime(2024, 2, 29, 13, 45, 7).timestamp()) * 1000 + 89
    assert parse_timestamp_ms(" 2024-02-29#13:45:07:089 ") == expected
    before = int(time.time() * 1000)
    now = parse_timestamp_ms("now")
    assert before <= now <= int(time.time() * 1000)


@pytest.mark.parametrize(
    "text", ["yesterday", "-5", "2024-02-30#00:00:00:000", "2024-02-01 00:00:00", "2024-02-01#00:00:00:7", ""]
)
def test_parse_timestamp_refuses(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_timestamp_ms(text)


def test_parse_bool_and_attributes() -> None:
    assert parse_bool("x", " TRUE ") is True
    assert parse_bool("x", "false") is False
    assert parse_bool("x", None) is None
    with pytest.raises(typer.BadParameter, match="x must be true or false"):
        parse_bool("x", "yes")
    assert parse_attributes("+a=b, +c=") == {"a": "b", "c": ""}
    for bad in ("-e", "+a", "a=b", "+=b"):
        with pytest.raises(typer.BadParameter):
            parse_attributes(bad)


def test_jsonable_converts_domain_values() -> None:
    info = ConsumerConnectionInfo((), (SubscriptionData("T", "TagA || TagB"),), ConsumeType.CONSUME_ACTIVELY,
                                  MessageModel.CLUSTERING)  # fmt: skip
    assert jsonable({"q": MessageQueue("T", "broker-a", 3), "info": info, "raw": b"\x00\xff", "s": {1}}) == {
        "q": {"topic": "T", "broker_name": "broker-a", "queue_id": 3},
        "info": {
            "connections": [],
            "subscriptions": [{"topic": "T", "sub_string": "TagA || TagB"}],
            "consume_type": "CONSUME_ACTIVELY",
            "message_model": "CLUSTERING",
        },
        "raw": "AP8=",
        "s": [1],
    }


def test_message_json_keeps_binary_bodies_whole() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}
    m = MessageExt("T", b"\xc3\xa9\xff", 0, props, 1, 7, 1234, 0, 0, 10, ("127.0.0.1", 5), 20, ("127.0.0.1", 6))
    doc = message_json(m)
    assert json.loads(json.dumps(doc)) == doc
    assert (doc["msg_id"], doc["tags"], doc["keys"], doc["queue_offset"]) == ("U1", "TagA", ["k1", "k2"], 7)
    assert doc["body"] == "é\ufffd"
    assert doc["body_base64"] == "w6n/"
    assert doc["store_host"] == "127.0.0.1:6"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["updateSubGroup", "-g", "G"], "exactly one of -b/--brokerAddr and -c/--clusterName"),
        (["updateSubGroup", "-g", "G", "-b", "a:1", "-c", "C"], "exactly one of -b"),
        (["updateSubGroup", "-g", "G", "-b", "a:1", "-s", "maybe"], "consumeEnable must be true or false"),
        (["updateSubGroup", "-g", "G", "-b", "a:1", "--attributes", "-e"], "is not +key=value"),
        (["deleteSubGroup", "-g", "G"], "exactly one of -b"),
        (["subGroupList"], "exactly one of -b"),
        (["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "2024-13-01#00:00:00:000"], "yyyy-MM-dd#HH:mm:ss:SSS"),
        (["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now", "-f", "nope"], "force must be true or false"),
        (["printMsg", "-t", "T", "-e", "tomorrow"], "'tomorrow' is not"),
        (["printMsg", "-t", "T", "-c", "no-such-charset"], "unknown charset"),
        (["consumerProgress"], "Missing option"),
        (["topicList", "--output", "yaml"], "'yaml' is not one of"),
    ],
)
def test_usage_errors_exit_2_before_any_call(args: list[str], message: str) -> None:
    result = runner.invoke(app, [*DEAD_NAMESRV, *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())
    assert "Traceback" not in result.output


def test_client_side_refusals_exit_1_with_code() -> None:
    bad_group = runner.invoke(app, [*DEAD_NAMESRV, "updateSubGroup", "-g", "bad group!", "-b", "127.0.0.1:1"], env=ENV)
    assert bad_group.exit_code == 1
    assert bad_group.stderr.startswith("INVALID_PARAMETER (29): The specified group: bad group!, contains illegal")
    bad_topic = runner.invoke(app, [*DEAD_NAMESRV, "deleteTopic", "-t", "bad topic", "-c", "C"], env=ENV)
    assert bad_topic.exit_code == 1
    assert bad_topic.stderr.startswith("INVALID_PARAMETER (29)")


def test_transport_failure_with_json_output_prints_no_json() -> None:
    result = runner.invoke(app, [*DEAD_NAMESRV, "clusterList", "--output", "json"], env=ENV)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("RPC_SEND_TO_CHANNEL_FAILED (-1004)")
