"""v2 SendMessage through an in-process gateway over a real cluster: what the broker stores (read back with
read_all: every mapped property), the response entries, and every refusal of a bad request storing nothing."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import timestamp_pb2
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

from tests.v2.conftest import Gateway, make_typed_topic, metadata, resource

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
MessageType = definition_pb2.MessageType
MIB = 1024 * 1024


def v2_message(
    topic: str, body: bytes = b"body", msg_id: str = "0102FC000000013D600B1777E800000001", **system: object
) -> definition_pb2.Message:
    props = definition_pb2.SystemProperties(message_id=msg_id, **system)  # type: ignore[arg-type]
    if not props.message_type:
        props.message_type = MessageType.FIFO if props.HasField("message_group") else MessageType.NORMAL
    return definition_pb2.Message(topic=resource(topic), body=body, system_properties=props)


async def send(gateway: Gateway, *messages: definition_pb2.Message) -> service_pb2.SendMessageResponse:
    request = service_pb2.SendMessageRequest(messages=messages)
    return await gateway.stub.SendMessage(request, metadata=metadata(), timeout=10)  # type: ignore[no-any-return]


async def test_a_message_is_stored_with_every_mapped_property(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v2_send_props")
    message = v2_message(
        topic,
        b"hello v2",
        tag="TagA",
        keys=["k1", "k2"],
        born_timestamp=timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_000_000),
        born_host="127.0.0.23",
        trace_context="00-trace-01",
        body_encoding=definition_pb2.IDENTITY,
    )
    message.user_properties.update({"color": "red", "size": "L"})
    answer = await send(gateway, message)
    assert answer.status.code == Code.OK, answer.status.message
    (entry,) = answer.entries
    assert entry.status.code == Code.OK
    assert entry.message_id == entry.transaction_id == "0102FC000000013D600B1777E800000001"
    ((_queue, stored),) = await read_all(cluster.namesrv_addr, topic)
    assert stored.body == b"hello v2"
    assert entry.offset == stored.queue_offset
    props = stored.properties
    assert props["UNIQ_KEY"] == entry.message_id
    assert props["TAGS"] == "TagA"
    assert props["KEYS"] == "k1 k2"
    assert (props["color"], props["size"]) == ("red", "L")
    assert props["BORN_TIMESTAMP"] == "1700000000123"
    assert props["__BORNHOST"] == "127.0.0.23"
    assert props["TRACE_CONTEXT"] == "00-trace-01"
    assert props["PGROUP"] == topic
    assert "__SHARDINGKEY" not in props


async def test_fifo_gzip_and_several_messages(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_typed_topic(cluster, "v2_send_fifo", "FIFO")
    first = v2_message(topic, gzip.compress(b"inflated"), "ID1", message_group="g1", body_encoding=definition_pb2.GZIP)
    second = v2_message(topic, b"two", "ID2", message_group="g1")
    answer = await send(gateway, first, second)
    assert answer.status.code == Code.OK, answer.status.message
    assert [e.message_id for e in answer.entries] == ["ID1", "ID2"]
    stored = [m for _q, m in await read_all(cluster.namesrv_addr, topic)]
    assert sorted(m.body for m in stored) == [b"inflated", b"two"]
    assert {m.properties["__SHARDINGKEY"] for m in stored} == {"g1"}
    assert len({m.queue_id for m in stored}) == 1  # one group, one queue
    # the born host falls back to the caller's address
    assert {m.properties["__BORNHOST"] for m in stored} == {"127.0.0.1"}


def _props(count: int, value_bytes: int = 1) -> dict[str, str]:
    return {f"p{i}": "v" * value_bytes for i in range(count)}


def _with_props(props: dict[str, str]) -> Callable[[str], definition_pb2.Message]:
    def make(topic: str) -> definition_pb2.Message:
        message = v2_message(topic)
        message.user_properties.update(props)
        return message

    return make


BAD_REQUESTS: dict[str, tuple[Callable[[str], list[definition_pb2.Message]], int]] = {
    "empty body": (lambda t: [v2_message(t, b"")], Code.MESSAGE_BODY_EMPTY),
    "body 4 MiB + 1": (lambda t: [v2_message(t, b"x" * (4 * MIB + 1))], Code.MESSAGE_BODY_TOO_LARGE),
    "gzip inflating over 4 MiB": (
        lambda t: [v2_message(t, gzip.compress(b"x" * (4 * MIB + 1)), body_encoding=definition_pb2.GZIP)],
        Code.MESSAGE_BODY_TOO_LARGE,
    ),
    "gzip that does not inflate": (
        lambda t: [v2_message(t, b"not gzip", body_encoding=definition_pb2.GZIP)],
        Code.MESSAGE_CORRUPTED,
    ),
    "129 user properties": (lambda t: [_with_props(_props(129))(t)], Code.MESSAGE_PROPERTIES_TOO_LARGE),
    "user properties over 16 KiB": (
        lambda t: [_with_props(_props(2, 8 * 1024))(t)],
        Code.MESSAGE_PROPERTIES_TOO_LARGE,
    ),
    "reserved property key": (lambda t: [_with_props({"UNIQ_KEY": "x"})(t)], Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    "reserved 5.x property key": (
        lambda t: [_with_props({"__BORNHOST": "x"})(t)],
        Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
    ),
    "tag with |": (lambda t: [v2_message(t, tag="a|b")], Code.ILLEGAL_MESSAGE_TAG),
    "blank tag": (lambda t: [v2_message(t, tag=" ")], Code.ILLEGAL_MESSAGE_TAG),
    "tag with a control character": (lambda t: [v2_message(t, tag="a\x01")], Code.ILLEGAL_MESSAGE_TAG),
    "blank key": (lambda t: [v2_message(t, keys=["ok", " "])], Code.ILLEGAL_MESSAGE_KEY),
    "key with a control character": (lambda t: [v2_message(t, keys=["a\x02"])], Code.ILLEGAL_MESSAGE_KEY),
    "message group of 64 bytes": (lambda t: [v2_message(t, message_group="g" * 64)], Code.ILLEGAL_MESSAGE_GROUP),
    "blank message id": (lambda t: [v2_message(t, msg_id=" ")], Code.ILLEGAL_MESSAGE_ID),
    "no messages": (lambda t: [], Code.MESSAGE_CORRUPTED),
    "mixed topics": (lambda t: [v2_message(t), v2_message(t + "_other")], Code.MESSAGE_CORRUPTED),
    "illegal topic": (lambda t: [v2_message("bad topic!")], Code.ILLEGAL_TOPIC),
    "unknown topic": (lambda t: [v2_message(t + "_missing")], Code.TOPIC_NOT_FOUND),
    "FIFO type without a group": (
        lambda t: [v2_message(t, message_type=MessageType.FIFO)],
        Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    ),
    "NORMAL type with a group": (
        lambda t: [v2_message(t, message_group="g", message_type=MessageType.NORMAL)],
        Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    ),
    "DELAY beyond the max delay time": (
        lambda t: [v2_message(t, delivery_timestamp=timestamp_pb2.Timestamp(seconds=2_000_000_000))],
        Code.ILLEGAL_DELIVERY_TIME,
    ),
    "TRANSACTION with a delivery time": (
        lambda t: [
            v2_message(
                t,
                message_type=MessageType.TRANSACTION,
                delivery_timestamp=timestamp_pb2.Timestamp(seconds=int(time.time()) + 60),
            )
        ],
        Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    ),
    "a good message beside a bad one": (lambda t: [v2_message(t), v2_message(t, b"")], Code.MESSAGE_BODY_EMPTY),
}


@pytest.fixture(scope="module")
def bad_request_topic() -> list[str]:
    return []


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
async def test_a_bad_request_is_refused_and_stores_nothing(
    case: str, gateway: Gateway, cluster: LocalCluster, bad_request_topic: list[str]
) -> None:
    if not bad_request_topic:
        # MIXED: every type passes the type check (tests/v2/test_v2_message_types.py has its refusals)
        bad_request_topic.append(await make_typed_topic(cluster, "v2_send_refused", "MIXED", queues=1))
    topic = bad_request_topic[0]
    build, code = BAD_REQUESTS[case]
    messages = build(topic)
    answer = await send(gateway, *messages)
    assert answer.status.code == code, answer.status.message
    assert answer.status.message
    assert len(answer.entries) == len(messages)
    assert all(e.status.code == code for e in answer.entries)
    assert await read_all(cluster.namesrv_addr, topic) == []


async def test_a_body_of_exactly_4_mib_is_stored(gateway: Gateway, cluster: LocalCluster) -> None:
    """Above gRPC's default 4 MiB receive limit: the server takes up to 130 MiB, the handler enforces the body
    limit itself."""
    topic = await make_topic(cluster, "v2_send_4mib", queues=1)
    body = bytes(range(256)) * (4 * MIB // 256)
    answer = await send(gateway, v2_message(topic, body))
    assert answer.status.code == Code.OK, answer.status.message
    ((_queue, stored),) = await read_all(cluster.namesrv_addr, topic)
    assert stored.body == body
