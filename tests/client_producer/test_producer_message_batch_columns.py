"""DefaultMQProducer.send_message_batch: a MessageBatch by column (the gateway's SendBatch path) -> chunks, each one
SEND_BATCH_MESSAGE to one queue, retried whole; per-chunk MessageBatchResults; refusals send nothing."""

from __future__ import annotations

import pytest
from mq_client.producer import (
    Message,
    MessageBatch,
    MessageBatchResult,
    ProducerHooks,
    SendFailedError,
    SendMessageContext,
    SendResult,
)
from mq_client.producer.batch_transaction import BatchTransaction
from mq_client.producer.kernel import prepare_message
from mq_client.producer.message_batch import ChunkOutcome, chunk_ranges
from mq_client.producer.testing import (
    ScriptedBrokerTransport,
    Step,
)
from mq_common.batch_codec import BATCH_ITEM_OVERHEAD_BYTES
from mq_common.codec import decode_properties
from mq_common.errors import MQError, RemotingError
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode
from producer_testkit import ADDRS, A, B, make_producer  # noqa: F401


def stored(chunk: ChunkOutcome) -> MessageBatchResult:
    assert isinstance(chunk.result, MessageBatchResult), chunk.result
    return chunk.result


async def test_a_batch_goes_as_one_message_batch_with_a_result_per_message() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    batch = MessageBatch("T", [f"m{i}".encode() for i in range(10)], flags=list(range(10)))
    chunks = await producer.send_message_batch(batch)
    assert chunks is not None
    (chunk,) = chunks
    result = stored(chunk)
    assert (chunk.start, chunk.stop, len(result)) == (0, 10, 10)
    (call,) = transport.calls
    assert call.message_batch
    assert [r.body for r in call.requests] == list(batch.bodies)
    assert [r.flag for r in call.requests] == list(range(10))
    assert [decode_properties(r.properties)["UNIQ_KEY"] for r in call.requests] == list(result.msg_ids)
    assert len(set(result.msg_ids)) == 10
    assert all(decode_properties(r.properties)["WAIT"] == "true" for r in call.requests)
    per_message = result.results()
    assert [r.queue_offset for r in per_message] == list(range(10))
    assert {r.message_queue for r in per_message} == {result.message_queue}
    assert len({decode_offset_msg_id(r.offset_msg_id) for r in per_message}) == 10


async def test_properties_text_is_the_one_of_a_single_send() -> None:
    """Tags, keys, sharding key and user properties (a user UNIQ_KEY kept) give the text prepare_message gives."""
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    msgs = [
        Message("T", b"a", tags="TagA", keys=("k1", "k2"), sharding_key="s"),
        Message("T", b"b", properties={"color": "red", "UNIQ_KEY": "ABCDEF"}, sharding_key="s"),
        Message("T", b"c", sharding_key="s"),
    ]
    chunks = await producer.send_message_batch(MessageBatch.from_messages(msgs))
    assert chunks is not None
    result = stored(chunks[0])
    assert result.msg_ids[1] == "ABCDEF"
    sent = [r.properties for r in transport.calls[0].requests]
    for msg, text, msg_id in zip(msgs, sent, result.msg_ids, strict=True):
        props = dict(msg.properties)
        props.setdefault("UNIQ_KEY", msg_id)
        expected = prepare_message(
            Message(msg.topic, msg.body, msg.tags, msg.keys, props, 0, msg.sharding_key), producer.config
        )
        assert decode_properties(text) == decode_properties(expected.properties)
    assert decode_properties(sent[0])["KEYS"] == "k1 k2"


def test_chunk_ranges_by_bytes_and_by_count() -> None:
    assert chunk_ranges([10] * 7, 25, 100) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert chunk_ranges([10] * 7, 1000, 3) == [(0, 3), (3, 6), (6, 7)]
    assert chunk_ranges([50, 10], 25, 100) == [(0, 1), (1, 2)]  # a message over the limit still goes, alone
    assert chunk_ranges([10] * 3, 30, 3) == [(0, 3)]


async def test_chunks_by_encoded_bytes_and_by_count() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_message_size_bytes=1000, max_broker_batch_messages=3)
    chunks = await producer.send_message_batch(MessageBatch("T", [bytes(300)] * 7))  # ~370 bytes each: 2 per chunk
    assert chunks is not None
    assert [(c.start, c.stop) for c in chunks] == [(0, 2), (2, 4), (4, 6), (6, 7)]
    assert [len(c.requests) for c in transport.calls] == [2, 2, 2, 1]
    item = BATCH_ITEM_OVERHEAD_BYTES + 300 + len(transport.calls[0].requests[0].properties)
    assert 2 * item <= 1000 < 3 * item
    assert all(isinstance(c.result, MessageBatchResult) for c in chunks)
    assert len({m for c in chunks for m in stored(c).msg_ids}) == 7


async def test_a_failed_chunk_is_retried_whole_on_the_other_broker() -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(error=RemotingError("connection reset")))
    producer = await make_producer(transport)
    chunks = await producer.send_message_batch(MessageBatch("T", [f"m{i}".encode() for i in range(5)]))
    assert chunks is not None
    result = stored(chunks[0])
    assert [c.addr for c in transport.calls] == [A, B]
    assert result.message_queue.broker_name == "broker-b"
    first_try = [decode_properties(r.properties)["UNIQ_KEY"] for r in transport.calls[0].requests]
    assert first_try == list(result.msg_ids)  # the same messages, the same UNIQ_KEYs
    assert [r.body for r in transport.calls[1].requests] == [f"m{i}".encode() for i in range(5)]


async def test_a_chunk_that_keeps_failing_gets_one_error() -> None:
    busy = ScriptedBrokerTransport()
    busy.always(A, Step(code=ResponseCode.SYSTEM_BUSY))
    busy.always(B, Step(code=ResponseCode.SYSTEM_BUSY))
    producer = await make_producer(busy)
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a", b"b"]))
    assert chunks is not None
    (chunk,) = chunks
    assert isinstance(chunk.result, SendFailedError)
    assert len(busy.calls) == 3  # 1 + retry_times_when_send_failed, the whole batch each time
    refused = ScriptedBrokerTransport()
    refused.always(A, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    producer = await make_producer(refused)
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a", b"b"]))
    assert chunks is not None
    assert isinstance(chunks[0].result, MQError)
    assert chunks[0].result.code == ResponseCode.MESSAGE_ILLEGAL
    assert len(refused.calls) == 1  # not retriable


async def test_a_sharding_key_pins_every_chunk_to_its_queue_in_order() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_broker_batch_messages=4)
    bodies = [f"m{i}".encode() for i in range(10)]
    chunks = await producer.send_message_batch(MessageBatch("T", bodies, sharding_key="order-7"))
    assert chunks is not None
    assert len({stored(c).message_queue for c in chunks}) == 1
    assert [stored(c).queue_offset for c in chunks] == [0, 4, 8]
    assert [b.body for c in transport.calls for b in c.requests] == bodies
    assert all(decode_properties(b.properties)["__SHARDINGKEY"] == "order-7" for b in transport.calls[0].requests)


async def test_refused_batches_send_nothing() -> None:
    cases = {
        "delay level": MessageBatch("T", [b"a", b"b"], properties=[{}, {"DELAY": "3"}]),
        "a body to compress": MessageBatch("T", [b"a", bytes(5000)]),
        "an empty body": MessageBatch("T", [b"a", b""]),
        "a separator in a tag": MessageBatch("T", [b"a", b"b"], tags=["x", "y\x01"]),
        "a separator in a property": MessageBatch("T", [b"a"], properties=[{"k": "v\x02"}]),
        "a bad topic": MessageBatch("T T", [b"a"]),
        "no message": MessageBatch("T", []),
    }
    for name, batch in cases.items():
        transport = ScriptedBrokerTransport()
        producer = await make_producer(transport)
        assert await producer.send_message_batch(batch) is None, name
        assert not transport.calls, name
    off = ScriptedBrokerTransport()
    producer = await make_producer(off, message_batch_enable=False)
    assert await producer.send_message_batch(MessageBatch("T", [b"a"])) is None


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, bytes | None]] = []

    def check_forbidden(self, context: SendMessageContext) -> None:
        self.events.append(("check", context.msg_id, context.message.body))

    def send_message_before(self, context: SendMessageContext) -> None:
        self.events.append(("before", context.msg_id, context.message.body))

    def send_message_after(self, context: SendMessageContext, result: SendResult | None, error: MQError | None) -> None:
        self.events.append(("after", "ok" if result is not None else type(error).__name__, context.message.body))


async def test_hooks_see_each_attempt_of_a_chunk_as_one_send() -> None:
    recorder = Recorder()
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(error=RemotingError("connection reset")))
    producer = await make_producer(transport, ProducerHooks.of([recorder]), max_broker_batch_messages=3)
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a", b"b", b"c", b"d"]))
    assert chunks is not None
    ids = [stored(c).msg_ids[0] for c in chunks]
    assert sorted(e for e in recorder.events if e[0] == "after") == sorted(
        [("after", "RemotingError", b"a"), ("after", "ok", b"a"), ("after", "ok", b"d")]
    )
    assert {e[1] for e in recorder.events if e[0] == "before"} == set(ids)
    assert len([e for e in recorder.events if e[0] == "check"]) == 3  # 2 chunks, one retried


def test_message_batch_columns_must_match() -> None:
    with pytest.raises(ValueError, match="tags"):
        MessageBatch("T", [b"a", b"b"], tags=["x"])
    batch = MessageBatch("T", [b"a", b"b"], tags=["x", ""], keys=[(), ("k",)], flags=[0, 7], sharding_key="s")
    assert batch.message(1) == Message("T", b"b", "", ("k",), {}, 7, "s")


async def test_plain_messages_of_several_lengths_and_flags_encode_exactly() -> None:
    """No tags, keys or properties (one properties length): items decode back (TOTALSIZE checked) with their flag."""
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    bodies = [b"x" * n for n in (1, 7, 7, 300, 1)]
    for flags in ([], [3, 0, 9, 1, 2]):
        transport.calls.clear()
        chunks = await producer.send_message_batch(MessageBatch("T", bodies, flags=flags, sharding_key="k"))
        assert chunks is not None
        (call,) = transport.calls
        assert [r.body for r in call.requests] == bodies
        assert [r.flag for r in call.requests] == (flags or [0] * 5)
        props = [decode_properties(r.properties) for r in call.requests]
        assert [set(p) for p in props] == [{"__SHARDINGKEY", "WAIT", "UNIQ_KEY"}] * 5
        assert [p["UNIQ_KEY"] for p in props] == list(stored(chunks[0]).msg_ids)


async def test_a_half_message_batch_is_retried_on_its_own_queue_only() -> None:
    """A batch of one transaction's half messages never moves to another broker: a lost answer may mean it was
    stored, and a whole-transaction commit on both brokers would then deliver it twice (one broker's commit keeps
    one copy per UNIQ_KEY). A stored non-OK answer is final for it."""
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(error=RemotingError("connection reset")))
    producer = await make_producer(transport)
    half = BatchTransaction("PG_SPARK", "job-p0-a0")
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a", b"b"], transaction=half))
    assert chunks is not None
    result = stored(chunks[0])
    assert [c.addr for c in transport.calls] == [A, A]
    assert result.message_queue.broker_name == "broker-a"
    assert {c.requests[0].queue_id for c in transport.calls} == {result.message_queue.queue_id}
    not_ok = ScriptedBrokerTransport()
    not_ok.script(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    producer = await make_producer(not_ok, retry_another_broker_when_not_store_ok=True)
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a"], transaction=half))
    assert chunks is not None
    assert stored(chunks[0]).send_status.name == "FLUSH_DISK_TIMEOUT"
    assert len(not_ok.calls) == 1
    plain = await producer.send_message_batch(MessageBatch("T", [b"a"]))
    assert plain is not None
    assert stored(plain[0]).send_status.name == "SEND_OK"
