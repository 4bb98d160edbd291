"""bench_v2's own logic: the pre-serialised SendMessage template the Node.js generator patches, the generator's
protocol against a real grpc.aio MessagingService, and the PASS/MISS maths of the targets. No timings asserted."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))  # the bench scripts import each other as top-level modules

import bench_v2
from bench_gateway import CpuMeter, make_row
from v2_bench_rows import (
    FLOOR_SYSTEMS,
    NODE_WARMUP_CALLS,
    SendLoad,
    floor_send_row,
    message_id,
    node_send_row,
    send_template,
)

NODE_MODULES = bench_v2.NODE_MODULES


def patched(template: bytes, offset: int, n: int) -> service_pb2.SendMessageRequest:
    """What v2_send_load.js sends for call ``n``."""
    raw = bytearray(template)
    raw[offset : offset + 16] = f"{n:016X}".encode()
    return service_pb2.SendMessageRequest.FromString(bytes(raw))


def test_send_template_counter_lands_in_the_message_id() -> None:
    template, offset = send_template("bench_topic", "0123456789ABCDEF")
    for n in (0, 1, 0xABC, 2**40 + 7):
        request = patched(template, offset, n)
        (message,) = request.messages
        assert message.system_properties.message_id == message_id("0123456789ABCDEF", n)
        assert len(message.system_properties.message_id) == 34
        assert message.topic.name == "bench_topic"
        assert len(message.body) == 1024
        assert message.system_properties.message_type == definition_pb2.MessageType.NORMAL


class FakeMessaging(service_pb2_grpc.MessagingServiceServicer):
    """Answers OK, except every 10th call after the warm-up (by the id's counter) with TOO_MANY_REQUESTS; records
    ids and client ids."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.client_ids: set[str] = set()

    async def SendMessage(self, request: Any, context: Any) -> Any:  # the generated name
        mid = request.messages[0].system_properties.message_id
        self.ids.append(mid)
        self.client_ids.update(v for k, v in context.invocation_metadata() if k == "x-mq-client-id")
        n = int(mid[-16:], 16)
        refuse = n >= NODE_WARMUP_CALLS and n % 10 == 9
        code = definition_pb2.Code.TOO_MANY_REQUESTS if refuse else definition_pb2.Code.OK
        status = definition_pb2.Status(code=code, message="")
        entry = service_pb2.SendResultEntry(status=status, message_id=mid)
        return service_pb2.SendMessageResponse(status=status, entries=[entry])


@pytest.fixture
async def fake_server() -> AsyncIterator[tuple[str, FakeMessaging]]:
    server = grpc.aio.server()
    servicer = FakeMessaging()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_node_generator_sends_unique_ids_and_counts_refusals(fake_server: tuple[str, FakeMessaging]) -> None:
    require_node()
    addr, servicer = fake_server
    meter = CpuMeter(0, [])  # no such PID: CPU reads as 0
    row = await node_send_row(SendLoad(addr, "bench_topic", 8, 2_000, 120.0), NODE_MODULES, meter)
    measured = servicer.ids[-2_000:]
    assert (
        len(servicer.ids) == len(set(servicer.ids)) == 2_000 + NODE_WARMUP_CALLS
    )  # the warm-up calls, then the bounded row
    assert (row.messages, row.failed, row.clients) == (1_800, 200, 8)
    assert "42900" in row.api  # the refusal code is reported
    assert all(len(mid) == 34 for mid in measured)
    assert len(servicer.client_ids) == 1


def require_node() -> None:
    if shutil.which("node") is None or not NODE_MODULES.joinpath("@grpc/grpc-js").is_dir():
        pytest.fail(f"node and {NODE_MODULES}/@grpc/grpc-js are required: run `make node sdks`")


@pytest.mark.parametrize("front", sorted(FLOOR_SYSTEMS))
async def test_floor_row_runs_the_do_nothing_server_and_stops_it(front: str) -> None:
    require_node()
    row = await floor_send_row(SendLoad("set by the row", "bench_topic", 8, 500, 120.0), NODE_MODULES, front)
    assert (row.system, row.messages, row.failed) == (FLOOR_SYSTEMS[front], 500, 0)
    assert row.gateway_cpu_us_per_msg > 0  # the floor server's own CPU was read from /proc while it ran


def test_targets_pass_and_miss() -> None:
    send = replace(make_row("gateway v2", "SYNC_FLUSH", "v2 SendMessage x1 (node generator 9 us CPU/msg)", 64, (900, 0),
                            1.0, []), gateway_cpu_us_per_msg=50.0)  # fmt: skip
    floor = replace(make_row(FLOOR_SYSTEMS["native"], "-", "v2 SendMessage x1 (node generator 9 us CPU/msg)", 64,
                             (1_000, 0), 1.0, []), gateway_cpu_us_per_msg=40.0)  # fmt: skip
    publish = make_row("nats-jetstream", "file store", "nats-py await js.publish x1", 64, (2_000, 0), 1.0, [])
    drain = make_row("gateway v2", "SYNC_FLUSH", "v2 ReceiveMessage(32) + AckMessage per message", 16, (500, 0),
                     1.0, [])  # fmt: skip
    fetch = make_row("nats-jetstream", "file store", "nats-py fetch(32) + ack", 16, (400, 0), 1.0, [])
    latency = replace(make_row("gateway v2", "SYNC_FLUSH", "v2 SendMessage 500/s -> long-polling ReceiveMessage", 1,
                               (100, 0), 1.0, [0.001] * 98 + [0.05] * 2), gateway_cpu_us_per_msg=300.0)  # fmt: skip
    checks = bench_v2.targets([send, floor, publish, drain, fetch, latency], "native")
    cpu_x, cpu_us, versus_floor, versus_publish, drained, versus_fetch, p99 = checks
    assert cpu_x["pass"] is True  # 50 / 40 = 1.25 x
    assert "1.25 x" in str(cpu_x["measured"])
    assert cpu_us["pass"] is True  # 50 <= 60 us
    assert versus_floor["pass"] is True  # 900 >= 0.7 x 1,000
    assert versus_publish["pass"] is False  # 900 < 0.5 x 2,000
    assert "0.45 x" in str(versus_publish["measured"])
    assert drained["pass"] is False  # 500 < 10,038 msgs/s
    assert versus_fetch["pass"] is True  # 500 >= 1 x 400
    assert p99["pass"] is False  # p99 = 50 ms
    slow = replace(send, gateway_cpu_us_per_msg=70.0)
    assert [c["pass"] for c in bench_v2.targets([slow, floor], "native")[:2]] == [False, False]  # 1.75 x; 70 us
    assert len(bench_v2.targets([], "grpcio")) == 5  # the native-only checks are left out
    assert {c["pass"] for c in bench_v2.targets([], "native")} == {None}
