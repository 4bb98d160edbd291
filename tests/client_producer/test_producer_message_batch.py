"""DefaultMQProducer#send_batch as RocketMQ's MessageBatch: one topic -> chunks, each one SEND_BATCH_MESSAGE to one
queue, retried whole on another broker, per-message results; and the batches that must stay message by message."""

from __future__ import annotations

from mq_client.producer import Message, SendFailedError, SendResult
from mq_client.producer.testing import (
    ScriptedBrokerTransport,
    Step,
)
from mq_common.codec import decode_properties
from mq_common.errors import MessageIllegalError, MQBrokerError, RemotingError
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode
from producer_testkit import A, B, make_producer


def ok(outcome: object) -> SendResult:
    assert isinstance(outcome, SendResult), outcome
    return outcome


async def test_one_topic_goes_as_one_message_batch_to_one_queue() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    msgs = [Message("T", f"m{i}".encode(), tags="TagA", keys=(f"k{i}",)) for i in range(10)]
    results = [ok(r) for r in await producer.send_batch(msgs)]
    (call,) = transport.calls
    assert call.message_batch
    assert [r.body for r in call.requests] == [m.body for m in msgs]
    queues = {r.message_queue for r in results}
    assert len(queues) == 1
    assert [r.queue_offset for r in results] == list(range(10))
    uniq = [decode_properties(r.properties)["UNIQ_KEY"] for r in call.requests]
    assert uniq == [r.msg_id for r in results]
    assert len(set(uniq)) == 10
    assert all(decode_properties(r.properties)["TAGS"] == "TagA" for r in call.requests)
    assert len({decode_offset_msg_id(r.offset_msg_id) for r in results}) == 10
    again = [ok(r) for r in await producer.send_batch(msgs[:3])]
    assert again[0].message_queue != results[0].message_queue  # the next batch takes the next queue


async def test_chunks_by_encoded_bytes_and_by_count() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_message_size_bytes=1000, max_broker_batch_messages=3)
    msgs = [Message("T", bytes(300)) for _ in range(7)]  # ~370 encoded bytes each: 2 per chunk by bytes
    outcomes = await producer.send_batch(msgs)
    assert all(isinstance(o, SendResult) for o in outcomes)
    assert [len(c.requests) for c in transport.calls] == [2, 2, 2, 1]
    small = ScriptedBrokerTransport()
    producer = await make_producer(small, max_broker_batch_messages=3)
    await producer.send_batch([Message("T", b"x") for _ in range(7)])
    assert sorted(len(c.requests) for c in small.calls) == [1, 3, 3]


async def test_a_failed_batch_is_retried_whole_on_the_other_broker() -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(error=RemotingError("connection reset")))
    producer = await make_producer(transport)
    results = [ok(r) for r in await producer.send_batch([Message("T", f"m{i}".encode()) for i in range(5)])]
    assert [c.addr for c in transport.calls] == [A, B]
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    assert [r.queue_offset for r in results] == list(range(5))
    first_ids = [decode_properties(r.properties)["UNIQ_KEY"] for r in transport.calls[0].requests]
    assert first_ids == [r.msg_id for r in results]  # the same messages, the same UNIQ_KEYs


async def test_broker_codes_decide_for_the_whole_batch() -> None:
    refused = ScriptedBrokerTransport()
    refused.always(A, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    producer = await make_producer(refused)
    outcomes = await producer.send_batch([Message("T", b"a"), Message("T", b"b")])
    assert all(isinstance(o, MQBrokerError) and o.code == ResponseCode.MESSAGE_ILLEGAL for o in outcomes)
    assert len(refused.calls) == 1  # not retriable
    busy = ScriptedBrokerTransport()
    busy.always(A, Step(code=ResponseCode.SYSTEM_BUSY))
    busy.always(B, Step(code=ResponseCode.SYSTEM_BUSY))
    producer = await make_producer(busy)
    outcomes = await producer.send_batch([Message("T", b"a"), Message("T", b"b")])
    assert all(isinstance(o, SendFailedError) for o in outcomes)
    assert len(busy.calls) == 3  # 1 + retry_times_when_send_failed, the whole batch each time


async def test_a_sharding_key_pins_every_chunk_to_its_queue_in_order() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_broker_batch_messages=4)
    msgs = [Message("T", f"m{i}".encode(), sharding_key="order-7") for i in range(10)]
    results = [ok(r) for r in await producer.send_batch(msgs)]
    assert len({r.message_queue for r in results}) == 1
    assert [r.queue_offset for r in results] == list(range(10))
    assert [b.body for c in transport.calls for b in c.requests] == [m.body for m in msgs]


async def test_invalid_messages_get_their_error_and_the_rest_is_sent() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    outcomes = await producer.send_batch([Message("T", b"a"), Message("T", b""), Message("T", b"c")])
    assert isinstance(outcomes[1], MessageIllegalError)
    assert [ok(outcomes[0]).queue_offset, ok(outcomes[2]).queue_offset] == [0, 1]
    (call,) = transport.calls
    assert call.message_batch
    assert [r.body for r in call.requests] == [b"a", b"c"]


async def test_batches_that_stay_message_by_message() -> None:
    cases = {
        "two topics": [Message("T", b"a"), Message("U", b"b")],
        "delay level": [Message("T", b"a"), Message("T", b"b", properties={"DELAY": "3"})],
        "a body to compress": [Message("T", b"a"), Message("T", bytes(5000))],
    }
    for name, msgs in cases.items():
        transport = ScriptedBrokerTransport()
        producer = await make_producer(transport)
        await producer.send_batch(msgs)
        assert transport.calls, name
        assert not any(c.message_batch for c in transport.calls), name
    off = ScriptedBrokerTransport()
    producer = await make_producer(off, message_batch_enable=False)
    await producer.send_batch([Message("T", b"a"), Message("T", b"b")])
    assert not any(c.message_batch for c in off.calls)
