"""SendAccumulator over the real producer core on in-memory brokers: concurrent one-message sends become one
MessageBatch per round, each caller gets its own outcome, message groups keep their order, failures and deadlines
reach each caller, flow control and shutdown behave as without it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from mq_client.producer import (
    DefaultMQProducer,
    FlowControlError,
    Message,
    ProducerConfig,
    SendResult,
    TopicAccessList,
)
from mq_client.producer.errors import SendFailedError
from mq_client.producer.testing import InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.errors import MessageIllegalError, MQError, RemotingError
from mq_common.response_code import ResponseCode
from mq_gateway.accumulator import AccumulatorStats, SendAccumulator
from mq_gateway.controller import GatewayController
from mq_gateway.settings import GatewaySettings

A = "127.0.0.1:10911"


@pytest.fixture
async def transport() -> ScriptedBrokerTransport:
    return ScriptedBrokerTransport()


async def started(transport: ScriptedBrokerTransport, **config: object) -> DefaultMQProducer:
    routes = {"T": make_route({"broker-a": 4}, addrs={"broker-a": A})}
    producer = DefaultMQProducer(ProducerConfig(producer_group="pg", **config), InMemoryNameServer(routes), transport)  # type: ignore[arg-type]
    await producer.start()
    return producer


@pytest.fixture
async def producer(transport: ScriptedBrokerTransport) -> AsyncIterator[DefaultMQProducer]:
    p = await started(transport)
    yield p
    await p.shutdown()


def accumulator(producer: DefaultMQProducer, *, max_batch_messages: int = 256, **kwargs: int) -> SendAccumulator:
    return SendAccumulator(producer, max_batch_messages=max_batch_messages, max_batch_bytes=1 << 20, **kwargs)


async def until_called(transport: ScriptedBrokerTransport) -> None:
    """Until the transport got its first call (a few loop iterations; bounded)."""
    for _ in range(1000):
        if transport.calls:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("no broker call")


def msg(i: int, group: str = "", **props: str) -> Message:
    return Message(
        "T", f"m{i}".encode(), tags="tag", properties={"UNIQ_KEY": f"ID{i:04d}", **props}, sharding_key=group
    )


async def test_concurrent_sends_go_as_one_batch_each_with_its_own_result(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    results = await asyncio.gather(*(acc.send(msg(i, color=str(i))) for i in range(50)))
    assert len(transport.calls) == 1
    assert transport.calls[0].message_batch
    assert acc.stats == AccumulatorStats(sends=50, batches=1)
    assert [r.msg_id for r in results] == [f"ID{i:04d}" for i in range(50)]
    assert len({(r.message_queue, r.queue_offset) for r in results}) == 50
    stored = {req.body: req.properties for _addr, req in transport.stored}
    assert len(transport.stored) == 50
    for i in range(50):
        props = stored[f"m{i}".encode()]
        assert f"UNIQ_KEY\x01ID{i:04d}\x02" in props
        assert f"color\x01{i}\x02" in props
        assert "TAGS\x01tag\x02" in props


async def test_a_lone_send_takes_the_single_message_path(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    result = await acc.send(msg(1))
    assert result.msg_id == "ID0001"
    assert [c.message_batch or c.batch for c in transport.calls] == [False]
    assert acc.pending == 0


async def test_sends_arriving_while_a_batch_is_in_flight_form_the_next_batch(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer, max_batch_messages=8)
    sends = [asyncio.ensure_future(acc.send(msg(i))) for i in range(20)]  # 8 + 8 + 4 (full batches close)
    results = await asyncio.gather(*sends)
    assert [len(c.requests) for c in transport.calls] == [8, 8, 4]
    assert [r.msg_id for r in results] == [f"ID{i:04d}" for i in range(20)]
    assert acc.stats.batches == 3


async def test_message_groups_keep_their_order_across_batches(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer, max_batch_messages=7)
    groups = ["g1", "g2", "g3"]
    sends = [acc.send(msg(i, groups[i % 3])) for i in range(60)]  # joined in this order
    results = await asyncio.gather(*sends)
    for g, group in enumerate(groups):
        mine = [results[i] for i in range(g, 60, 3)]
        assert len({r.message_queue for r in mine}) == 1, "a message group stays on its key's queue"
        offsets = [r.queue_offset for r in mine]
        assert offsets == sorted(offsets), "stored in the order of the sends"
        stored = [req.body for _a, req in transport.stored if f"__SHARDINGKEY\x01{group}\x02" in req.properties]
        assert stored == [f"m{i}".encode() for i in range(g, 60, 3)]


async def test_a_failing_batch_fails_each_caller(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    transport.always(A, Step(error=RemotingError("broker down")))
    outcomes = await asyncio.gather(*(acc.send(msg(i)) for i in range(10)), return_exceptions=True)
    assert all(isinstance(o, MQError) for o in outcomes)
    assert {type(o).__name__ for o in outcomes} == {"SendFailedError"}
    transport.always(A, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    outcomes = await asyncio.gather(*(acc.send(msg(i)) for i in range(10)), return_exceptions=True)
    assert [o.code for o in outcomes if isinstance(o, MQError)] == [ResponseCode.MESSAGE_ILLEGAL] * 10
    assert not transport.stored


async def test_bad_input_is_refused_before_batching(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    good = asyncio.ensure_future(acc.send(msg(1)))
    with pytest.raises(MessageIllegalError, match="body length is zero"):
        await acc.send(Message("T", b""))
    assert isinstance(await good, SendResult)
    assert acc.stats.sends == 1
    assert len(transport.stored) == 1


async def test_a_body_to_compress_goes_alone(producer: DefaultMQProducer, transport: ScriptedBrokerTransport) -> None:
    acc = accumulator(producer)
    big = Message("T", b"x" * producer.config.compress_msg_body_over_howmuch_bytes)
    await asyncio.gather(acc.send(big), acc.send(msg(1)), acc.send(msg(2)))
    assert acc.stats.sends == 2
    assert sorted(len(c.requests) for c in transport.calls) == [1, 2]


async def test_a_caller_past_its_deadline_leaves_and_its_message_is_not_sent(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    transport.script(A, Step(hang=True))
    stuck = asyncio.ensure_future(acc.send(msg(1, "g"), timeout_ms=500))
    await until_called(transport)
    with pytest.raises(SendFailedError) as info:
        await acc.send(msg(2, "g"), timeout_ms=50)  # waits behind the stuck batch of its message group
    assert info.value.code == ResponseCode.RPC_TIME_OUT
    with pytest.raises(MQError):
        await stuck
    await acc.close()
    assert len(transport.calls) == 1, "the late message was dropped, not sent behind its caller's back"


async def test_a_batch_runs_on_its_earliest_deadline_and_each_caller_gets_the_producers_outcome(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer)
    transport.always(A, Step(hang=True))
    outcomes = await asyncio.gather(
        acc.send(msg(1), timeout_ms=5000), acc.send(msg(2), timeout_ms=100), return_exceptions=True
    )
    assert len(transport.calls) == 1, "one batch"
    assert transport.calls[0].timeout_ms <= 100, "its budget is the tighter deadline"
    for outcome in outcomes:
        assert isinstance(outcome, SendFailedError)
        assert outcome.code == ResponseCode.RPC_TIME_OUT
        assert "broker-a" in outcome.remark, "the producer's own error, naming the broker it tried"


async def test_a_stuck_batch_does_not_hold_up_the_topics_other_sends(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer, linger_ms=1)
    transport.script(A, Step(hang=True))
    stuck = asyncio.ensure_future(acc.send(msg(1), timeout_ms=1500))
    await until_called(transport)
    result = await acc.send(msg(2), timeout_ms=1000)  # goes after at most the linger, beside the stuck batch
    assert result.msg_id == "ID0002"
    assert not stuck.done()
    with pytest.raises(MQError):
        await stuck


async def test_full_in_flight_limits_answer_flow_control(transport: ScriptedBrokerTransport) -> None:
    producer = await started(transport, max_in_flight_messages=1)
    try:
        acc = accumulator(producer)
        transport.script(A, Step(hang=True))
        stuck = asyncio.ensure_future(acc.send(msg(1), timeout_ms=500))
        await until_called(transport)
        with pytest.raises(FlowControlError, match="flow control"):
            await acc.send(msg(2), timeout_ms=50)
        with pytest.raises(MQError):
            await stuck
    finally:
        await producer.shutdown()


async def test_waiting_messages_are_bounded(producer: DefaultMQProducer, transport: ScriptedBrokerTransport) -> None:
    acc = accumulator(producer, max_pending_messages=3)
    first = [asyncio.ensure_future(acc.send(msg(i))) for i in range(3)]
    await asyncio.sleep(0)  # they joined; nothing has gone out yet
    with pytest.raises(FlowControlError):
        await acc.send(msg(9))
    assert len(await asyncio.gather(*first)) == 3


async def test_close_sends_every_waiting_message(
    producer: DefaultMQProducer, transport: ScriptedBrokerTransport
) -> None:
    acc = accumulator(producer, max_batch_messages=4, linger_ms=2)
    sends = [asyncio.ensure_future(acc.send(msg(i))) for i in range(10)]
    await asyncio.sleep(0)
    await acc.close()
    assert all(s.done() for s in sends)
    assert sorted(r.msg_id for r in await asyncio.gather(*sends)) == [f"ID{i:04d}" for i in range(10)]
    assert len(transport.stored) == 10
    assert acc.pending == 0


def test_bounds_must_be_positive(producer: DefaultMQProducer) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SendAccumulator(producer, max_batch_messages=0, max_batch_bytes=1)


def deny_nothing() -> TopicAccessList:
    """A hook plugin factory (``hook_plugins`` names it by ``module:factory``)."""
    return TopicAccessList(deny=["never-a-topic"])


async def test_hook_plugins_turn_the_accumulator_off() -> None:
    settings = {"listen_host": "127.0.0.1", "listen_port": 0, "namesrv_addr": "127.0.0.1:1"}
    plain = GatewayController(GatewaySettings(**settings))
    hooked = GatewayController(GatewaySettings(**settings, hook_plugins=[f"{__name__}:deny_nothing"]))
    try:
        assert plain.accumulator is not None
        assert hooked.accumulator is None
    finally:
        await plain.stop(0)
        await hooked.stop(0)
