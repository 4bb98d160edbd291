"""DefaultMQProducer#send_batch, message by message (``message_batch_enable`` off; the MessageBatch path has
test_producer_message_batch.py): per-message queues, one RPC per broker, retries of the failed messages only,
sharding keys pinned to their queue, per-message errors, chunking, one budget."""

from __future__ import annotations

import pytest
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendFailedError, SendResult
from mq_client.producer.testing import (
    FakeClock,
    FixedStartRandom,
    InMemoryNameServer,
    ScriptedBrokerTransport,
    Step,
    make_route,
)
from mq_common.codec import decode_properties
from mq_common.errors import MessageIllegalError, MQBrokerError, RemotingError, TopicNotExistError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


async def make_producer(
    transport: ScriptedBrokerTransport, *, start_index: int = 0, clock: FakeClock | None = None, **config: object
) -> DefaultMQProducer:
    ns = InMemoryNameServer(
        {
            "T": make_route({"broker-a": 4, "broker-b": 4}, addrs={"broker-a": A, "broker-b": B}),
            "U": make_route({"broker-b": 2}, addrs={"broker-b": B}),
        }
    )
    producer = DefaultMQProducer(
        ProducerConfig("batch_group", message_batch_enable=False, **config),  # type: ignore[arg-type]
        ns,
        transport,
        rng=FixedStartRandom(start_index),
        clock_ms=clock or FakeClock(),
    )
    await producer.start()
    return producer


def ok(outcome: object) -> SendResult:
    assert isinstance(outcome, SendResult), outcome
    return outcome


async def test_one_rpc_per_broker_results_in_order() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, start_index=0)
    msgs = [Message("T", f"m{i}".encode()) for i in range(8)]
    results = [ok(r) for r in await producer.send_batch(msgs)]
    # round robin indexes 1..8 over [a0 a1 a2 a3 b0 b1 b2 b3]
    assert [(r.message_queue.broker_name[-1], r.message_queue.queue_id) for r in results] == [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("b", 0),
        ("b", 1),
        ("b", 2),
        ("b", 3),
        ("a", 0),
    ]
    assert sorted((c.addr, len(c.requests), c.batch) for c in transport.calls) == [(A, 4, True), (B, 4, True)]
    call_a = next(c for c in transport.calls if c.addr == A)
    assert [r.body for r in call_a.requests] == [b"m0", b"m1", b"m2", b"m7"]  # message order kept per broker
    ids = [decode_properties(r.properties)["UNIQ_KEY"] for c in transport.calls for r in c.requests]
    assert sorted(ids) == sorted(r.msg_id for r in results)
    assert len(set(ids)) == 8


async def test_mixed_topics_and_invalid_messages() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    outcomes = await producer.send_batch(
        [Message("T", b"1"), Message("U", b"2"), Message("T", b""), Message("Nope", b"4"), Message("", b"5")]
    )
    assert ok(outcomes[0]).message_queue.topic == "T"
    assert ok(outcomes[1]).message_queue == MessageQueue("U", "broker-b", 1)
    assert isinstance(outcomes[2], MessageIllegalError)
    assert outcomes[2].remark == "the message body length is zero"
    assert isinstance(outcomes[3], TopicNotExistError)
    assert outcomes[3].remark == "No route info of this topic: Nope"
    assert isinstance(outcomes[4], MessageIllegalError)


async def test_sharding_keys_pin_queues_and_keep_order() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    msgs = [Message("T", f"{key}-{i}".encode(), sharding_key=key) for i in range(3) for key in ("order-1001", "x")]
    results = [ok(r) for r in await producer.send_batch(msgs)]
    by_key: dict[str, set[MessageQueue]] = {}
    for msg, res in zip(msgs, results, strict=True):
        by_key.setdefault(msg.sharding_key, set()).add(res.message_queue)
    assert by_key["order-1001"] == {MessageQueue("T", "broker-b", 3)}
    assert len(by_key["x"]) == 1
    stored = [r.body for _, r in transport.stored if decode_properties(r.properties)["__SHARDINGKEY"] == "order-1001"]
    assert stored == [b"order-1001-0", b"order-1001-1", b"order-1001-2"]
    offsets = [r.queue_offset for m, r in zip(msgs, results, strict=True) if m.sharding_key == "order-1001"]
    assert offsets == [0, 1, 2]


async def test_failed_broker_messages_are_retried_on_the_other_broker() -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(error=RemotingError("connection reset")))
    producer = await make_producer(transport, start_index=0)
    results = [ok(r) for r in await producer.send_batch([Message("T", f"{i}".encode()) for i in range(4)])]
    # attempt 1: indexes 1..4 -> a1 a2 a3 b0; broker-a fails for its 3 messages;
    # attempt 2, avoiding broker-a: 5 b1, 6 b2, 7 b3
    assert [r.message_queue.broker_name for r in results] == ["broker-b"] * 4
    assert [(c.addr, len(c.requests)) for c in transport.calls] == [(A, 3), (B, 1), (B, 3)]
    assert [r.message_queue.queue_id for r in results] == [1, 2, 3, 0]


async def test_per_message_codes() -> None:
    transport = ScriptedBrokerTransport()
    busy_once = {"1"}

    def code_for(req: object) -> int:
        body = req.body.decode()  # type: ignore[attr-defined]
        if body == "0":
            return ResponseCode.MESSAGE_ILLEGAL
        if body in busy_once:
            busy_once.discard(body)
            return ResponseCode.SYSTEM_BUSY
        return ResponseCode.SUCCESS

    transport.always(A, Step(code_for=code_for))
    transport.always(B, Step(code_for=code_for))
    producer = await make_producer(transport, start_index=0)
    outcomes = await producer.send_batch([Message("T", f"{i}".encode()) for i in range(3)])
    assert isinstance(outcomes[0], MQBrokerError)
    assert outcomes[0].code == ResponseCode.MESSAGE_ILLEGAL
    assert ok(outcomes[1]).message_queue.broker_name == "broker-b"  # busy on broker-a, retried elsewhere
    assert ok(outcomes[2]).message_queue.broker_name == "broker-a"
    assert len(transport.calls) == 2


async def test_sharded_messages_retry_on_their_queue_until_attempts_run_out() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(B, Step(error=RemotingError("down")))
    producer = await make_producer(transport)
    outcomes = await producer.send_batch([Message("T", b"k", sharding_key="order-1001"), Message("T", b"free")])
    err = outcomes[0]
    assert isinstance(err, SendFailedError)
    assert err.brokers_sent == ("broker-b",) * 3
    assert err.remark.startswith("Send [3] times, still failed")
    assert err.code == ResponseCode.RPC_SEND_TO_CHANNEL_FAILED
    assert ok(outcomes[1]).message_queue.broker_name == "broker-a"
    assert {r.queue_id for c in transport.calls if c.addr == B for r in c.requests if r.body == b"k"} == {3}


async def test_chunks_per_broker() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_broker_batch_messages=3)
    outcomes = await producer.send_batch([Message("U", f"{i}".encode()) for i in range(7)])
    assert all(isinstance(o, SendResult) for o in outcomes)
    assert [len(c.requests) for c in transport.calls] == [3, 3, 1]
    assert [r.body for c in transport.calls for r in c.requests] == [f"{i}".encode() for i in range(7)]


async def test_chunks_by_bytes() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport, max_broker_batch_bytes=2500, compress_msg_body_over_howmuch_bytes=10**6)
    await producer.send_batch([Message("U", b"x" * 1000) for _ in range(5)])
    assert [len(c.requests) for c in transport.calls] == [2, 2, 1]


async def test_batch_budget_is_shared() -> None:
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    fail = Step(error=RemotingError("reset"), latency_ms=1500)
    transport.always(A, fail)
    transport.always(B, fail)
    producer = await make_producer(transport, clock=clock, retry_times_when_send_failed=9)
    outcomes = await producer.send_batch([Message("U", b"x")], timeout_ms=4000)
    err = outcomes[0]
    assert isinstance(err, SendFailedError)
    assert [c.timeout_ms for c in transport.calls] == [4000, 2500, 1000]
    assert err.budget_spent
    assert err.code == ResponseCode.RPC_TIME_OUT


async def test_empty_batch() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    assert await producer.send_batch([]) == []
    assert transport.calls == []


@pytest.mark.parametrize("retry_another", [False, True])
async def test_not_store_ok_in_batch(retry_another: bool) -> None:
    transport = ScriptedBrokerTransport()
    transport.script(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    producer = await make_producer(transport, retry_another_broker_when_not_store_ok=retry_another)
    (outcome,) = await producer.send_batch([Message("T", b"x")])
    result = ok(outcome)
    assert result.send_status.name == ("SEND_OK" if retry_another else "FLUSH_DISK_TIMEOUT")
    assert len(transport.calls) == (2 if retry_another else 1)
