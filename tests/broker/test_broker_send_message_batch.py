"""SEND_BATCH_MESSAGE (a SendStream message_batch frame) against an in-process broker over gRPC: one MessageBatch
body for one queue, stored whole with consecutive queue offsets, readable per message (pull, UNIQ_KEY, offset
msg id), and refused whole on bad input. Tiny CommitLog files (64 KiB) make batches meet file ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import stream_send_message_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.batch_codec import decode_batch, encode_batch, encode_batch_item
from mq_common.codec import MessageDecodeError, encode_properties, iter_messages
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub

TOPIC = "BatchTopic"


def batch_request(
    body: bytes, queue_id: int = 1, topic: str = TOPIC, **props: str
) -> broker_pb2.SendMessageBatchRequest:
    return broker_pb2.SendMessageBatchRequest(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        born_timestamp_ms=1_700_000_000_000,
        properties=encode_properties(props),
        body=body,
    )


def items(count: int, first: int = 0, size: int = 100) -> bytes:
    return encode_batch(
        (
            f"m{i}".encode().ljust(size, b"."),
            encode_properties({"UNIQ_KEY": f"U{i:05d}", "TAGS": "TagA" if i % 2 else "TagB", "KEYS": f"k{i} all"}),
            i,
        )
        for i in range(first, first + count)
    )


async def pull_queue(
    stub: Stub, queue_id: int, subscription: str = "*"
) -> list[tuple[int, bytes, dict[str, str], int]]:
    out: list[tuple[int, bytes, dict[str, str], int]] = []
    offset = 0
    for _ in range(200):
        resp = await stub.PullMessage(
            broker_pb2.PullMessageRequest(
                consumer_group="CG",
                topic=TOPIC,
                queue_id=queue_id,
                queue_offset=offset,
                max_msg_nums=32,
                subscription=subscription,
            )
        )
        if resp.status != broker_pb2.PULL_STATUS_FOUND:
            break
        out.extend((m.queue_offset, m.body, m.properties, m.flag) for m in iter_messages(resp.message_bytes))
        offset = resp.next_begin_offset
    return out


async def test_batch_is_stored_in_order_with_consecutive_offsets(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    sent: list[broker_pb2.SendMessageBatchResponse] = []
    for first in range(0, 1000, 100):  # 100 x ~170 B per batch: the 64 KiB files roll several times
        resp = await stream_send_message_batch(stub, batch_request(items(100, first), WAIT="true"))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert (resp.queue_id, resp.queue_offset, resp.message_count) == (1, first, 100)
        sent.append(resp)
    stored = await pull_queue(stub, 1)
    assert [o for o, *_ in stored] == list(range(1000))
    assert [b for _, b, _, _ in stored] == [f"m{i}".encode().ljust(100, b".") for i in range(1000)]
    assert all(
        p["UNIQ_KEY"] == f"U{i:05d}" and p["CLUSTER"] == "DefaultCluster" for i, (_, _, p, _) in enumerate(stored)
    )
    assert all(p["WAIT"] == "true" for _, _, p, _ in stored)  # the batch's properties go to every message
    assert [f for *_, f in stored] == list(range(1000))
    # offset msg ids: one per message, in order, each naming its record
    ids = [i for r in sent for i in r.msg_id.split(",")]
    assert len(ids) == 1000
    offsets = [decode_offset_msg_id(i) for i in ids]
    assert all((host, port) == ("127.0.0.1", controller.port) for host, port, _ in offsets)
    assert [o for *_, o in offsets] == sorted({o for *_, o in offsets})
    view = await stub.ViewMessageById(broker_pb2.ViewMessageByIdRequest(offset_msg_id=ids[537]))
    (viewed,) = iter_messages(view.message_bytes)
    assert (viewed.body[:4], viewed.queue_offset) == (b"m537", 537)
    tagged = await pull_queue(stub, 1, "TagA")
    assert [o for o, *_ in tagged] == list(range(1, 1000, 2))
    by_key = await stub.QueryMessageByUniqueKey(
        broker_pb2.QueryMessageByUniqueKeyRequest(topic=TOPIC, uniq_key="U00777")
    )
    assert [m.body[:4] for m in iter_messages(by_key.message_bytes)] == [b"m777"]
    by_word = await stub.QueryMessage(
        broker_pb2.QueryMessageRequest(topic=TOPIC, key="k42", max_num=5, begin_timestamp_ms=0, end_timestamp_ms=2**62)
    )
    assert [m.body[:3] for m in iter_messages(by_word.message_bytes)] == [b"m42"]


async def test_bad_batches_are_refused_whole(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    good = items(3)
    cases = {
        "truncated": (batch_request(good[:-5]), ResponseCode.MESSAGE_ILLEGAL),
        "empty": (batch_request(b""), ResponseCode.MESSAGE_ILLEGAL),
        "retry topic": (batch_request(good, topic="%RETRY%G"), ResponseCode.NO_PERMISSION),  # clients never write them
        "bad topic": (batch_request(good, topic="a b"), ResponseCode.INVALID_PARAMETER),
        "queue id": (batch_request(good, queue_id=99), ResponseCode.INVALID_PARAMETER),
        "too large": (
            batch_request(encode_batch_item(b"x" * (controller.settings.max_message_size_bytes + 1), "")),
            ResponseCode.MESSAGE_ILLEGAL,
        ),
    }
    for name, (request, code) in cases.items():
        resp = await stream_send_message_batch(stub, request)
        assert resp.code == code, (name, resp.remark)
        assert resp.remark, name
        assert resp.message_count == 0, name
    props = encode_properties({"P": "v" * 20_000})
    big_props = encode_batch([(b"a", props, 0)])  # with the batch's own 20,000 bytes: over 32,767
    resp = await stream_send_message_batch(stub, batch_request(big_props, EXTRA="w" * 20_000))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL, resp.remark
    assert await pull_queue(stub, 1) == []  # nothing of any refused batch was stored
    ok = await stream_send_message_batch(stub, batch_request(good))
    assert (ok.code, ok.queue_offset, ok.message_count) == (ResponseCode.SUCCESS, 0, 3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=300),
            st.dictionaries(st.text("abcXYZ_", min_size=1, max_size=8), st.text(max_size=20), max_size=3),
            st.integers(-(2**31), 2**31 - 1),
        ),
        max_size=20,
    )
)
def test_batch_codec_round_trip(messages: list[tuple[bytes, dict[str, str], int]]) -> None:
    encoded = encode_batch((body, encode_properties(props), flag) for body, props, flag in messages)
    decoded = decode_batch(encoded)
    assert [(d.body, d.properties, d.flag) for d in decoded] == [
        (body, encode_properties(props), flag) for body, props, flag in messages
    ]
    if encoded:
        with pytest.raises(MessageDecodeError):
            decode_batch(encoded[:-1])
