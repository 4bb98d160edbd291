"""DefaultMQProducer#send against in-memory brokers: wire fields, compression, lifecycle, retries with the
avoid-last-broker rule, retried vs not retried codes, one shared budget, the final error text."""

from __future__ import annotations

import asyncio
import zlib

import pytest
from mq_client.producer import (
    DefaultMQProducer,
    Message,
    ProducerConfig,
    ProducerHooks,
    ProducerStateError,
    SendFailedError,
    SendMessageContext,
    SendResult,
    SendStatus,
    ServiceState,
)
from mq_client.producer.testing import (
    FakeClock,
    FixedStartRandom,
    InMemoryNameServer,
    ScriptedBrokerTransport,
    Step,
    make_route,
)
from mq_common.codec import decode_properties
from mq_common.constants import MessageSysFlag
from mq_common.errors import MessageIllegalError, MQBrokerError, MQClientError, MQError, RemotingError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode

A, B = "127.0.0.1:10911", "127.0.0.1:10921"


def two_broker_ns() -> InMemoryNameServer:
    return InMemoryNameServer(
        {
            "T": make_route({"broker-a": 4, "broker-b": 4}, addrs={"broker-a": A, "broker-b": B}),
            "TBW102": make_route({"broker-a": 8}, addrs={"broker-a": A}),
        }
    )


async def make_producer(
    transport: ScriptedBrokerTransport,
    *,
    start_index: int = 0,
    clock: FakeClock | None = None,
    ns: InMemoryNameServer | None = None,
    hooks: ProducerHooks | None = None,
    **config: object,
) -> DefaultMQProducer:
    producer = DefaultMQProducer(
        ProducerConfig("test_group", **config),  # type: ignore[arg-type]
        ns or two_broker_ns(),
        transport,
        rng=FixedStartRandom(start_index),
        clock_ms=clock or FakeClock(),
        hooks=hooks,
    )
    await producer.start()
    return producer


@pytest.fixture
def transport() -> ScriptedBrokerTransport:
    return ScriptedBrokerTransport()


async def test_send_ok_fields_and_properties(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport, start_index=0)
    msg = Message("T", b"hello", tags="TagA", keys=("k1", "k2"), properties={"color": "red"}, flag=7)
    result = await producer.send(msg)
    # round robin from start 0: index 1 -> broker-a queue 1
    assert result.message_queue == MessageQueue("T", "broker-a", 1)
    assert result.send_status is SendStatus.SEND_OK
    assert result.queue_offset == 0
    (call,) = transport.calls
    assert call.addr == A
    assert not call.batch
    req = call.requests[0]
    props = decode_properties(req.properties)
    assert props == {"TAGS": "TagA", "KEYS": "k1 k2", "color": "red", "WAIT": "true", "UNIQ_KEY": result.msg_id}
    assert len(result.msg_id) == 32
    assert result.offset_msg_id
    assert (req.topic, req.queue_id, req.flag, req.body, req.sys_flag) == ("T", 1, 7, b"hello", 0)
    assert (req.producer_group, req.default_topic, req.default_topic_queue_nums) == ("test_group", "TBW102", 4)
    assert req.born_timestamp_ms > 0
    await producer.shutdown()


async def test_existing_uniq_key_is_kept_and_ids_are_unique(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport)
    given = await producer.send(Message("T", b"x", properties={"UNIQ_KEY": "MY-ID"}))
    assert given.msg_id == "MY-ID"
    ids = {(await producer.send(Message("T", b"x"))).msg_id for _ in range(20)}
    assert len(ids) == 20


@pytest.mark.parametrize(("size", "compressed"), [(4095, False), (4096, True), (100_000, True)])
async def test_compression_flag_round_trip(transport: ScriptedBrokerTransport, size: int, compressed: bool) -> None:
    producer = await make_producer(transport)
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    await producer.send(Message("T", body))
    req = transport.calls[0].requests[0]
    assert bool(req.sys_flag & MessageSysFlag.COMPRESSED_FLAG) is compressed
    assert (zlib.decompress(req.body) if compressed else req.body) == body
    if compressed:
        assert len(req.body) < len(body)


async def test_compression_threshold_is_configurable(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport, compress_msg_body_over_howmuch_bytes=10)
    await producer.send(Message("T", b"a" * 10))
    assert transport.calls[0].requests[0].sys_flag & MessageSysFlag.COMPRESSED_FLAG


async def test_sharding_key_goes_to_one_queue_and_is_a_property(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport)
    results = [await producer.send(Message("T", b"x", sharding_key="order-1001")) for _ in range(5)]
    assert {r.message_queue for r in results} == {MessageQueue("T", "broker-b", 3)}  # 708180863 % 8 = 7
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    assert decode_properties(transport.calls[0].requests[0].properties)["__SHARDINGKEY"] == "order-1001"


async def test_lifecycle_states() -> None:
    producer = DefaultMQProducer(ProducerConfig("g"), two_broker_ns(), ScriptedBrokerTransport())
    assert producer.service_state is ServiceState.CREATE_JUST
    with pytest.raises(ProducerStateError, match="state not OK, CREATE_JUST") as not_started:
        await producer.send(Message("T", b"x"))
    assert not_started.value.code == ResponseCode.SERVICE_NOT_AVAILABLE
    await producer.start()
    assert producer.service_state is ServiceState.RUNNING
    with pytest.raises(ProducerStateError, match="maybe started once, RUNNING"):
        await producer.start()
    await producer.shutdown()
    await producer.shutdown()  # idempotent
    assert producer.service_state is ServiceState.SHUTDOWN_ALREADY
    with pytest.raises(ProducerStateError, match="SHUTDOWN_ALREADY"):
        await producer.send(Message("T", b"x"))
    with pytest.raises(ProducerStateError, match="maybe started once, SHUTDOWN_ALREADY"):
        await producer.start()


async def test_bad_group_fails_start() -> None:
    producer = DefaultMQProducer(ProducerConfig("DEFAULT_PRODUCER"), two_broker_ns(), ScriptedBrokerTransport())
    with pytest.raises(MQClientError, match="producerGroup can not equal"):
        await producer.start()
    assert producer.service_state is ServiceState.START_FAILED
    with pytest.raises(ProducerStateError, match="START_FAILED"):
        await producer.start()


async def test_config_ranges() -> None:
    with pytest.raises(MQError, match="send_msg_timeout_ms must be at least 1"):
        ProducerConfig("g", send_msg_timeout_ms=0)
    with pytest.raises(MQError, match="compress_level"):
        ProducerConfig("g", compress_level=10)


async def test_invalid_message_is_refused_before_any_lookup(transport: ScriptedBrokerTransport) -> None:
    ns = two_broker_ns()
    producer = await make_producer(transport, ns=ns)
    with pytest.raises(MessageIllegalError, match="the message body length is zero"):
        await producer.send(Message("T", b""))
    assert ns.queries == []
    assert transport.calls == []


async def test_unknown_topic_goes_through_tbw102(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport)
    result = await producer.send(Message("Brand_New", b"x"))
    assert result.message_queue.broker_name == "broker-a"
    assert result.message_queue.queue_id < 4  # min(4, 8) queues
    req = transport.calls[0].requests[0]
    assert (req.topic, req.default_topic) == ("Brand_New", "TBW102")


async def test_no_route_is_topic_not_exist(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport, ns=InMemoryNameServer())
    with pytest.raises(MQError) as info:
        await producer.send(Message("T", b"x"))
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert info.value.remark == "No route info of this topic: T"


async def test_transport_error_retries_on_another_broker(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(error=RemotingError("connect to <127.0.0.1:10911> failed")))
    producer = await make_producer(transport, start_index=0)
    result = await producer.send(Message("T", b"x"))
    # attempt 1: index 1 -> a1 fails; attempt 2 avoids broker-a: 2 a2, 3 a3, 4 -> b0
    assert [c.addr for c in transport.calls] == [A, B]
    assert result.message_queue == MessageQueue("T", "broker-b", 0)


@pytest.mark.parametrize(
    "code",
    [
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.NO_PERMISSION,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    ],
)
async def test_retried_broker_codes(transport: ScriptedBrokerTransport, code: int) -> None:
    transport.script(A, Step(code=code))
    producer = await make_producer(transport, start_index=0)
    result = await producer.send(Message("T", b"x"))
    assert result.message_queue.broker_name == "broker-b"
    assert len(transport.calls) == 2


@pytest.mark.parametrize(
    "code", [ResponseCode.MESSAGE_ILLEGAL, ResponseCode.INVALID_PARAMETER, ResponseCode.FLOW_CONTROL, 999]
)
async def test_not_retried_broker_codes(transport: ScriptedBrokerTransport, code: int) -> None:
    transport.script(A, Step(code=code))
    producer = await make_producer(transport, start_index=0)
    with pytest.raises(MQBrokerError) as info:
        await producer.send(Message("T", b"x"))
    assert info.value.code == code
    assert info.value.broker_name == "broker-a"
    assert len(transport.calls) == 1


async def test_every_attempt_fails_final_error_text(transport: ScriptedBrokerTransport) -> None:
    transport.always(A, Step(code=ResponseCode.SYSTEM_BUSY))
    transport.always(B, Step(code=ResponseCode.SYSTEM_BUSY))
    clock = FakeClock()
    producer = await make_producer(transport, start_index=0, clock=clock)
    transport.clock = clock
    transport.default_steps[A] = Step(code=ResponseCode.SYSTEM_BUSY, latency_ms=7)
    with pytest.raises(SendFailedError) as info:
        await producer.send(Message("T", b"x"))
    err = info.value
    assert [c.addr for c in transport.calls] == [A, B, A]
    assert err.times == 3
    assert err.brokers_sent == ("broker-a", "broker-b", "broker-a")
    assert err.code == ResponseCode.SYSTEM_BUSY
    assert isinstance(err.cause, MQBrokerError)
    assert err.remark.startswith(
        "Send [3] times, still failed, cost [14]ms, Topic: T, BrokersSent: [broker-a, broker-b, broker-a]"
    )
    assert "last error: CODE: 2 (SYSTEM_BUSY)" in err.remark


async def test_one_budget_shared_by_all_attempts() -> None:
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    slow_fail = Step(error=RemotingError("reset"), latency_ms=1200)
    transport.always(A, slow_fail)
    transport.always(B, slow_fail)
    producer = await make_producer(transport, clock=clock, retry_times_when_send_failed=5)
    with pytest.raises(SendFailedError) as info:
        await producer.send(Message("T", b"x"), timeout_ms=3000)
    # each attempt gets what is left: 3000, 1800, 600; then 3600 ms are spent and no 4th attempt starts
    assert [c.timeout_ms for c in transport.calls] == [3000, 1800, 600]
    err = info.value
    assert err.budget_spent
    assert err.code == ResponseCode.RPC_TIME_OUT
    assert err.times == 3
    assert "cost [3600]ms" in err.remark
    assert "send timeout budget spent" in err.remark


async def test_budget_default_is_send_msg_timeout_ms() -> None:
    clock = FakeClock()
    transport = ScriptedBrokerTransport(clock=clock)
    producer = await make_producer(transport, clock=clock, send_msg_timeout_ms=1234)
    await producer.send(Message("T", b"x"))
    assert transport.calls[0].timeout_ms == 1234


async def test_hanging_broker_times_out_within_the_budget(transport: ScriptedBrokerTransport) -> None:
    transport.always(A, Step(hang=True))
    transport.always(B, Step(hang=True))
    producer = DefaultMQProducer(ProducerConfig("g"), two_broker_ns(), transport)  # real clocks
    await producer.start()
    with pytest.raises(SendFailedError) as info:
        await producer.send(Message("T", b"x"), timeout_ms=150)
    assert info.value.code == ResponseCode.RPC_TIME_OUT
    assert info.value.times == 1
    assert info.value.budget_spent
    await producer.shutdown()


async def test_flush_disk_timeout_is_returned_not_retried_by_default(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    producer = await make_producer(transport)
    result = await producer.send(Message("T", b"x"))
    assert result.send_status is SendStatus.FLUSH_DISK_TIMEOUT
    assert len(transport.calls) == 1


async def test_retry_another_broker_when_not_store_ok(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    producer = await make_producer(transport, retry_another_broker_when_not_store_ok=True)
    result = await producer.send(Message("T", b"x"))
    assert result.send_status is SendStatus.SEND_OK
    assert result.message_queue.broker_name == "broker-b"


async def test_retry_another_broker_returns_the_last_stored_result(transport: ScriptedBrokerTransport) -> None:
    transport.always(A, Step(code=ResponseCode.FLUSH_SLAVE_TIMEOUT))
    transport.always(B, Step(code=ResponseCode.SLAVE_NOT_AVAILABLE))
    producer = await make_producer(transport, retry_another_broker_when_not_store_ok=True)
    result = await producer.send(Message("T", b"x"))
    assert len(transport.calls) == 3
    assert result.send_status is SendStatus.FLUSH_SLAVE_TIMEOUT  # a, b, a: the third one's
    assert result.message_queue.broker_name == "broker-a"


async def test_stored_result_wins_over_a_later_non_retriable_error(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(code=ResponseCode.FLUSH_DISK_TIMEOUT))
    transport.script(B, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    producer = await make_producer(transport, retry_another_broker_when_not_store_ok=True)
    result = await producer.send(Message("T", b"x"))
    assert result.send_status is SendStatus.FLUSH_DISK_TIMEOUT


async def test_sharding_key_retries_on_the_same_queue(transport: ScriptedBrokerTransport) -> None:
    transport.always(B, Step(error=RemotingError("down")))
    producer = await make_producer(transport)
    with pytest.raises(SendFailedError) as info:
        await producer.send(Message("T", b"x", sharding_key="order-1001"))  # -> broker-b queue 3
    assert info.value.brokers_sent == ("broker-b",) * 3
    assert {c.requests[0].queue_id for c in transport.calls} == {3}
    assert info.value.code == ResponseCode.RPC_SEND_TO_CHANNEL_FAILED


async def test_missing_broker_address_is_retried_elsewhere(transport: ScriptedBrokerTransport) -> None:
    producer = await make_producer(transport, start_index=3)
    first = await producer.send(Message("T", b"x"))  # index 4 -> b0
    assert first.message_queue == MessageQueue("T", "broker-b", 0)
    del producer.routes._broker_addrs["broker-b"]  # the address vanished from the cache
    result = await producer.send(Message("T", b"x"))  # index 5 -> b1: no address, retried: 8 -> a0
    assert result.message_queue == MessageQueue("T", "broker-a", 0)
    assert [c.addr for c in transport.calls] == [B, A]


async def test_latency_fault_isolates_a_failed_broker(transport: ScriptedBrokerTransport) -> None:
    clock = FakeClock()
    transport.clock = clock
    transport.script(A, Step(error=RemotingError("down")))
    producer = await make_producer(transport, clock=clock, start_index=0, send_latency_fault_enable=True)
    first = await producer.send(Message("T", b"x"))
    assert first.message_queue.broker_name == "broker-b"
    items = producer.fault_strategy.latency_fault_tolerance.items()
    assert items["broker-a"] == (0, clock.now_ms + 600_000)
    later = [await producer.send(Message("T", b"x")) for _ in range(6)]
    assert {r.message_queue.broker_name for r in later} == {"broker-b"}
    clock.advance(600_000)
    again = [await producer.send(Message("T", b"x")) for _ in range(8)]
    assert {r.message_queue.broker_name for r in again} == {"broker-a", "broker-b"}


async def test_a_failed_over_broker_group_is_followed_and_unisolated(transport: ScriptedBrokerTransport) -> None:
    """broker-a's master dies and its slave takes over under the same name at a new address: the failed send
    makes the producer re-fetch broker-a's routes at once, and the new master clears broker-a's isolation."""
    promoted = "127.0.0.1:10912"
    ns = two_broker_ns()
    clock = FakeClock()
    transport.clock = clock
    transport.script(A, Step(error=RemotingError("connect to <127.0.0.1:10911> failed")))
    producer = await make_producer(transport, clock=clock, ns=ns, send_latency_fault_enable=True)
    await producer.routes.find_publish_info("T", 1000)  # the route before the failover is cached
    ns.routes["T"] = make_route({"broker-a": 4, "broker-b": 4}, addrs={"broker-a": promoted, "broker-b": B})
    first = await producer.send(Message("T", b"x"))  # a0 fails (isolating), retried on broker-b
    assert first.message_queue.broker_name == "broker-b"
    for _ in range(200):  # bounded: the refresh runs in a task
        if producer.routes.find_broker_address_in_publish("broker-a") == promoted:
            break
        await asyncio.sleep(0.01)
    assert producer.routes.find_broker_address_in_publish("broker-a") == promoted
    assert "broker-a" not in producer.fault_strategy.latency_fault_tolerance.items()
    later = [await producer.send(Message("T", b"x")) for _ in range(8)]
    assert {r.message_queue.broker_name for r in later} == {"broker-a", "broker-b"}
    assert promoted in {c.addr for c in transport.calls}


async def test_not_retriable_code_does_not_isolate(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(code=ResponseCode.MESSAGE_ILLEGAL))
    producer = await make_producer(transport, send_latency_fault_enable=True)
    with pytest.raises(MQBrokerError):
        await producer.send(Message("T", b"x"))
    assert producer.fault_strategy.latency_fault_tolerance.is_available("broker-a")


class Recorder:
    def __init__(self, forbid_topic: str = "") -> None:
        self.forbid_topic = forbid_topic
        self.events: list[str] = []

    def check_forbidden(self, context: SendMessageContext) -> None:
        if context.message.topic == self.forbid_topic:
            raise MQClientError("forbidden by hook")

    def send_message_before(self, context: SendMessageContext) -> None:
        self.events.append(f"before {context.message_queue.broker_name} {context.broker_addr}")

    def send_message_after(self, context: SendMessageContext, result: SendResult | None, error: MQError | None) -> None:
        self.events.append(f"after {'ok' if result else type(error).__name__}")


async def test_hooks_run_around_each_attempt(transport: ScriptedBrokerTransport) -> None:
    transport.script(A, Step(error=RemotingError("down")))
    rec = Recorder()
    producer = await make_producer(transport, hooks=ProducerHooks((rec,), (rec,)))
    await producer.send(Message("T", b"x"))
    assert rec.events == [f"before broker-a {A}", "after RemotingError", f"before broker-b {B}", "after ok"]


async def test_check_forbidden_hook_refuses_without_sending(transport: ScriptedBrokerTransport) -> None:
    rec = Recorder(forbid_topic="T")
    producer = await make_producer(transport, hooks=ProducerHooks((rec,), ()))
    with pytest.raises(MQClientError, match="forbidden by hook"):
        await producer.send(Message("T", b"x"))
    assert transport.calls == []
