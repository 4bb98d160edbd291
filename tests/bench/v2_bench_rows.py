"""The rows of bench_v2.py against the gateway's RocketMQ 5 MessagingService (raw ``apache.rocketmq.v2`` stubs, the
Node.js generator v2_send_load.js and the SDK script v2_sdk_bench.py run as subprocesses). Not a pytest module.

Every row is bounded in messages and in time and stops by itself; failures are counted, never hidden.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from bench_gateway import CpuMeter, Row, make_row, pace, percentile_ms
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

BODY: Final = os.urandom(1024)
OK: Final = definition_pb2.Code.OK
MESSAGE_NOT_FOUND: Final = definition_pb2.Code.MESSAGE_NOT_FOUND
RPC_TIMEOUT_S: Final = 30.0
FLOOR_SYSTEM: Final = "floor: do-nothing grpc.aio"
FLOOR_SYSTEMS: Final = {"grpcio": FLOOR_SYSTEM, "native": "floor: do-nothing pygrpc-native"}
RECEIVE_BATCH: Final = 32
RECEIVE_INVISIBLE_S: Final = 60
# the gateway clamps long polls to [5 s, 20 s] (the proxy's rule); 5 s keeps a drained row's stragglers short
DRAIN_POLL_S: Final = 5
LATENCY_POLL_S: Final = 20
LATENCY_RECEIVERS: Final = 4
NODE_WARMUP_CALLS: Final = 200
NODE_CHANNELS: Final = 1  # one channel per endpoint, as the SDKs; cheapest for both ends (4 or 8 cost more)
SDK_TIMEOUT_S: Final = 600.0
_TIME_PREFIX: Final = struct.Struct(">q")
_NODE_GENERATOR: Final = Path(__file__).with_name("v2_send_load.js")
_SDK_SCRIPT: Final = Path(__file__).with_name("v2_sdk_bench.py")
_FLOOR_SERVER: Final = Path(__file__).with_name("v2_floor_server.py")


# -- what the SDKs send -------------------------------------------------------------------------------------------


def client_id(index: int = 0) -> str:
    """The SDKs' shape: host@pid@index@base36(nanos)."""
    nanos, digits = time.time_ns(), ""
    while nanos:
        nanos, rest = divmod(nanos, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rest] + digits
    return f"{socket.gethostname()}@{os.getpid()}@{index}@{digits}"


def python_sdk_metadata(cid: str) -> tuple[tuple[str, str], ...]:
    """The headers the Python SDK 5.1.2 sends on every call (RMQ5-PROTOCOL.md section 2) but the request id, which
    :func:`with_request_id` adds per call. Authorization is sent even without credentials, as that SDK does."""
    date_time = time.strftime("%Y%m%dT%H%M%SZ")
    signature = hmac.new(b"", date_time.encode(), hashlib.sha1).hexdigest()
    return (
        ("x-mq-client-id", cid), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"), ("x-mq-date-time", date_time), ("x-mq-namespace", ""),
        ("authorization", f"MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature={signature}"),
    )  # fmt: skip


def node_sdk_metadata(cid: str) -> dict[str, str]:
    """The headers the Node.js SDK sends without credentials or namespace (its request id is added per call)."""
    return {
        "x-mq-client-id": cid, "x-mq-language": "HTTP", "x-mq-protocol": "v2", "x-mq-client-version": "1.0.8",
        "x-mq-date-time": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
    }  # fmt: skip


def with_request_id(base: tuple[tuple[str, str], ...], n: int) -> tuple[tuple[str, str], ...]:
    return (*base, ("x-mq-request-id", str(n)))


def message_id(prefix: str, n: int) -> str:
    """34 uppercase hex digits like the SDKs' ids: '01', a 16-digit run prefix, a 16-digit counter."""
    return f"01{prefix}{n:016X}"


def send_request(topic: str, mid: str, body: bytes = BODY) -> service_pb2.SendMessageRequest:
    """One NORMAL message, with the system properties the Python SDK sets."""
    born = Timestamp(seconds=int(time.time()))
    props = definition_pb2.SystemProperties(
        message_id=mid, message_type=definition_pb2.MessageType.NORMAL, born_timestamp=born, born_host="127.0.0.1",
        body_encoding=definition_pb2.Encoding.IDENTITY,
    )  # fmt: skip
    message = definition_pb2.Message(topic=definition_pb2.Resource(name=topic), system_properties=props, body=body)
    return service_pb2.SendMessageRequest(messages=[message])


def send_template(topic: str, prefix: str) -> tuple[bytes, int]:
    """The serialised request for the Node generator and the offset of the message id's 16-digit counter in it."""
    mid = message_id(prefix, 0)
    raw = send_request(topic, mid).SerializeToString()
    at = raw.find(mid.encode())
    if at < 0 or raw.find(mid.encode(), at + 1) >= 0:
        raise RuntimeError("message id not found exactly once in the serialised request")
    return raw, at + 2 + len(prefix)


# -- row 1: SendMessage, one message per call -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendLoad:
    """A closed-loop SendMessage row: ``callers`` in flight, until ``max_messages`` or ``max_seconds``."""

    addr: str
    topic: str
    callers: int
    max_messages: int
    max_seconds: float


async def node_send_row(
    load: SendLoad, node_modules: Path, meter: CpuMeter, where: tuple[str, str] = ("gateway v2", "SYNC_FLUSH")
) -> Row:
    """Run v2_send_load.js; the CPU meter spans only its measured phase (after its warm-up, until its answer).
    ``where`` = the row's (system, flush)."""
    prefix = os.urandom(8).hex().upper()
    raw, offset = send_template(load.topic, prefix)
    config = {
        "addr": load.addr, "templateHex": raw.hex(), "idOffset": offset, "idPrefix": prefix,
        "concurrency": load.callers, "channels": NODE_CHANNELS, "maxMessages": load.max_messages,
        "maxSeconds": load.max_seconds, "warmupCalls": NODE_WARMUP_CALLS, "rpcTimeoutMs": int(RPC_TIMEOUT_S * 1000),
        "metadata": node_sdk_metadata(client_id()),
    }  # fmt: skip
    env = {**os.environ, "NODE_PATH": str(node_modules)}
    proc = await asyncio.create_subprocess_exec(
        "node", str(_NODE_GENERATOR), json.dumps(config), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=64 * 1024 * 1024,
    )  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        ready = await asyncio.wait_for(proc.stdout.readline(), RPC_TIMEOUT_S * 2)
        if ready.strip() != b"READY":
            raise RuntimeError(f"node generator did not warm up: {ready[:2000]!r}")
        meter.start()
        proc.stdin.write(b"GO\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), load.max_seconds + RPC_TIMEOUT_S * 2)
        result = json.loads(line)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    if "error" in result:
        raise RuntimeError(f"node generator: {result['error']}")
    counts, latencies = (result["ok"], result["failed"]), [us / 1e6 for us in result["latenciesUs"]]
    codes = f", codes {result['codes']}" if result["codes"] else ""
    api = f"v2 SendMessage x1 (node generator {result['cpuUs'] / max(1, result['calls']):.0f} us CPU/msg{codes})"
    return meter.finish(make_row(*where, api, load.callers, counts, result["seconds"], latencies))


async def floor_send_row(load: SendLoad, node_modules: Path, front: str = "grpcio") -> Row:
    """The same Node.js row against v2_floor_server.py (a do-nothing SendMessage handler on ``front``, grpcio or
    native, in a process of its own), that process's CPU metered: the floor under the gateway's figure."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(_FLOOR_SERVER), front, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        port, loop = (await asyncio.wait_for(proc.stdout.readline(), RPC_TIMEOUT_S)).decode().split()
        floor = replace(load, addr=f"127.0.0.1:{port}")
        where = (FLOOR_SYSTEMS[front], f"- ({loop})")
        return await node_send_row(floor, node_modules, CpuMeter(proc.pid, []), where)
    finally:
        proc.terminate()
        await proc.wait()


async def python_send_row(load: SendLoad, channels: Sequence[Any], meter: CpuMeter) -> Row:
    """The same row from grpc.aio callers of this process (a Python load generator, for comparison)."""
    stubs = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
    base = python_sdk_metadata(client_id())
    prefix = os.urandom(8).hex().upper()
    counter = iter(range(1 << 62))
    latencies: list[float] = []
    counts = [0, 0]

    async def call(stub: Any) -> bool:
        n = next(counter)
        reply = await stub.SendMessage(send_request(load.topic, message_id(prefix, n)),
                                       metadata=with_request_id(base, n), timeout=RPC_TIMEOUT_S)  # fmt: skip
        return bool(reply.status.code == OK)

    for i in range(NODE_WARMUP_CALLS):
        if not await call(stubs[i % len(stubs)]):
            raise RuntimeError("warm-up SendMessage failed")
    end = time.perf_counter() + load.max_seconds

    async def caller(stub: Any) -> None:
        while sum(counts) < load.max_messages and time.perf_counter() < end:
            started = time.perf_counter()
            counts[0 if await call(stub) else 1] += 1
            latencies.append(time.perf_counter() - started)

    meter.start()
    began, cpu_began = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller(stubs[i % len(stubs)]) for i in range(load.callers)))
    secs, cpu_us = time.perf_counter() - began, (time.process_time() - cpu_began) * 1e6
    api = f"v2 SendMessage x1 (python generator {cpu_us / max(1, sum(counts)):.0f} us CPU/msg)"
    return meter.finish(
        make_row("gateway v2", "SYNC_FLUSH", api, load.callers, (counts[0], counts[1]), secs, latencies)
    )


# -- rows 2 and 3: ReceiveMessage + AckMessage ----------------------------------------------------------------------


async def readable_queues(stub: Any, topic: str, base: tuple[tuple[str, str], ...]) -> list[Any]:
    """One readable master queue per broker from QueryRoute (what a SimpleConsumer receives from)."""
    reply = await stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic)),
        metadata=with_request_id(base, 0), timeout=RPC_TIMEOUT_S,
    )  # fmt: skip
    if reply.status.code != OK:
        raise RuntimeError(f"QueryRoute {topic}: {reply.status.code} {reply.status.message}")
    readable = (definition_pb2.Permission.READ, definition_pb2.Permission.READ_WRITE)
    per_broker = {q.broker.name: q for q in reply.message_queues if q.broker.id == 0 and q.permission in readable}
    if not per_broker:
        raise RuntimeError(f"QueryRoute {topic}: no readable master queue")
    return list(per_broker.values())


class V2Receiver:
    """A SimpleConsumer-shaped caller: ReceiveMessage(batch) from one queue, then one AckMessage per message."""

    def __init__(self, stub: Any, group: str, queue: Any, poll_s: int, base: tuple[tuple[str, str], ...]) -> None:
        self.stub = stub
        self.group = definition_pb2.Resource(name=group)
        self.topic = queue.topic
        self.base = base
        self.calls = 0
        self.receives = [0, 0]  # ReceiveMessage calls, of which answered MESSAGE_NOT_FOUND
        self.request = service_pb2.ReceiveMessageRequest(
            group=self.group, message_queue=queue, batch_size=RECEIVE_BATCH,
            filter_expression=definition_pb2.FilterExpression(type=definition_pb2.FilterType.TAG, expression="*"),
            invisible_duration=Duration(seconds=RECEIVE_INVISIBLE_S), auto_renew=False,
            long_polling_timeout=Duration(seconds=poll_s),
        )  # fmt: skip
        self.timeout_s = poll_s + RPC_TIMEOUT_S

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        self.calls += 1
        return with_request_id(self.base, self.calls)

    async def receive(self) -> list[Any]:
        """The messages of one ReceiveMessage; [] on MESSAGE_NOT_FOUND; raises RuntimeError on any other status."""
        messages, status = [], None
        async for reply in self.stub.ReceiveMessage(self.request, metadata=self._metadata(), timeout=self.timeout_s):
            kind = reply.WhichOneof("content")
            if kind == "message":
                messages.append(reply.message)
            elif kind == "status":
                status = reply.status
        if status is None or status.code not in (OK, MESSAGE_NOT_FOUND):
            raise RuntimeError(f"ReceiveMessage answered {status}")
        self.receives[0] += 1
        self.receives[1] += not messages
        return messages

    async def ack(self, message: Any) -> None:
        entry = service_pb2.AckMessageEntry(message_id=message.system_properties.message_id,
                                            receipt_handle=message.system_properties.receipt_handle)  # fmt: skip
        request = service_pb2.AckMessageRequest(group=self.group, topic=self.topic, entries=[entry])
        reply = await self.stub.AckMessage(request, metadata=self._metadata(), timeout=RPC_TIMEOUT_S)
        if reply.status.code != OK:
            raise RuntimeError(f"AckMessage answered {reply.status.code} {reply.status.message}")


async def receivers(channels: Sequence[Any], topic: str, group: str, count: int, poll_s: int) -> list[V2Receiver]:
    stubs = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
    base = python_sdk_metadata(client_id())
    queues = await readable_queues(stubs[0], topic, base)
    return [V2Receiver(stubs[i % len(stubs)], group, queues[i % len(queues)], poll_s, base) for i in range(count)]


async def drain_row(channels: Sequence[Any], topic: str, group: str, counts: tuple[int, int], meter: CpuMeter) -> Row:
    """``callers`` receivers drain ``backlog`` messages, each receive's messages acked concurrently (one AckMessage
    each, as SimpleConsumer.ack_async would). The row ends when the last ack of the backlog is answered; receives
    still long-polling an empty topic then are cancelled. ``counts`` = (backlog, callers)."""
    backlog, callers = counts
    pool = await receivers(channels, topic, group, callers, DRAIN_POLL_S)
    acked = 0
    drained = asyncio.Event()

    async def caller(receiver: V2Receiver) -> None:
        nonlocal acked
        while not drained.is_set():
            messages = await receiver.receive()
            await asyncio.gather(*(receiver.ack(m) for m in messages))
            acked += len(messages)
            if acked >= backlog:
                drained.set()

    meter.start()
    began, cpu_began = time.perf_counter(), time.process_time()
    tasks = [asyncio.create_task(caller(r)) for r in pool]
    waiter = asyncio.create_task(drained.wait())
    try:
        done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED, timeout=backlog / 100)
        secs, cpu_us = time.perf_counter() - began, (time.process_time() - cpu_began) * 1e6
        for task in done:
            if task is not waiter:
                task.result()  # a caller ends only by raising before the drain: surface it
    finally:
        for task in (*tasks, waiter):
            task.cancel()
        await asyncio.gather(*tasks, waiter, return_exceptions=True)
    if acked < backlog:
        raise RuntimeError(f"v2 receive drained {acked} of {backlog} in {secs:.1f} s")
    api = f"v2 ReceiveMessage({RECEIVE_BATCH}) + AckMessage per message (client {cpu_us / acked:.0f} us CPU/msg)"
    return meter.finish(make_row("gateway v2", "SYNC_FLUSH", api, callers, (acked, 0), secs, []))


async def latency_row(
    channels: Sequence[Any], topic: str, group: str, paced: tuple[int, float], meter: CpuMeter
) -> Row:
    """v2 SendMessage paced at ``rate``/s (open loop, the send start time in the body) while LATENCY_RECEIVERS
    long-polling receivers take them; latency = receive time - send start. ``paced`` = (rate, seconds). The api
    text splits it at the broker's store timestamp (ms, the same machine's clock): send -> stored (client, gateway,
    broker put) and stored -> received (long-poll wake-up, pop, ReceiveMessage stream), p50 / p99 each."""
    rate, seconds = paced
    pool = await receivers(channels, topic, group, LATENCY_RECEIVERS, LATENCY_POLL_S)
    sender = service_pb2_grpc.MessagingServiceStub(channels[0])
    base = python_sdk_metadata(client_id())
    prefix = os.urandom(8).hex().upper()
    total = int(rate * seconds)
    latencies: list[float] = []
    stored: list[tuple[float, float]] = []  # (send -> stored, stored -> received) in s
    failed = [0]
    done = asyncio.Event()
    acks: set[asyncio.Task[None]] = set()

    async def receive(receiver: V2Receiver) -> None:
        while not done.is_set():
            messages = await receiver.receive()
            now_ns = time.time_ns()
            for m in messages:
                sent_ns = _TIME_PREFIX.unpack_from(m.body)[0]
                latencies.append((now_ns - sent_ns) / 1e9)
                stored_ns = m.system_properties.store_timestamp.ToNanoseconds()
                stored.append(((stored_ns - sent_ns) / 1e9, (now_ns - stored_ns) / 1e9))
                task = asyncio.create_task(receiver.ack(m))
                acks.add(task)
                task.add_done_callback(acks.discard)
            if len(latencies) >= total - failed[0]:
                done.set()

    async def send(n: int) -> None:
        body = _TIME_PREFIX.pack(time.time_ns()) + BODY[_TIME_PREFIX.size :]
        reply = await sender.SendMessage(send_request(topic, message_id(prefix, n), body),
                                         metadata=with_request_id(base, n), timeout=RPC_TIMEOUT_S)  # fmt: skip
        if reply.status.code != OK:
            failed[0] += 1

    tasks = [asyncio.create_task(receive(r)) for r in pool]
    await asyncio.sleep(1.0)  # the receivers parked before the first send
    meter.start()
    began = await pace(rate, total, send)
    try:
        await asyncio.wait_for(done.wait(), timeout=RPC_TIMEOUT_S)
    except TimeoutError:
        pass  # reported: messages counts what arrived
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *acks, return_exceptions=True)
    secs = time.perf_counter() - began
    receives, empty = (sum(r.receives[i] for r in pool) for i in (0, 1))
    api = (
        f"v2 SendMessage {rate}/s -> long-polling ReceiveMessage ({receives:,} receives, {empty:,} empty; "
        f"send->stored {_p50_p99(s for s, _ in stored)}, stored->received {_p50_p99(r for _, r in stored)} ms)"
    )
    counts = (len(latencies), total - len(latencies))
    return meter.finish(make_row("gateway v2", "SYNC_FLUSH", api, 1, counts, secs, latencies))


def _p50_p99(latencies_s: Iterable[float]) -> str:
    ordered = list(latencies_s)
    return f"{percentile_ms(ordered, 50):.1f}/{percentile_ms(ordered, 99):.1f}"


# -- row 4: the official Python SDK -------------------------------------------------------------------------------


async def sdk_rows(sdk_python: Path, addr: str, topic: str, group: str, seconds: float) -> tuple[list[Row], str]:
    """Run v2_sdk_bench.py in the SDK's own interpreter; returns its rows and its error text ('' when none)."""
    proc = await asyncio.create_subprocess_exec(
        str(sdk_python), str(_SDK_SCRIPT), "--endpoint", addr, "--topic", topic, "--group", group,
        "--seconds", str(seconds), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), SDK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return [], f"SDK script did not finish in {SDK_TIMEOUT_S:g} s"
    lines = out.decode().strip().splitlines()
    if not lines:
        return [], f"SDK script printed nothing (rc {proc.returncode}): {err.decode()[-2000:]}"
    result = json.loads(lines[-1])
    rows = [
        make_row("python SDK", "SYNC_FLUSH", r["api"], r["threads"], (r["messages"], r["failed"]), r["seconds"], [])
        for r in result["rows"]
    ]
    return rows, str(result.get("error", ""))
