"""QueryMessage, QueryMessageByUniqueKey and ViewMessageById over gRPC against an in-process broker (tiny index
files), plus the client adapter (BrokerClient) on the same broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import RunningBrokers, stream_send
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties, iter_messages
from mq_common.errors import MQBrokerError
from mq_common.message_id import create_offset_msg_id, decode_offset_msg_id
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub

TOPIC = "QueryTopic"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    running = RunningBrokers()
    try:
        yield await running.start(tmp_path / "store", max_hash_slot_num=16, max_index_num=16)
    finally:
        await running.stop_all()


async def send(stub: Stub, body: bytes, keys: str, uniq: str) -> broker_pb2.SendMessageResponse:
    props = encode_properties({"KEYS": keys, "UNIQ_KEY": uniq, "TAGS": "TagA"})
    resp = await stream_send(
        stub, broker_pb2.SendMessageRequest(producer_group="PG", topic=TOPIC, queue_id=0, properties=props, body=body)
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def test_query_by_key_uniq_key_and_offset_id(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    sent = [await send(stub, f"m{i}".encode(), f"order-{i % 3} all", f"UNIQ{i:04d}") for i in range(10)]

    resp = await stub.QueryMessage(broker_pb2.QueryMessageRequest(topic=TOPIC, key="order-1"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert [m.body for m in iter_messages(resp.message_bytes)] == [b"m7", b"m4", b"m1"]
    assert resp.message_count == 3
    assert resp.index_last_update_phy_offset == decode_offset_msg_id(sent[-1].msg_id)[2]

    few = await stub.QueryMessage(broker_pb2.QueryMessageRequest(topic=TOPIC, key="all", max_num=2))
    assert [m.body for m in iter_messages(few.message_bytes)] == [b"m9", b"m8"]

    late = await stub.QueryMessage(
        broker_pb2.QueryMessageRequest(topic=TOPIC, key="all", begin_timestamp_ms=2**62, end_timestamp_ms=2**62 + 1)
    )
    assert (late.code, late.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    )

    uniq = await stub.QueryMessageByUniqueKey(
        broker_pb2.QueryMessageByUniqueKeyRequest(topic=TOPIC, uniq_key="UNIQ0005")
    )
    assert uniq.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_messages(uniq.message_bytes)] == [b"m5"]
    missing = await stub.QueryMessageByUniqueKey(broker_pb2.QueryMessageByUniqueKeyRequest(topic=TOPIC, uniq_key="X"))
    assert missing.code == ResponseCode.QUERY_NOT_FOUND

    view = await stub.ViewMessageById(broker_pb2.ViewMessageByIdRequest(offset_msg_id=sent[6].msg_id))
    assert view.code == ResponseCode.SUCCESS, view.remark
    [viewed] = iter_messages(view.message_bytes)
    assert (viewed.body, viewed.offset_msg_id) == (b"m6", sent[6].msg_id)

    host, port, offset = decode_offset_msg_id(sent[6].msg_id)
    inside = await stub.ViewMessageById(
        broker_pb2.ViewMessageByIdRequest(offset_msg_id=create_offset_msg_id(host, port, offset + 3))
    )
    assert (inside.code, inside.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        f"can not find message by the offset, {offset + 3}",
    )
    other = await stub.ViewMessageById(
        broker_pb2.ViewMessageByIdRequest(offset_msg_id=create_offset_msg_id("127.1.2.3", port, offset))
    )
    assert other.code == ResponseCode.INVALID_PARAMETER
    assert "was stored by 127.1.2.3:" in other.remark
    assert controller.broker_addr in other.remark


@pytest.mark.parametrize(
    ("request_", "remark_part"),
    [
        (broker_pb2.QueryMessageRequest(topic="", key="k"), "topic is blank"),
        (broker_pb2.QueryMessageRequest(topic="bad topic!", key="k"), "illegal characters"),
        (broker_pb2.QueryMessageRequest(topic=TOPIC, key=""), "key is empty"),
        (broker_pb2.QueryMessageRequest(topic=TOPIC, key="k", max_num=-1), "maxNum[-1]"),
        (broker_pb2.QueryMessageRequest(topic=TOPIC, key="k", begin_timestamp_ms=5, end_timestamp_ms=4), "time range"),
    ],
)
async def test_bad_query_input_is_invalid_parameter(
    broker: tuple[BrokerController, Stub], request_: broker_pb2.QueryMessageRequest, remark_part: str
) -> None:
    _controller, stub = broker
    resp = await stub.QueryMessage(request_)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert remark_part in resp.remark


async def test_bad_ids_and_uniq_keys_are_invalid_parameter(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    for bad in ("", "XYZ", "0A" * 10):
        resp = await stub.ViewMessageById(broker_pb2.ViewMessageByIdRequest(offset_msg_id=bad))
        assert resp.code == ResponseCode.INVALID_PARAMETER, bad
        assert "illegal offset msg id" in resp.remark
    resp_u = await stub.QueryMessageByUniqueKey(broker_pb2.QueryMessageByUniqueKeyRequest(topic=TOPIC, uniq_key=""))
    assert resp_u.code == ResponseCode.INVALID_PARAMETER


async def test_broker_client_query_calls(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    sent = [await send(stub, f"c{i}".encode(), "shared", f"CUNIQ{i}") for i in range(3)]
    addr = controller.broker_addr
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        result = await client.query_message(addr, TOPIC, "shared", max_num=10)
        assert [m.body for m in result.messages] == [b"c2", b"c1", b"c0"]
        assert result.index_last_update_timestamp_ms > 0
        assert [m.uniq_key for m in await client.query_message_by_unique_key(addr, TOPIC, "CUNIQ1")] == ["CUNIQ1"]
        assert (await client.view_message_by_id(addr, sent[2].msg_id)).body == b"c2"
        with pytest.raises(MQBrokerError) as not_found:
            await client.query_message(addr, TOPIC, "nothing")
        assert not_found.value.code == ResponseCode.QUERY_NOT_FOUND
        with pytest.raises(MQBrokerError) as invalid:
            await client.view_message_by_id(addr, "nonsense")
        assert invalid.value.code == ResponseCode.INVALID_PARAMETER
    finally:
        await pool.close()
