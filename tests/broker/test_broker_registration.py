"""Registration with name servers over gRPC: at start, after a topic change, periodically; unregister on stop;
an unreachable name server is logged and retried, never fatal.

The name server here is a recording mq.namesrv.v1.NameServer servicer on 127.0.0.1 (the wire contract is what
is under test).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from broker_grpc_testkit import RunningBrokers, closed_port, send_request, stream_send
from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq_common.response_code import ResponseCode
from namesrv_testkit import RecordingNameServer, recording_namesrv


@pytest.fixture
async def namesrv() -> AsyncIterator[tuple[RecordingNameServer, str]]:
    async with recording_namesrv() as running:
        yield running


async def wait_for(predicate: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_registers_at_start_after_topic_change_and_unregisters(
    namesrv: tuple[RecordingNameServer, str], brokers: RunningBrokers, tmp_path: Path
) -> None:
    recorder, addr = namesrv
    dead = f"127.0.0.1:{closed_port()}"
    controller, stub = await brokers.start(tmp_path / "store", namesrv_addr=f"{dead};{addr}", broker_name="broker-x")
    await wait_for(lambda: len(recorder.registrations) >= 1)
    first = recorder.registrations[0]
    assert (first.cluster_name, first.broker_name, first.broker_id) == ("DefaultCluster", "broker-x", 0)
    assert first.broker_addr == f"127.0.0.1:{controller.port}"
    assert "TBW102" in first.topic_config_table
    assert first.topic_config_table["TBW102"].perm == 7
    registrar = controller.registrar
    assert registrar is not None
    await wait_for(lambda: registrar.last_results == {dead: False, addr: True})

    created = await stub.CreateTopic(
        broker_pb2.CreateTopicRequest(
            topic_config=common_pb2.TopicConfig(topic_name="Fresh", read_queue_nums=2, write_queue_nums=2, perm=6)
        )
    )
    assert created.code == ResponseCode.SUCCESS
    await wait_for(lambda: "Fresh" in recorder.registrations[-1].topic_config_table)  # at once, not in 30 s
    latest = recorder.registrations[-1]
    assert latest.data_version.counter > first.data_version.counter
    assert latest.topic_config_table["Fresh"].write_queue_nums == 2

    await brokers.stop_all()
    assert [(u.broker_name, u.broker_addr) for u in recorder.unregistrations] == [
        ("broker-x", f"127.0.0.1:{controller.port}")
    ]


async def test_registers_again_every_interval(
    namesrv: tuple[RecordingNameServer, str], brokers: RunningBrokers, tmp_path: Path
) -> None:
    recorder, addr = namesrv
    await brokers.start(tmp_path / "store", namesrv_addr=addr, register_broker_interval_ms=1_000)
    await wait_for(lambda: len(recorder.registrations) >= 3, limit_s=10)


async def test_unreachable_name_servers_never_stop_the_broker(brokers: RunningBrokers, tmp_path: Path) -> None:
    dead = f"127.0.0.1:{closed_port()}"
    controller, stub = await brokers.start(tmp_path / "store", namesrv_addr=dead)
    registrar = controller.registrar
    assert registrar is not None
    await wait_for(lambda: registrar.rounds >= 1)
    assert registrar.last_results == {dead: False}
    sent = await stream_send(stub, broker_pb2.SendMessageRequest(topic="Any", body=b"x", default_topic="TBW102"))
    assert sent.code == ResponseCode.SUCCESS


async def test_a_broker_without_name_servers_registers_nowhere(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "store", namesrv_addr=" ; ")
    assert (controller.namesrv_client, controller.registrar) == (None, None)
    sent = await stream_send(stub, broker_pb2.SendMessageRequest(topic="Any", body=b"x", default_topic="TBW102"))
    assert sent.code == ResponseCode.SUCCESS
    await brokers.stop_all()  # nothing to unregister from


async def test_a_send_that_creates_a_topic_is_answered_after_its_route_is_registered(
    namesrv: tuple[RecordingNameServer, str], brokers: RunningBrokers, tmp_path: Path
) -> None:
    """The first send of an auto-created topic returns once a registration carrying the topic has reached the
    name server, so a consumer asking for the route right after the send finds it (the README's example), even
    from a slow name server."""
    recorder, addr = namesrv
    _controller, stub = await brokers.start(tmp_path / "store", namesrv_addr=addr, broker_name="broker-x")
    await wait_for(lambda: len(recorder.registrations) >= 1)
    recorder.register_delay_s = 0.3  # well inside the send path's bound (AUTO_CREATE_ROUTE_WAIT_S)
    answer = await stream_send(stub, send_request("AutoMade"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert "AutoMade" in recorder.registrations[-1].topic_config_table
