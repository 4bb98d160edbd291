"""A MessageBatch whose messages have their own sharding keys: one MessageBatch (SEND_BATCH_MESSAGE) per queue of
a key, each message on its key's queue in send order, results mapped back to the batch's positions."""

from __future__ import annotations

from collections import defaultdict

import pytest
from mq_client.producer import DefaultMQProducer, Message, MessageBatch, MessageBatchResult, SendResult
from mq_client.producer.message_batch import ChunkOutcome, queue_groups
from mq_client.producer.selectors import select_by_sharding_key
from mq_client.producer.testing import (
    ScriptedBrokerTransport,
    Step,
)
from mq_common.codec import decode_properties
from mq_common.errors import MQError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode
from producer_testkit import ADDRS, A, B, make_producer  # noqa: F401


async def queues(producer: DefaultMQProducer) -> list[MessageQueue]:
    """The topic's queue list as the producer selects from it."""
    return list((await producer.routes.find_publish_info("T", 1000)).message_queues)


def by_position(chunks: list[ChunkOutcome], count: int) -> list[tuple[MessageQueue, int] | MQError]:
    """(queue, queue offset) or the error of every batch position."""
    out: list[tuple[MessageQueue, int] | MQError | None] = [None] * count
    for chunk in chunks:
        result = chunk.result
        for j, position in enumerate(chunk.indices()):
            assert out[position] is None, f"position {position} answered twice"
            if isinstance(result, MessageBatchResult):
                out[position] = (result.message_queue, result.queue_offset + j)
            else:
                out[position] = result
    assert all(o is not None for o in out)
    return [o for o in out if o is not None]


async def test_queue_groups_keep_first_appearance_and_send_order() -> None:
    qs = await queues(await make_producer(ScriptedBrokerTransport()))
    keys = ["k1", "", "k2", "k1", "", "k3", "k2"]
    groups = queue_groups(keys, qs)
    assert sorted(i for _mq, members in groups for i in members) == list(range(len(keys)))
    for mq, members in groups:
        assert members == sorted(members)
        for i in members:
            assert mq == (select_by_sharding_key(qs, keys[i]) if keys[i] else None)
    firsts = [members[0] for _mq, members in groups]
    assert firsts == sorted(firsts)


async def test_each_key_goes_to_its_queue_in_send_order_one_message_batch_per_queue() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    keys = [f"tail-{i % 13}" for i in range(200)]
    bodies = [f"m{i}".encode() for i in range(200)]
    batch = MessageBatch("T", bodies, tags=["TagA"] * 200, sharding_keys=keys)
    chunks = await producer.send_message_batch(batch)
    assert chunks is not None
    qs = await queues(producer)
    expected_queues = {select_by_sharding_key(qs, k) for k in keys}
    assert all(c.message_batch for c in transport.calls)
    assert len(transport.calls) == len(expected_queues)  # one SEND_BATCH_MESSAGE per queue
    placed = by_position(chunks, 200)
    per_queue: dict[MessageQueue, list[tuple[int, int]]] = defaultdict(list)
    for position, where in enumerate(placed):
        assert not isinstance(where, MQError), where
        mq, offset = where
        assert mq == select_by_sharding_key(qs, keys[position])
        per_queue[mq].append((offset, position))
    for entries in per_queue.values():
        offsets = [o for o, _p in entries]
        assert offsets == list(range(len(entries)))  # dense, and in send order:
        assert [p for _o, p in entries] == sorted(p for _o, p in entries)
    # What the brokers got: each message's own __SHARDINGKEY and tag, bodies in send order per queue.
    for call in transport.calls:
        got = [(r.body, decode_properties(r.properties)) for r in call.requests]
        positions = [int(body[1:]) for body, _props in got]
        assert positions == sorted(positions)
        assert {props["__SHARDINGKEY"] for _b, props in got} <= set(keys)
        assert all(props["__SHARDINGKEY"] == keys[p] for p, (_b, props) in zip(positions, got, strict=True))
        assert all(props["TAGS"] == "TagA" for _b, props in got)


async def test_messages_without_a_key_go_queue_free_beside_the_keyed_ones() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    keys = ["", "k1", "", "k1", ""]
    chunks = await producer.send_message_batch(MessageBatch("T", [b"a", b"b", b"c", b"d", b"e"], sharding_keys=keys))
    assert chunks is not None
    placed = by_position(chunks, 5)
    assert all(not isinstance(p, MQError) for p in placed)
    keyed = select_by_sharding_key(await queues(producer), "k1")
    for position in (1, 3):
        where = placed[position]
        assert not isinstance(where, MQError)
        assert where[0] == keyed
    free_chunk = next(c for c in chunks if 0 in c.indices())
    assert tuple(free_chunk.indices()) == (0, 2, 4)
    call = next(c for c in transport.calls if c.requests[0].body == b"a")
    assert "__SHARDINGKEY" not in decode_properties(call.requests[0].properties)


async def test_one_failing_queue_fails_its_messages_only_and_keyed_messages_never_move() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(B, Step(code=ResponseCode.SYSTEM_ERROR))
    producer = await make_producer(transport)
    keys = [f"k{i % 9}" for i in range(90)]
    chunks = await producer.send_message_batch(
        MessageBatch("T", [f"m{i}".encode() for i in range(90)], sharding_keys=keys)
    )
    assert chunks is not None
    qs = await queues(producer)
    for position, where in enumerate(by_position(chunks, 90)):
        own = select_by_sharding_key(qs, keys[position])
        if own.broker_name == "broker-b":
            assert isinstance(where, MQError)
        else:
            assert not isinstance(where, MQError), where
            assert where[0] == own
    # a keyed group is retried on its own queue only: broker-a never saw a message of a broker-b key
    for call in transport.calls:
        for r in call.requests:
            key = decode_properties(r.properties)["__SHARDINGKEY"]
            assert select_by_sharding_key(qs, key).broker_name == ("broker-a" if call.addr == A else "broker-b")


async def test_send_batch_of_messages_with_several_keys_takes_the_message_batch_path() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    msgs = [Message("T", f"m{i}".encode(), tags="x", sharding_key=f"k{i % 5}") for i in range(50)]
    outcomes = await producer.send_batch(msgs)
    assert all(c.message_batch for c in transport.calls)
    qs = await queues(producer)
    assert len(outcomes) == 50
    for msg, outcome in zip(msgs, outcomes, strict=True):
        assert isinstance(outcome, SendResult), outcome
        assert outcome.message_queue == select_by_sharding_key(qs, msg.sharding_key)
    stored = {r.body: decode_properties(r.properties)["UNIQ_KEY"] for _addr, r in transport.stored}
    assert [stored[m.body or b""] for m in msgs] == [o.msg_id for o in outcomes if isinstance(o, SendResult)]


def test_message_batch_takes_one_key_or_a_key_column() -> None:
    with pytest.raises(ValueError, match="not both"):
        MessageBatch("T", [b"a"], sharding_key="k", sharding_keys=["k"])
    with pytest.raises(ValueError, match="sharding_keys has 1 entries for 2"):
        MessageBatch("T", [b"a", b"b"], sharding_keys=["k"])
    batch = MessageBatch("T", [b"a", b"b", b"c"], tags=["x", "y", "z"], sharding_keys=["k1", "k2", "k3"])
    assert batch.message(1).sharding_key == "k2"
    picked = batch.select([2, 0])
    assert (list(picked.bodies), list(picked.tags), list(picked.sharding_keys)) == (
        [b"c", b"a"],
        ["z", "x"],
        ["k3", "k1"],
    )
    one = MessageBatch.from_messages([Message("T", b"a", sharding_key="s"), Message("T", b"b", sharding_key="s")])
    assert (one.sharding_key, tuple(one.sharding_keys)) == ("s", ())
    many = MessageBatch.from_messages([Message("T", b"a", sharding_key="s"), Message("T", b"b")])
    assert (many.sharding_key, list(many.sharding_keys)) == ("", ["s", ""])
