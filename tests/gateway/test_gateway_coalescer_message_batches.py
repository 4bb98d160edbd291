"""CoalescingBrokerTransport's MessageBatch key kind over in-memory brokers: concurrent MessageBatches for one
broker and topic become one SEND_BATCH_MESSAGE, each caller gets its own part of the answer; what is never merged
(a pinned queue, an unknown count, other brokers or topics, over the bounds); errors to every part; a caller that
gave up is dropped."""

from __future__ import annotations

import asyncio

from mq_client.producer.testing import ScriptedBrokerTransport, Step
from mq_common.batch_codec import encode_batch
from mq_common.errors import RemotingError
from mq_common.protocol import SendMessageBatchRequestHeader, SendMessageBatchResponseHeader
from mq_common.response_code import ResponseCode
from mq_gateway.coalescer import CoalescingBrokerTransport

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


def mb(
    tag: str, count: int, *, topic: str = "T", queue_id: int = 0, queue_free: bool = True, known: bool = True
) -> SendMessageBatchRequestHeader:
    body = encode_batch((f"{tag}{i}".encode(), f"N\x01{tag}{i}\x02", i) for i in range(count))
    return SendMessageBatchRequestHeader(
        producer_group="g",
        topic=topic,
        queue_id=queue_id,
        body=body,
        message_count=count if known else 0,
        queue_free=queue_free,
    )


def transport(inner: ScriptedBrokerTransport, **bounds: int) -> CoalescingBrokerTransport:
    return CoalescingBrokerTransport(
        inner,
        linger_ms=1.0,
        max_batch_bytes=1 << 20,
        max_batch_messages=64,
        max_message_batch_bytes=bounds.get("max_bytes", 1 << 20),
        max_message_batch_messages=bounds.get("max_messages", 1024),
    )


def bodies(inner: ScriptedBrokerTransport, call: int) -> list[bytes]:
    return [r.body for r in inner.calls[call].requests]


async def test_concurrent_batches_for_one_broker_and_topic_become_one_call() -> None:
    inner = ScriptedBrokerTransport()
    t = transport(inner)
    answers = await asyncio.gather(
        t.send_message_batch(A, mb("a", 3, queue_id=0), 1000),
        t.send_message_batch(A, mb("b", 2, queue_id=1), 1000),
        t.send_message_batch(A, mb("c", 4, queue_id=2), 1000),
    )
    assert len(inner.calls) == 1
    assert inner.calls[0].message_batch
    assert bodies(inner, 0) == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0", b"c1", b"c2", b"c3"]
    assert {r.queue_id for r in inner.calls[0].requests} == {0}  # the first part's queue
    assert [(a.queue_id, a.queue_offset, a.message_count) for a in answers] == [(0, 0, 3), (0, 3, 2), (0, 5, 4)]
    ids = [a.msg_id.split(",") for a in answers]
    assert [len(i) for i in ids] == [3, 2, 4]
    assert len({x for i in ids for x in i}) == 9
    assert all(a.code == ResponseCode.SUCCESS for a in answers)
    assert (t.stats.message_batches, t.stats.broker_calls, t.stats.messages) == (3, 1, 9)


async def test_what_is_never_merged() -> None:
    inner = ScriptedBrokerTransport()
    t = transport(inner)
    await asyncio.gather(
        t.send_message_batch(A, mb("a", 2), 1000),
        t.send_message_batch(A, mb("p", 2, queue_id=3, queue_free=False), 1000),  # a sharding key's queue
        t.send_message_batch(A, mb("u", 2, known=False), 1000),  # count not said
        t.send_message_batch(A, mb("o", 2, topic="U"), 1000),  # another topic
        t.send_message_batch(B, mb("b", 2), 1000),  # another broker
    )
    assert sorted(tuple(r.body for r in c.requests) for c in inner.calls) == [
        (b"a0", b"a1"),
        (b"b0", b"b1"),
        (b"o0", b"o1"),
        (b"p0", b"p1"),
        (b"u0", b"u1"),
    ]
    pinned = next(c for c in inner.calls if c.requests[0].body == b"p0")
    assert pinned.requests[0].queue_id == 3


async def test_bounds_close_a_merged_batch() -> None:
    inner = ScriptedBrokerTransport()
    t = transport(inner, max_messages=5)
    await asyncio.gather(*(t.send_message_batch(A, mb(tag, 2), 1000) for tag in "abcd"))
    assert sorted(len(c.requests) for c in inner.calls) == [4, 4]  # 2 + 2 fit, a third part would make 6
    size = len(mb("a", 2).body)
    by_bytes = ScriptedBrokerTransport()
    t = transport(by_bytes, max_bytes=2 * size)
    await asyncio.gather(*(t.send_message_batch(A, mb(tag, 2), 1000) for tag in "abc"))
    assert sorted(len(c.requests) for c in by_bytes.calls) == [2, 4]


async def test_a_refusal_or_a_transport_error_goes_to_every_part() -> None:
    refused = ScriptedBrokerTransport()
    refused.always(A, Step(code=ResponseCode.SERVICE_NOT_AVAILABLE))
    t = transport(refused)
    answers = await asyncio.gather(*(t.send_message_batch(A, mb(tag, 2), 1000) for tag in "ab"))
    assert len(refused.calls) == 1
    assert [a.code for a in answers] == [ResponseCode.SERVICE_NOT_AVAILABLE] * 2
    broken = ScriptedBrokerTransport()
    broken.always(A, Step(error=RemotingError("connection reset")))
    t = transport(broken)
    outcomes = await asyncio.gather(
        *(t.send_message_batch(A, mb(tag, 2), 1000) for tag in "ab"), return_exceptions=True
    )
    assert len(broken.calls) == 1
    assert all(isinstance(o, RemotingError) for o in outcomes)


class ShortAnswer(ScriptedBrokerTransport):
    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        answer = await super().send_message_batch(addr, request, timeout_ms)
        return SendMessageBatchResponseHeader(
            answer.code, "", answer.msg_id.rsplit(",", 1)[0], 0, 0, answer.message_count - 1
        )


async def test_an_answer_for_fewer_messages_fails_every_part() -> None:
    t = transport(ShortAnswer())
    outcomes = await asyncio.gather(
        *(t.send_message_batch(A, mb(tag, 2), 1000) for tag in "ab"), return_exceptions=True
    )
    assert all(isinstance(o, RemotingError) for o in outcomes)


async def test_a_caller_that_gave_up_before_the_call_is_dropped() -> None:
    inner = ScriptedBrokerTransport()
    inner.script(A, Step(latency_ms=0))
    t = transport(inner)
    first = asyncio.ensure_future(t.send_message_batch(A, mb("a", 1), 1000))
    await asyncio.sleep(0)  # first goes out alone (nothing in flight)
    await asyncio.sleep(0)
    gone = asyncio.ensure_future(t.send_message_batch(A, mb("g", 1), 1000))
    kept = asyncio.ensure_future(t.send_message_batch(A, mb("k", 1), 1000))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(first, kept)
    assert [b for c in inner.calls for b in (r.body for r in c.requests)] == [b"a0", b"k0"]
