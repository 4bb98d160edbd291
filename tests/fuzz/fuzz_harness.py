"""Fuzz every RPC of a running service with raw bytes (tests/fuzz/proto_grammar.py) and count what comes back.

A call is sent with identity serializers, so any byte string reaches the server. Its outcome is a label: the gRPC
status name when the call failed (``grpc:INVALID_ARGUMENT``), else the answer's own code (``code:17`` for a
RocketMQ response code, ``v2:ILLEGAL_TOPIC`` for a v2 Status, ``ok`` when the answer carries none). A call still
unanswered at its deadline is a hang; UNKNOWN, INTERNAL or DATA_LOSS is an unexpected answer (an exception that
escaped a handler). Calls run ``concurrency`` at a time on the caller's loop.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
from apache.rocketmq.v2 import definition_pb2
from google.protobuf.descriptor import Descriptor, MethodDescriptor, ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from proto_grammar import HOSTILE_CASES, SHAPED, FuzzRequest, Grammar, message_class

CALL_DEADLINE_S: Final = 20.0
MAX_ANSWERS_READ: Final = 64
UNEXPECTED: Final = frozenset({"grpc:UNKNOWN", "grpc:INTERNAL", "grpc:DATA_LOSS"})
CLIENT_OPTIONS: Final = [
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
]
V2_METADATA: Final = (("x-mq-client-id", "fuzz-client"), ("x-mq-language", "PYTHON"))


@dataclass(frozen=True, slots=True)
class Target:
    """A running service: its name, ``127.0.0.1:port``, the gRPC services it serves and its process id."""

    name: str
    addr: str
    services: tuple[ServiceDescriptor, ...]
    pid: int


@dataclass(slots=True)
class ServiceReport:
    """What fuzzing one service gave. ``rss_*_bytes`` from /proc/<pid>/status (VmRSS)."""

    name: str
    requests: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    by_method: Counter[tuple[str, str]] = field(default_factory=Counter)
    hangs: int = 0
    unexpected: int = 0
    crashed: bool = False
    rss_before_bytes: int = 0
    rss_after_bytes: int = 0

    @property
    def rss_growth_bytes(self) -> int:
        return self.rss_after_bytes - self.rss_before_bytes


def rss_bytes(pid: int, key: str = "VmRSS") -> int:
    """``key`` of /proc/<pid>/status in bytes: VmRSS (resident now) or VmHWM (the peak); 0 when the process is
    gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def methods_of(target: Target) -> list[MethodDescriptor]:
    return [m for service in target.services for m in service.methods]


def method_path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def label_of(method: MethodDescriptor, answer: bytes | None) -> str:
    """The label of an answered call: the answer's ``code`` or v2 ``status``, or ``ok``."""
    if answer is None:
        return "ok"
    try:
        msg: Any = message_class(method.output_type).FromString(answer)
    except Exception:  # an answer our own stubs cannot read is a finding too
        return "undecodable-answer"
    fields = method.output_type.fields_by_name
    if "code" in fields:
        return f"code:{msg.code}"
    if "status" in fields and msg.HasField("status"):
        return f"v2:{definition_pb2.Code.Name(msg.status.code)}" if msg.status.code in _V2_CODES else "v2:?"
    return "ok"


_V2_CODES: Final = frozenset(v.number for v in definition_pb2.Code.DESCRIPTOR.values)


async def _frames(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _write_once(call: Any, data: bytes) -> None:
    """Write one frame and half-close. A server that answered before reading (e.g. no client id) may have ended
    the call already: the write then fails and the call's own status (read next) is the answer. Sending through
    a request iterator instead lets grpc's client report that race as INTERNAL "Internal error from Core"."""
    try:
        await call.write(data)
        await call.done_writing()
    except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
        return


async def call_raw(channel: grpc.aio.Channel, request: FuzzRequest, metadata: Sequence[tuple[str, str]]) -> str:
    """Send ``request`` and return its outcome label (``hang`` at the deadline)."""
    method, path = request.method, method_path(request.method)
    ident: Any = None  # grpc passes bytes through when no serializer is given
    try:
        answer: bytes | None = None
        if method.client_streaming or method.server_streaming:
            if method.client_streaming and method.server_streaming:
                call: Any = channel.stream_stream(path, ident, ident)(timeout=CALL_DEADLINE_S, metadata=metadata)
                await _write_once(call, request.data)
            elif method.server_streaming:
                call = channel.unary_stream(path, ident, ident)(
                    request.data, timeout=CALL_DEADLINE_S, metadata=metadata
                )
            else:
                unary_answer = await channel.stream_unary(path, ident, ident)(
                    _frames(request.data), timeout=CALL_DEADLINE_S, metadata=metadata
                )
                return label_of(method, unary_answer)
            read = 0
            async for item in call:
                answer, read = item, read + 1
                if read >= MAX_ANSWERS_READ:
                    call.cancel()
                    break
        else:
            answer = await channel.unary_unary(path, ident, ident)(
                request.data, timeout=CALL_DEADLINE_S, metadata=metadata
            )
        return label_of(method, answer)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return "hang"
        return f"grpc:{exc.code().name}"
    except asyncio.CancelledError:
        return "ok"


def _request_types(target: Target) -> list[Descriptor]:
    return [m.input_type for m in methods_of(target)]


async def serving(addr: str) -> bool:
    """True when grpc.health.v1 at ``addr`` answers SERVING within 10 s."""
    async with grpc.aio.insecure_channel(addr) as channel:
        stub: Any = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def fuzz_target(
    target: Target, *, requests: int, seed: int, cases: Sequence[str] = (SHAPED, *HOSTILE_CASES), concurrency: int = 16
) -> ServiceReport:
    """Send ``requests`` fuzz requests (methods round-robin, cases at random) to ``target``; its report."""
    rng = random.Random(seed)
    grammar = Grammar(rng)
    methods = methods_of(target)
    others = _request_types(target)
    report = ServiceReport(target.name, rss_before_bytes=rss_bytes(target.pid))
    gate = asyncio.Semaphore(concurrency)
    async with grpc.aio.insecure_channel(target.addr, options=CLIENT_OPTIONS) as channel:

        async def one(request: FuzzRequest, metadata: Sequence[tuple[str, str]]) -> None:
            async with gate:
                label = await call_raw(channel, request, metadata)
            report.answers[label] += 1
            report.by_method[(request.method.name, label)] += 1
            report.hangs += label == "hang"
            report.unexpected += label in UNEXPECTED

        tasks = []
        for index in range(requests):
            method = methods[index % len(methods)]
            request = grammar.hostile(method, rng.choice(cases), [o for o in others if o is not method.input_type])
            metadata = V2_METADATA if rng.random() < 0.8 else ()
            tasks.append(asyncio.ensure_future(one(request, metadata)))
            if len(tasks) >= 4 * concurrency:
                await asyncio.gather(*tasks)
                tasks.clear()
        await asyncio.gather(*tasks)
    report.requests = requests
    report.crashed = not await serving(target.addr)
    report.rss_after_bytes = rss_bytes(target.pid)
    return report
