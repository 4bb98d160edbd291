"""Micro-benchmark (not a pytest module): gateway CPU per message of v2 SendMessage (one message per call) against
v1 Send, 64 concurrent callers, through a real LocalCluster (mqnamesrv, one mqbroker, mqgateway processes).

The callers are asyncio tasks of this process spread over 8 channels (closed loop, 1 KiB bodies, ``--seconds``
per row); the gateway's CPU comes from /proc/<pid>/stat (utime + stime), so the client's own cost is not
counted. Prints one line per row: calls/s and gateway CPU us per message (target for v2: <= 100 us).
Run: ``uv run --frozen python tests/bench/v2_send_cpu.py [--seconds 5] [--callers 64]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import grpc
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from bench_gateway import cpu_seconds
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests

BODY = b"x" * 1024
CHANNELS = 8
METADATA = (("x-mq-client-id", "bench@1@1@x"), ("x-mq-language", "PYTHON"), ("x-mq-request-id", "r"))


async def closed_loop(call: Callable[[int], Awaitable[bool]], callers: int, seconds: float) -> tuple[int, int]:
    """``callers`` tasks calling ``call(i)`` until ``seconds`` pass; (ok, failed) calls."""
    counts = [0, 0]
    stop_at = time.monotonic() + seconds

    async def caller(i: int) -> None:
        while time.monotonic() < stop_at:
            counts[0 if await call(i) else 1] += 1

    await asyncio.gather(*(caller(i) for i in range(callers)))
    return counts[0], counts[1]


async def row(name: str, pid: int, call: Callable[[int], Awaitable[bool]], callers: int, seconds: float) -> None:
    await closed_loop(call, callers, min(seconds, 2.0))  # warm-up: routes, channels, coalescer
    begin_cpu, begin = cpu_seconds([pid]), time.perf_counter()
    ok, failed = await closed_loop(call, callers, seconds)
    elapsed, cpu = time.perf_counter() - begin, cpu_seconds([pid]) - begin_cpu
    print(f"{name:<24} {ok / elapsed:>9.0f} calls/s  failed {failed:>5}  gateway {cpu * 1e6 / max(ok, 1):>6.1f} us/msg")


def v2_call(stubs: Sequence[service_pb2_grpc.MessagingServiceStub], topic: str) -> Callable[[int], Awaitable[bool]]:
    message = definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic),
        body=BODY,
        system_properties=definition_pb2.SystemProperties(
            message_id="0102FC000000013D600B1777E800000000", message_type=definition_pb2.NORMAL, born_host="127.0.0.21"
        ),
    )
    request = service_pb2.SendMessageRequest(messages=[message])

    async def call(i: int) -> bool:
        answer = await stubs[i % len(stubs)].SendMessage(request, metadata=METADATA, timeout=10)
        return bool(answer.status.code == definition_pb2.OK)

    return call


def heartbeat_call(stubs: Sequence[service_pb2_grpc.MessagingServiceStub]) -> Callable[[int], Awaitable[bool]]:
    """The floor: a v2 RPC that does nothing (grpc.aio's own cost per call plus the servicer's wrapper)."""
    request = service_pb2.HeartbeatRequest(client_type=definition_pb2.PRODUCER)

    async def call(i: int) -> bool:
        answer = await stubs[i % len(stubs)].Heartbeat(request, metadata=METADATA, timeout=10)
        return bool(answer.status.code == definition_pb2.OK)

    return call


def health_call(channels: Sequence[grpc.aio.Channel]) -> Callable[[int], Awaitable[bool]]:
    """grpc.health.v1 Check: the server's cost of a trivial grpc.aio call."""
    stubs = [health_pb2_grpc.HealthStub(c) for c in channels]
    request = health_pb2.HealthCheckRequest()

    async def call(i: int) -> bool:
        answer = await stubs[i % len(stubs)].Check(request, timeout=10)
        return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)

    return call


def v1_call(stubs: Sequence[gateway_pb2_grpc.ProducerGatewayStub], topic: str) -> Callable[[int], Awaitable[bool]]:
    request = gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=BODY))

    async def call(i: int) -> bool:
        answer = await stubs[i % len(stubs)].Send(request, timeout=10)
        return bool(answer.result.code == 0)

    return call


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        spec = spec_for_tests(Path(folder), broker_groups=1, flush_disk_type="ASYNC_FLUSH", log_level="WARNING")
        with LocalCluster(spec) as cluster:
            topic = await make_topic(cluster, "v2_send_cpu")
            channels = [grpc.aio.insecure_channel(cluster.gateway_addr) for _ in range(CHANNELS)]
            pid = cluster.gateway.pid
            try:
                v2 = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
                v1 = [gateway_pb2_grpc.ProducerGatewayStub(c) for c in channels]
                calls = {
                    "v2": v2_call(v2, topic),
                    "v1": v1_call(v1, topic),
                    "heartbeat": heartbeat_call(v2),
                    "health": health_call(channels),
                }
                for name in args.rows:
                    call = calls[name]
                    await row(f"{name} x{args.callers}", pid, call, args.callers, args.seconds)
            finally:
                for channel in channels:
                    await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--callers", type=int, default=64)
    rows = ["v2", "v1", "heartbeat", "health"]
    parser.add_argument("--rows", nargs="+", default=rows, choices=rows)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
