"""Fuzz every RPC of a running service with raw bytes (tests/fuzz/proto_grammar.py) and count what comes back.

A call is sent with identity serializers, so any byte string reaches the server. Its outcome is a label: the gRPC
status name when the call failed (``grpc:INVALID_ARGUMENT``), else the answer's own code (``code:17`` for a
RocketMQ response code, ``v2:ILLEGAL_TOPIC`` for a v2 Status, ``ok`` when the answer carries none). A call still
unanswered at its deadline is a hang; UNKNOWN, INTERNAL or DATA_LOSS (an exception that escaped a handler), the
RocketMQ ``SYSTEM_ERROR`` (``code:1``) and the v2 ``INTERNAL_SERVER_ERROR`` / ``INTERNAL_ERROR`` (an exception a
handler caught: input nobody validated) are unexpected answers, unless :data:`LEGITIMATE` documents why that RPC
may give one. Each unexpected answer is kept by RPC and case with the first request that produced it, so that a
finding can be replayed. Calls run ``concurrency`` at a time on the caller's loop.
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
UNEXPECTED: Final = frozenset(
    {
        "grpc:UNKNOWN",
        "grpc:INTERNAL",
        "grpc:DATA_LOSS",
        "code:1",  # ResponseCode.SYSTEM_ERROR: a handler's unexpected exception
        "v2:INTERNAL_SERVER_ERROR",
        "v2:INTERNAL_ERROR",
    }
)
# (RPC name, label) -> (how the documented answer's remark starts, why it is legitimate). Any other unexpected
# answer of that RPC (e.g. "<RPC> failed on an internal error") still counts.
LEGITIMATE: Final[dict[tuple[str, str], tuple[str, str]]] = {
    ("ConsumerSendMsgBack", "code:1"): (
        "look message by offset failed, ",
        "RocketMQ's SendMessageProcessor#consumerSendMsgBack answers SYSTEM_ERROR with this remark when no message "
        "starts at the given CommitLog offset; clients (DefaultMQPushConsumerImpl#sendMessageBack) then send the "
        "message to the retry topic themselves, so the code is kept for wire compatibility",
    ),
}
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
    findings: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    samples: dict[tuple[str, str, str], tuple[bytes, str]] = field(default_factory=dict)
    crashed: bool = False
    rss_before_bytes: int = 0
    rss_after_bytes: int = 0

    @property
    def rss_growth_bytes(self) -> int:
        return self.rss_after_bytes - self.rss_before_bytes

    def record(self, request: FuzzRequest, answer: Answer) -> None:
        """Count one answer; an unexpected one also by (RPC, case, label), with its first request and remark kept."""
        label = answer.label
        self.answers[label] += 1
        self.by_method[(request.method.name, label)] += 1
        self.hangs += label == "hang"
        if is_unexpected(request.method.name, answer):
            self.unexpected += 1
            key = (request.method.name, request.case, label)
            self.findings[key] += 1
            self.samples.setdefault(key, (request.data, answer.remark))


def is_unexpected(method_name: str, answer: Answer) -> bool:
    """True when ``answer`` is an unexpected answer of RPC ``method_name`` (not documented in LEGITIMATE)."""
    if answer.label not in UNEXPECTED:
        return False
    documented = LEGITIMATE.get((method_name, answer.label))
    return documented is None or not answer.remark.startswith(documented[0])


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


@dataclass(frozen=True, slots=True)
class Answer:
    """One call's outcome: its label (see the module) and the answer's remark or v2 status message ("" if none)."""

    label: str
    remark: str = ""


def answer_of(method: MethodDescriptor, answer: bytes | None) -> Answer:
    """The outcome of an answered call: the answer's ``code`` or v2 ``status`` with its remark, or ``ok``."""
    if answer is None:
        return Answer("ok")
    try:
        msg: Any = message_class(method.output_type).FromString(answer)
    except Exception:  # an answer our own stubs cannot read is a finding too
        return Answer("undecodable-answer")
    fields = method.output_type.fields_by_name
    if "code" in fields:
        return Answer(f"code:{msg.code}", str(getattr(msg, "remark", "")))
    if "status" in fields and msg.HasField("status"):
        name = definition_pb2.Code.Name(msg.status.code) if msg.status.code in _V2_CODES else "?"
        return Answer(f"v2:{name}", msg.status.message)
    return Answer("ok")


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


async def call_raw(channel: grpc.aio.Channel, request: FuzzRequest, metadata: Sequence[tuple[str, str]]) -> Answer:
    """Send ``request`` and return its outcome (``hang`` at the deadline)."""
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
                return answer_of(method, unary_answer)
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
        return answer_of(method, answer)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return Answer("hang")
        return Answer(f"grpc:{exc.code().name}", str(exc.details() or ""))
    except asyncio.CancelledError:
        return Answer("ok")


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
                answer = await call_raw(channel, request, metadata)
            report.record(request, answer)

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
