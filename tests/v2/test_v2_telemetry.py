"""v2 Telemetry against an in-process gateway over a real cluster: the settings handshake for producers and
consumers, INVALID_ARGUMENT without a role, the stream staying open (second settings answered, server pushes),
the session table, the idle close, and 10,000 streams opened and dropped leaving nothing behind."""

from __future__ import annotations

import asyncio
import resource as rlimit
import time
from pathlib import Path

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.protocol import SubscriptionGroupConfig
from mq_gateway.v2.client_settings import CONSUMER_BACKOFF_S
from mq_gateway.v2.telemetry import TelemetrySession, TelemetrySessions
from mq_gateway.v2.unwired_consumer import UnwiredConsumer
from mq_local.cluster import LocalCluster

from tests.v2.conftest import Gateway, metadata, resource, start_gateway

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
DEADLINE_S = 30.0


def producer_settings() -> definition_pb2.Settings:
    return definition_pb2.Settings(
        client_type=definition_pb2.PRODUCER,
        request_timeout={"seconds": 3},
        publishing=definition_pb2.Publishing(topics=[resource("T")], max_body_size=128 * 1024 * 1024),
        user_agent=definition_pb2.UA(language=definition_pb2.PYTHON, version="5.1.2", hostname="h"),
    )


def consumer_settings(group: str) -> definition_pb2.Settings:
    return definition_pb2.Settings(
        client_type=definition_pb2.SIMPLE_CONSUMER,
        subscription=definition_pb2.Subscription(group=resource(group)),
    )


def settings_command(settings: definition_pb2.Settings) -> service_pb2.TelemetryCommand:
    return service_pb2.TelemetryCommand(settings=settings)


async def handshake(
    gateway: Gateway, settings: definition_pb2.Settings, client_id: str = "tele-client"
) -> tuple[
    grpc.aio.StreamStreamCall[service_pb2.TelemetryCommand, service_pb2.TelemetryCommand], service_pb2.TelemetryCommand
]:
    call = gateway.stub.Telemetry(metadata=metadata(client_id), timeout=DEADLINE_S * 4)
    await call.write(settings_command(settings))
    reply = await asyncio.wait_for(call.read(), DEADLINE_S)
    assert isinstance(reply, service_pb2.TelemetryCommand)
    return call, reply


async def wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_producer_handshake_answers_complete_settings(gateway: Gateway) -> None:
    call, reply = await handshake(gateway, producer_settings())
    assert reply.status.code == Code.OK
    got = reply.settings
    assert got.client_type == definition_pb2.PRODUCER
    assert got.user_agent.version == "5.1.2"  # echoed
    assert got.backoff_policy.max_attempts == 3
    backoff = got.backoff_policy.exponential_backoff
    assert (backoff.initial.ToMilliseconds(), backoff.max.ToMilliseconds(), backoff.multiplier) == (10, 1000, 2.0)
    assert got.publishing.max_body_size == 4 * 1024 * 1024
    assert got.publishing.validate_message_type is True
    assert [t.name for t in got.publishing.topics] == ["T"]
    assert got.HasField("metric")
    assert got.metric.on is False
    # the stream stays open: a second settings command is answered on it
    await call.write(settings_command(producer_settings()))
    again = await asyncio.wait_for(call.read(), DEADLINE_S)
    assert again.status.code == Code.OK
    assert again.settings.publishing.max_body_size == 4 * 1024 * 1024
    sessions = gateway.controller.v2.telemetry.sessions
    assert len(sessions) == 1
    assert sessions.settings_of("tele-client") is not None
    # a server push reaches the client
    push = service_pb2.TelemetryCommand(
        recover_orphaned_transaction_command=service_pb2.RecoverOrphanedTransactionCommand(transaction_id="tx")
    )
    assert sessions.push("tele-client", push)
    pushed = await asyncio.wait_for(call.read(), DEADLINE_S)
    assert pushed.recover_orphaned_transaction_command.transaction_id == "tx"
    assert not sessions.push("nobody", push)
    call.cancel()
    await wait_for(lambda: len(sessions) == 0, "the session leaves when the stream ends")


async def test_consumer_handshake_uses_the_default_group_policy(gateway: Gateway) -> None:
    call, reply = await handshake(gateway, consumer_settings("GroupWithoutConfig"))
    assert reply.status.code == Code.OK
    got = reply.settings
    assert got.subscription.group.name == "GroupWithoutConfig"
    assert got.subscription.receive_batch_size == 32
    assert got.subscription.long_polling_timeout.ToSeconds() == 20
    assert got.subscription.fifo is False
    assert got.backoff_policy.max_attempts == 17
    assert [d.ToSeconds() for d in got.backoff_policy.customized_backoff.next] == list(CONSUMER_BACKOFF_S)
    assert CONSUMER_BACKOFF_S[0] == 1
    assert CONSUMER_BACKOFF_S[-1] == 7200
    assert len(CONSUMER_BACKOFF_S) == 18
    assert got.metric.on is False
    call.cancel()


class OrderlyGroups(UnwiredConsumer):
    """A consumer side whose groups are orderly with 3 retries."""

    async def subscription_group_config(self, group: str) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig(group, consume_message_orderly=True, retry_max_times=3)


async def test_consumer_handshake_follows_the_group_config(cluster: LocalCluster) -> None:
    gateway = await start_gateway(cluster, consumer=OrderlyGroups())
    try:
        call, reply = await handshake(gateway, consumer_settings("OrderlyGroup"))
        assert reply.settings.subscription.fifo is True
        assert reply.settings.backoff_policy.max_attempts == 4
        call.cancel()
    finally:
        await gateway.channel.close()
        await gateway.controller.stop(0)


async def test_settings_without_a_role_fail_with_invalid_argument(gateway: Gateway) -> None:
    call = gateway.stub.Telemetry(metadata=metadata(), timeout=DEADLINE_S)
    await call.write(settings_command(definition_pb2.Settings(client_type=definition_pb2.PRODUCER)))
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call.read()
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(gateway.controller.v2.telemetry.sessions) == 0


async def test_a_stream_without_settings_is_closed_after_the_idle_limit(cluster: LocalCluster) -> None:
    gateway = await start_gateway(cluster, client_idle_timeout_ms=300)
    try:
        call = gateway.stub.Telemetry(metadata=metadata(), timeout=DEADLINE_S)
        ended = await asyncio.wait_for(call.read(), DEADLINE_S)
        assert ended is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK
        # a stream that sent settings is not idle-closed
        live, reply = await handshake(gateway, producer_settings())
        assert reply.status.code == Code.OK
        read = asyncio.ensure_future(live.read())
        done, _ = await asyncio.wait({read}, timeout=1.0)  # three idle limits: a closing stream would have ended
        assert not done
        live.cancel()
        read.cancel()
    finally:
        await gateway.channel.close()
        await gateway.controller.stop(0)


def rss_bytes() -> int:
    fields = Path("/proc/self/statm").read_text().split()
    return int(fields[1]) * rlimit.getpagesize()


STREAMS = 10_000
BATCH = 250


async def _open_and_drop(gateway: Gateway, index: int) -> None:
    call, reply = await handshake(gateway, producer_settings(), client_id=f"many-{index}")
    assert reply.status.code == Code.OK
    call.cancel()


async def test_ten_thousand_streams_opened_and_dropped_leave_memory_bounded(gateway: Gateway) -> None:
    sessions = gateway.controller.v2.telemetry.sessions
    await asyncio.gather(*(_open_and_drop(gateway, i) for i in range(BATCH)))  # warm up
    await wait_for(lambda: len(sessions) == 0, "warm-up sessions gone")
    before = rss_bytes()
    for start in range(0, STREAMS, BATCH):
        await asyncio.gather(*(_open_and_drop(gateway, i) for i in range(start, start + BATCH)))
        # silent streams too: opened, never written, dropped
        silent = [gateway.stub.Telemetry(metadata=metadata(f"silent-{start}-{i}")) for i in range(BATCH // 5)]
        for call in silent:
            call.cancel()
    await wait_for(lambda: len(sessions) == 0, "every session left with its stream")
    growth = rss_bytes() - before
    assert growth < 150 * 1024 * 1024, f"RSS grew {growth / 2**20:.1f} MiB over {STREAMS} streams"
    beat = await gateway.stub.Heartbeat(service_pb2.HeartbeatRequest(), metadata=metadata(), timeout=10)
    assert beat.status.code == Code.OK


async def test_the_session_table_is_bounded_oldest_first() -> None:
    table = TelemetrySessions(max_sessions=2)
    first, second, third = TelemetrySession("a"), TelemetrySession("b"), TelemetrySession("c")
    for session in (first, second, third):
        table.register(session)
    assert len(table) == 2
    assert table.get("a") is None
    assert first.closed
    assert not second.closed
    newer_b = TelemetrySession("b")
    table.register(newer_b)
    table.remove(second)  # an older stream of the client ending leaves the newer session alone
    assert table.get("b") is newer_b
    command = service_pb2.TelemetryCommand()
    assert table.push("b", command)
    assert not first.offer(command)
