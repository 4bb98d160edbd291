"""ONEWAY and ASYNC sends of the producer core, RocketMQ 5.x's latency tables (golden durations), and the hook
plugin interface (error isolation of send hooks, the topic allow/deny list, loading a plugin by name)."""

from __future__ import annotations

import asyncio

import pytest
from mq_client.producer import (
    DefaultMQProducer,
    Message,
    ProducerConfig,
    ProducerHooks,
    SendMessageContext,
    SendResult,
    TopicAccessList,
    load_hook,
)
from mq_client.producer.fault_strategy import LATENCY_TABLES, MQFaultStrategy
from mq_client.producer.testing import FakeClock, InMemoryNameServer, ScriptedBrokerTransport, Step, make_route
from mq_common.errors import InvalidParameterError, MessageIllegalError, MQBrokerError, MQError, RemotingError
from mq_common.response_code import ResponseCode

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


async def make_producer(
    transport: ScriptedBrokerTransport, hooks: ProducerHooks | None = None, **config: object
) -> DefaultMQProducer:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B})})
    producer = DefaultMQProducer(ProducerConfig("g", **config), ns, transport, hooks=hooks)  # type: ignore[arg-type]
    await producer.start()
    return producer


async def test_oneway_returns_the_msg_id_and_sends_once_without_retry() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(A, Step(error=RemotingError("down")))
    transport.always(B, Step(error=RemotingError("down")))
    producer = await make_producer(transport)
    msg_id = await producer.send_oneway(Message("T", b"x"))
    assert len(msg_id) == 32
    await producer.shutdown()  # drains the background attempt
    assert len(transport.calls) == 1
    assert producer.limiter.in_flight_messages == 0


async def test_oneway_is_stored_and_validation_fails_before_acceptance() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    msg_id = await producer.send_oneway(Message("T", b"x"))
    with pytest.raises(MessageIllegalError):
        await producer.send_oneway(Message("T", b""))
    await producer.shutdown()
    ((_, stored),) = transport.stored
    assert msg_id in stored.properties


async def test_async_retries_transport_failures_on_another_broker() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(A, Step(error=RemotingError("down")))
    producer = await make_producer(transport)
    results = [await (await producer.send_async(Message("T", b"m%d" % i))) for i in range(4)]
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    await producer.shutdown()


async def test_async_makes_one_plus_retry_times_attempts() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(A, Step(error=RemotingError("down")))
    transport.always(B, Step(error=RemotingError("down")))
    producer = await make_producer(transport, retry_times_when_send_async_failed=1, retry_times_when_send_failed=5)
    task = await producer.send_async(Message("T", b"x"))
    with pytest.raises(MQError, match=r"Send \[2\] times"):
        await task
    assert len(transport.calls) == 2
    await producer.shutdown()


async def test_async_does_not_retry_a_broker_answer() -> None:
    transport = ScriptedBrokerTransport()
    transport.always(A, Step(code=ResponseCode.SYSTEM_BUSY))
    transport.always(B, Step(code=ResponseCode.SYSTEM_BUSY))
    producer = await make_producer(transport)
    task = await producer.send_async(Message("T", b"x"))
    with pytest.raises(MQBrokerError) as info:
        await task
    assert info.value.code == ResponseCode.SYSTEM_BUSY
    assert len(transport.calls) == 1
    await producer.shutdown()


async def test_async_validation_error_comes_through_the_task() -> None:
    producer = await make_producer(ScriptedBrokerTransport())
    task = await producer.send_async(Message("T", None))
    with pytest.raises(MessageIllegalError, match="body is null"):
        await task
    await producer.shutdown()


def test_5x_tables_golden_durations() -> None:
    strategy = MQFaultStrategy.with_tables(LATENCY_TABLES["5.x"], True)
    latencies = [0, 49, 50, 99, 100, 549, 550, 1799, 1800, 2999, 3000, 4999, 5000, 14999, 15000, 60000]
    assert [strategy.compute_not_available_duration(ms) for ms in latencies] == [
        0, 0, 0, 0, 0, 0, 2000, 2000, 5000, 5000, 6000, 6000, 10000, 10000, 30000, 30000,
    ]  # fmt: skip
    assert strategy.isolation_latency_ms == 10000
    assert strategy.compute_not_available_duration(strategy.isolation_latency_ms) == 10000


def test_4x_tables_stay_the_default() -> None:
    strategy = MQFaultStrategy(True)
    assert strategy.isolation_latency_ms == 30000
    assert strategy.compute_not_available_duration(30000) == 600000
    assert strategy.latency_max_ms == LATENCY_TABLES["4.x"].latency_max_ms


async def test_producer_uses_the_selected_tables_for_isolation() -> None:
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    transport.script(A, Step(error=RemotingError("down")))
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": A, "broker-b": B})})
    config = ProducerConfig("g", send_latency_fault_enable=True, latency_fault_tables="5.x")
    producer = DefaultMQProducer(config, ns, transport, clock_ms=clock)
    await producer.start()
    for i in range(4):
        await producer.send(Message("T", b"m%d" % i))
    (_, available_at) = producer.fault_strategy.latency_fault_tolerance.items()["broker-a"]
    assert available_at - clock() == 10000
    await producer.shutdown()


def test_unknown_tables_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="latency_fault_tables"):
        ProducerConfig("g", latency_fault_tables="6.x")


class BrokenHook:
    def __init__(self) -> None:
        self.after: list[str] = []

    def send_message_before(self, context: SendMessageContext) -> None:
        raise RuntimeError("metrics backend down")

    def send_message_after(self, context: SendMessageContext, result: SendResult | None, error: MQError | None) -> None:
        self.after.append(context.communication_mode.value)
        raise RuntimeError("metrics backend down")


async def test_a_failing_send_hook_never_fails_the_send() -> None:
    hook = BrokenHook()
    producer = await make_producer(ScriptedBrokerTransport(), hooks=ProducerHooks.of([hook]))
    result = await producer.send(Message("T", b"x"))
    assert result.message_queue.topic == "T"
    await (await producer.send_async(Message("T", b"y")))
    assert hook.after == ["SYNC", "ASYNC"]
    await producer.shutdown()


async def test_topic_access_list_refuses_with_no_permission_everywhere() -> None:
    transport = ScriptedBrokerTransport()
    hooks = ProducerHooks.of([TopicAccessList(allow=["T*"], deny=["T-secret*"])])
    ns = InMemoryNameServer(
        {t: make_route({"broker-a": 2}, addrs={"broker-a": A}) for t in ("T", "T-secret-1", "Other")}
    )
    producer = DefaultMQProducer(ProducerConfig("g"), ns, transport, hooks=hooks)
    await producer.start()
    assert (await producer.send(Message("T", b"ok"))).message_queue.topic == "T"
    with pytest.raises(MQError) as denied:
        await producer.send(Message("T-secret-1", b"x"))
    assert denied.value.code == ResponseCode.NO_PERMISSION
    assert denied.value.remark == "Sending message to topic[T-secret-1] is forbidden: the topic is in the deny list"
    outcomes = await producer.send_batch([Message("Other", b"x"), Message("T", b"y")])
    assert isinstance(outcomes[0], MQError)
    assert outcomes[0].code == ResponseCode.NO_PERMISSION
    assert "not in the allow list" in outcomes[0].remark
    assert isinstance(outcomes[1], SendResult)
    assert [r.topic for _, r in transport.stored] == ["T", "T"]
    await producer.shutdown()


def make_plugin() -> TopicAccessList:
    return TopicAccessList(deny=["X"])


def test_load_hook_builds_a_plugin_by_name() -> None:
    plugin = load_hook(f"{__name__}:make_plugin")
    hooks = ProducerHooks.of([plugin])
    assert hooks.check_forbidden == (plugin,)
    assert hooks.send_message == ()
    with pytest.raises(ValueError, match=r"package\.module:factory"):
        load_hook("no_colon")
    with pytest.raises(TypeError, match="neither"):
        ProducerHooks.of([object()])


async def test_shutdown_waits_for_background_sends() -> None:
    transport = ScriptedBrokerTransport()
    producer = await make_producer(transport)
    tasks = [await producer.send_async(Message("T", b"m%d" % i)) for i in range(5)]
    await producer.shutdown()
    assert all(t.done() for t in tasks)
    assert len(transport.stored) == 5
    await asyncio.sleep(0)
