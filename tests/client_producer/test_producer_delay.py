"""DefaultMQProducer's delay levels and timer messages (Message#setDelayTimeLevel / #setDeliverTimeMs /
#setDelayTimeSec / #setDelayTimeMs as fields), the recall handle of a timer's SendResult, and recall_message
against an in-memory broker client."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_client.producer.delay import delay_properties
from mq_client.producer.testing import (
    FakeClock,
    FixedStartRandom,
    InMemoryNameServer,
    ScriptedBrokerTransport,
    make_route,
)
from mq_common.codec import decode_properties
from mq_common.constants import MessageConst
from mq_common.errors import MessageIllegalError, MQBrokerError, MQClientError
from mq_common.recall_handle import build_recall_handle, decode_recall_handle
from mq_common.response_code import ResponseCode
from producer_testkit import ADDRS, make_producer


def _props(transport: ScriptedBrokerTransport, i: int = -1) -> dict[str, str]:
    return decode_properties(transport.stored[i][1].properties)


async def test_delay_level_is_the_delay_property_and_gets_no_recall_handle() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    result = await producer.send(Message("T", b"x", delay_time_level=3))
    props = _props(transport)
    assert props[MessageConst.DELAY_TIME_LEVEL] == "3"
    assert MessageConst.TIMER_DELIVER_MS not in props
    assert result.recall_handle == ""


async def test_deliver_time_ms_is_sent_as_is_and_the_handle_names_it() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    due_ms = time.time_ns() // 1_000_000 + 5_000
    result = await producer.send(Message("T", b"x", deliver_time_ms=due_ms))
    assert _props(transport)[MessageConst.TIMER_DELIVER_MS] == str(due_ms)
    handle = decode_recall_handle(result.recall_handle)
    assert handle.topic == "T"
    assert handle.broker_name == result.message_queue.broker_name
    assert handle.deliver_ms == due_ms
    assert handle.uniq_key == result.msg_id


@pytest.mark.parametrize(
    ("msg", "delay_ms"),
    [(Message("T", b"x", delay_time_sec=7), 7_000), (Message("T", b"x", delay_time_ms=1_500), 1_500)],
)
async def test_relative_delays_become_one_deliver_time_on_the_client(msg: Message, delay_ms: int) -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    before = time.time_ns() // 1_000_000
    result = await producer.send(msg)
    after = time.time_ns() // 1_000_000
    props = _props(transport)
    assert MessageConst.TIMER_DELAY_SEC not in props
    assert MessageConst.TIMER_DELAY_MS not in props
    due_ms = int(props[MessageConst.TIMER_DELIVER_MS])
    assert before + delay_ms <= due_ms <= after + delay_ms
    assert decode_recall_handle(result.recall_handle).deliver_ms == due_ms


@pytest.mark.parametrize(
    ("msg", "remark"),
    [
        (Message("T", b"x", delay_time_level=-1), "delay_time_level must not be negative"),
        (Message("T", b"x", deliver_time_ms=-5), "deliver_time_ms must not be negative"),
        (Message("T", b"x", delay_time_level=2, delay_time_sec=3), "takes one of"),
        (Message("T", b"x", deliver_time_ms=10**13, delay_time_ms=3), "takes one of"),
    ],
)
async def test_bad_delays_are_refused_before_anything_is_sent(msg: Message, remark: str) -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    with pytest.raises(MessageIllegalError, match=remark) as info:
        await producer.send(msg)
    assert info.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert transport.calls == []


async def test_send_batch_sends_delayed_messages_one_by_one_with_their_handles() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    due_ms = time.time_ns() // 1_000_000 + 60_000
    outcomes = await producer.send_batch(
        [Message("T", b"a", deliver_time_ms=due_ms), Message("T", b"b", delay_time_level=1), Message("T", b"c")]
    )
    assert not any(call.message_batch for call in transport.calls)  # never a RocketMQ MessageBatch
    first = outcomes[0]
    assert not isinstance(first, Exception)
    assert decode_recall_handle(first.recall_handle).deliver_ms == due_ms
    assert [getattr(o, "recall_handle", None) for o in outcomes[1:]] == ["", ""]


def test_delay_properties_leaves_a_plain_message_alone() -> None:
    props: dict[str, str] = {}
    assert delay_properties(Message("T", b"x"), props) == 0
    assert props == {}
    assert delay_properties(Message("T", b"x", delay_time_sec=2), props, now_ms=1_000) == 3_000


@dataclass
class FakeRecaller:
    """A broker client's recall_message: records calls, answers ``answer`` or raises ``error``."""

    answer: str = "UNIQ"
    error: Exception | None = None
    calls: list[tuple[str, str, str, str, str, int]] = field(default_factory=list)

    async def recall_message(
        self, addr: str, producer_group: str, topic: str, recall_handle: str, broker_name: str, timeout_ms: int
    ) -> str:
        self.calls.append((addr, producer_group, topic, recall_handle, broker_name, timeout_ms))
        if self.error is not None:
            raise self.error
        return self.answer


async def _recall_producer(recaller: FakeRecaller) -> DefaultMQProducer:
    producer = DefaultMQProducer(
        ProducerConfig("batch_group"),
        InMemoryNameServer({"T": make_route({"broker-a": 4, "broker-b": 4}, addrs=ADDRS)}),
        ScriptedBrokerTransport(),
        rng=FixedStartRandom(0),
        clock_ms=FakeClock(),
        recaller=recaller,
    )
    await producer.start()
    return producer


async def test_recall_goes_to_the_master_of_the_handles_broker() -> None:
    recaller = FakeRecaller()
    producer = await _recall_producer(recaller)
    handle = build_recall_handle("T", "broker-b", 1_900_000_000_000, "UNIQ")
    assert await producer.recall_message("T", handle, timeout_ms=1234) == "UNIQ"
    assert recaller.calls == [(ADDRS["broker-b"], "batch_group", "T", handle, "broker-b", 1234)]


@pytest.mark.parametrize(
    ("topic", "handle", "code", "remark"),
    [
        ("T", "garbage!", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        ("%RETRY%g", build_recall_handle("T", "broker-a", 1, "U"), ResponseCode.MESSAGE_ILLEGAL, "forbidden"),
        ("T", build_recall_handle("T", "broker-z", 1, "U"), ResponseCode.BROKER_NOT_EXIST, "broker-z"),
    ],
)
async def test_recall_refuses_bad_requests_without_calling_a_broker(
    topic: str, handle: str, code: int, remark: str
) -> None:
    recaller = FakeRecaller()
    producer = await _recall_producer(recaller)
    with pytest.raises(MQClientError, match=remark) as info:
        await producer.recall_message(topic, handle)
    assert info.value.code == code
    assert recaller.calls == []


async def test_recall_raises_the_brokers_refusal() -> None:
    recaller = FakeRecaller(error=MQBrokerError("recall failed, timestamp invalid", ResponseCode.ILLEGAL_OPERATION))
    producer = await _recall_producer(recaller)
    with pytest.raises(MQBrokerError, match="timestamp invalid"):
        await producer.recall_message("T", build_recall_handle("T", "broker-a", 1, "U"))


async def test_a_producer_without_a_broker_client_cannot_recall() -> None:
    producer = await make_producer(ScriptedBrokerTransport())
    with pytest.raises(MQClientError, match="no broker client"):
        await producer.recall_message("T", build_recall_handle("T", "broker-a", 1, "U"))
