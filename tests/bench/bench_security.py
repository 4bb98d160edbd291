"""Security benchmark (not a pytest module): the cost of TLS + authentication + authorisation on the send path.

LocalClusters of the same size one after the other (name server, two broker groups, gateway as real processes on
127.0.0.1, ASYNC_FLUSH so that the gateway, not the disk, bounds the rate): plaintext without auth ("off") and with
TLS on every server and authentication + ACL on brokers and gateway ("on": mqlocal's ``tls=True, auth=True``, a user
with Pub on the topic); ``--modes off,tls,auth,on`` splits the cost. ``--rounds`` repeats them, every other round in
reverse order. Against each cluster, closed loops of 64 callers for ``--row-seconds``:

- mq.gateway.v1 SendBatch of 100 x 1 KiB messages (4 channels);
- apache.rocketmq.v2 SendMessage of one 1 KiB message (1 channel, as the SDKs), with the Python SDK's headers.

With auth on, every call carries ``x-mq-date-time`` + ``authorization`` (MQv2-HMAC-SHA1) signed once per second
and reused, as the SDKs and our own clients do, so the gateway verifies one signature per second and finds the
rest in its cache. Prints a rich table (msgs/s, p50/p99, CPU us/msg of gateway, brokers and this load generator)
and the targets (<= 10 % fewer msgs/s for SendBatch, <= 25 % for single sends; the median over the rounds of each
mode, with the spread (slowest..fastest round) and the cost in CPU per message beside it: all processes', which the
machine's other load disturbs less than msgs/s, and the servers' alone (gateway + brokers: what a deployment whose
clients run elsewhere pays)), writes a JSON report (``--out``). Every row is bounded in time; failed sends are
counted, never hidden.
Run: ``uv run --frozen python tests/bench/bench_security.py --out bench-results/security.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any, Final

import grpc
from apache.rocketmq.v2 import service_pb2_grpc
from bench_gateway import BODY, CpuMeter, cluster_spec, freeze_client_heap, machine, make_row
from bench_gateway import write_report as write_json
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.auth.interceptor import SigningInterceptor
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_common.auth.settings import Credentials
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_local.cluster import LocalCluster
from mq_local.testing import add_user, make_topic
from rich.console import Console
from rich.table import Table
from v2_bench_rows import OK, client_id, message_id, python_sdk_metadata, send_request, with_request_id

CALLERS: Final = 64
BATCH: Final = 100
QUEUES: Final = 8
V1_CHANNELS: Final = 4
WARMUP_CALLS: Final = 50
RPC_TIMEOUT_S: Final = 30.0
BENCH_USER: Final = "bench"
V1_API: Final = "v1 SendBatch(100)"
V2_API: Final = "v2 SendMessage x1"
# Targets (issue 19): how many fewer msgs/s TLS + auth may cost.
MAX_LOSS_PCT: Final = {V1_API: 10.0, V2_API: 25.0}

# mode -> (TLS, authentication + ACL); "off" and "on" are the compared pair, "tls" and "auth" split the cost.
MODES: Final = {"off": (False, False), "tls": (True, False), "auth": (False, True), "on": (True, True)}
Metadata = tuple[tuple[str, str], ...]
# One call: (messages stored, messages failed).
Call = Callable[[int], Awaitable[tuple[int, int]]]


class Headers:
    """Per-call metadata: ``base`` plus, with credentials, the signed pair of the current second (cached)."""

    def __init__(self, base: Metadata, credentials: Credentials | None) -> None:
        self.base = tuple(kv for kv in base if kv[0] not in ("authorization", "x-mq-date-time"))
        self.signer = SigningInterceptor(credentials) if credentials is not None else None

    def __call__(self) -> Metadata:
        return self.base if self.signer is None else (*self.base, *self.signer.headers())


async def closed_loop(call: Call, callers: int, seconds: float) -> tuple[tuple[int, int], float, list[float]]:
    """``callers`` tasks calling ``call(n)`` back to back for ``seconds`` after WARMUP_CALLS unmeasured calls;
    returns ((stored, failed), seconds taken, each call's latency)."""
    for n in range(WARMUP_CALLS):
        await call(n)
    counts, latencies = [0, 0], []
    counter = iter(range(WARMUP_CALLS, 1 << 62))
    end = time.perf_counter() + seconds

    async def caller() -> None:
        while time.perf_counter() < end:
            started = time.perf_counter()
            stored, failed = await call(next(counter))
            latencies.append(time.perf_counter() - started)
            counts[0] += stored
            counts[1] += failed

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return (counts[0], counts[1]), time.perf_counter() - began, latencies


def v1_batch_call(channels: Sequence[grpc.aio.Channel], topic: str, headers: Headers) -> Call:
    stubs = [gateway_pb2_grpc.ProducerGatewayStub(c) for c in channels]  # type: ignore[no-untyped-call]
    request = gateway_pb2.SendBatchRequest(messages=[gateway_pb2.Message(topic=topic, body=BODY)] * BATCH)

    async def call(n: int) -> tuple[int, int]:
        reply = await stubs[n % len(stubs)].SendBatch(request, metadata=headers(), timeout=RPC_TIMEOUT_S)
        failed = sum(1 for r in reply.results if r.code != 0)
        return BATCH - failed, failed

    return call


def v2_send_call(channel: grpc.aio.Channel, topic: str, headers: Headers) -> Call:
    stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
    prefix = os.urandom(8).hex().upper()

    async def call(n: int) -> tuple[int, int]:
        reply = await stub.SendMessage(
            send_request(topic, message_id(prefix, n)),
            metadata=with_request_id(headers(), n),
            timeout=RPC_TIMEOUT_S,
        )
        ok = reply.status.code == OK
        return int(ok), int(not ok)

    return call


def channel_factory(cluster: LocalCluster) -> Callable[[], grpc.aio.Channel]:
    """New channels to the gateway: TLS verified by the cluster's CA when it has one, else plaintext."""
    files = cluster.spec.tls_files
    if files is None:
        return lambda: grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS)
    credentials = grpc.ssl_channel_credentials(files.ca_file.read_bytes())
    return lambda: grpc.aio.secure_channel(cluster.gateway_addr, credentials, options=CHANNEL_OPTIONS)


async def prepare(cluster: LocalCluster, mode: str) -> tuple[str, Credentials | None]:
    """The topic, and with auth a user allowed to Pub on it (its credentials)."""
    topic = await make_topic(cluster, f"bench_security_{mode}", queues=QUEUES)
    if not cluster.spec.auth:
        return topic, None
    credentials = Credentials(BENCH_USER, os.urandom(12).hex())
    entry = PolicyEntry(Resource.parse(f"Topic:{topic}"), frozenset({Action.PUB}))
    acl = Acl(f"User:{BENCH_USER}", (Policy(entries=(entry,)),))
    await add_user(cluster, User(credentials.access_key, credentials.secret_key), acl)
    return topic, credentials


@dataclass(frozen=True, slots=True)
class SecurityRow:
    """One row: a cluster ``mode`` in round ``round_no``; CPU in microseconds per stored message of the gateway,
    the brokers and this load generator (which shares the machine's cores with them)."""

    mode: str
    round_no: int
    api: str
    messages: int
    failed: int
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    gateway_cpu_us: float
    brokers_cpu_us: float
    client_cpu_us: float

    @property
    def servers_cpu_us(self) -> float:
        return round(self.gateway_cpu_us + self.brokers_cpu_us, 1)

    @property
    def total_cpu_us(self) -> float:
        return round(self.servers_cpu_us + self.client_cpu_us, 1)


async def measure(api: str, call: Call, meter: CpuMeter, mode: str, round_no: int, seconds: float) -> SecurityRow:
    freeze_client_heap()
    meter.start()
    client_began = time.process_time()
    counts, secs, latencies = await closed_loop(call, CALLERS, seconds)
    client_cpu_us = (time.process_time() - client_began) * 1e6 / max(1, counts[0])
    row = meter.finish(make_row("gateway", mode, api, CALLERS, counts, secs, latencies))
    return SecurityRow(
        mode, round_no, api, row.messages, row.failed, row.msgs_per_s, row.p50_ms, row.p99_ms,
        row.gateway_cpu_us_per_msg, row.brokers_cpu_us_per_msg, round(client_cpu_us, 1),
    )  # fmt: skip


async def bench_mode(mode: str, round_no: int, seconds: float, console: Console) -> list[SecurityRow]:
    """Start a cluster (MODES[mode]: TLS, auth), run both rows, stop it."""
    tls, auth = MODES[mode]
    with tempfile.TemporaryDirectory(prefix=f"bench-security-{mode}-") as tmp:
        spec = replace(cluster_spec(Path(tmp) / "data", "ASYNC_FLUSH"), tls=tls, auth=auth)
        cluster = await asyncio.to_thread(LocalCluster(spec).start)
        try:
            topic, credentials = await prepare(cluster, mode)
            meter = CpuMeter(cluster.gateway.pid, [p.pid for p in cluster.brokers.values()])
            new_channel = channel_factory(cluster)
            channels = [new_channel() for _ in range(V1_CHANNELS)]
            try:
                v1 = v1_batch_call(channels, topic, Headers((), credentials))
                v2 = v2_send_call(channels[0], topic, Headers(python_sdk_metadata(client_id()), credentials))
                rows = [
                    await measure(V1_API, v1, meter, mode, round_no, seconds),
                    await measure(V2_API, v2, meter, mode, round_no, seconds),
                ]
            finally:
                for channel in channels:
                    await channel.close()
        finally:
            await asyncio.to_thread(cluster.stop)
    for r in rows:
        console.log(f"round {r.round_no} {mode}: {r.api}: {r.msgs_per_s:,.0f} msgs/s, {r.total_cpu_us} us CPU/msg")
    return rows


def loss_pct(off: float, on: float) -> float:
    """How much less ``on`` is than ``off``, in % of ``off`` (negative: more)."""
    return round((off - on) * 100 / off, 1) if off else float("nan")


def targets(rows: Sequence[SecurityRow]) -> list[dict[str, object]]:
    """One check per API: the % of msgs/s lost with TLS + auth on (median over the rounds of each mode, rounds
    interleaved), against MAX_LOSS_PCT; failed sends fail it. Beside it the spread of each mode's rounds and the
    cost in CPU per message (medians): of all processes (the msgs/s a CPU-bound run implies) and of the servers
    (gateway + brokers) alone, without this load generator's own TLS work."""
    checks: list[dict[str, object]] = []
    for api, limit in MAX_LOSS_PCT.items():
        off = [r for r in rows if r.api == api and r.mode == "off"]
        on = [r for r in rows if r.api == api and r.mode == "on"]
        rate_off, rate_on = median(r.msgs_per_s for r in off), median(r.msgs_per_s for r in on)
        cpu_off, cpu_on = median(r.total_cpu_us for r in off), median(r.total_cpu_us for r in on)
        servers_off, servers_on = median(r.servers_cpu_us for r in off), median(r.servers_cpu_us for r in on)
        loss, cpu_loss = loss_pct(rate_off, rate_on), loss_pct(1 / cpu_off, 1 / cpu_on)
        servers_loss = loss_pct(1 / servers_off, 1 / servers_on)
        clean = all(r.failed == 0 for r in (*off, *on))
        measured = (
            f"median {rate_off:,.0f} ({spread(off)}) -> {rate_on:,.0f} ({spread(on)}) msgs/s: {loss:+.1f} % lost; "
            f"CPU {cpu_off:.1f} -> {cpu_on:.1f} us/msg: {cpu_loss:+.1f} %, servers' {servers_off:.1f} -> "
            f"{servers_on:.1f}: {servers_loss:+.1f} %"
        )
        checks.append(
            {
                "target": f"{api} x{CALLERS}: TLS + auth cost <= {limit:.0f} % msgs/s",
                "measured": measured + ("" if clean else " (failed sends)"),
                "loss_pct": loss,
                "cpu_loss_pct": cpu_loss,
                "servers_cpu_loss_pct": servers_loss,
                "pass": clean and loss <= limit,
            }
        )
    return checks


def spread(rows: Sequence[SecurityRow]) -> str:
    """The slowest and fastest round's msgs/s of ``rows``, e.g. ``139,211..149,498``."""
    rates = [r.msgs_per_s for r in rows]
    return f"{min(rates):,.0f}..{max(rates):,.0f}"


def print_tables(rows: Sequence[SecurityRow], checks: Sequence[dict[str, object]]) -> None:
    table = Table(title="TLS + authentication + ACL on vs off: 1 KiB messages, ASYNC_FLUSH, 64 callers")
    columns = ("round", "mode", "api", "messages", "failed", "msgs/s", "p50 ms", "p99 ms")
    for column in (*columns, "gw CPU us/msg", "brokers", "client", "total"):
        table.add_column(column, justify="left" if column in ("mode", "api") else "right")
    for r in rows:
        table.add_row(
            str(r.round_no), r.mode, r.api, f"{r.messages:,}", str(r.failed), f"{r.msgs_per_s:,.0f}",
            f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", f"{r.gateway_cpu_us:.1f}", f"{r.brokers_cpu_us:.1f}",
            f"{r.client_cpu_us:.1f}", f"{r.total_cpu_us:.1f}",
        )  # fmt: skip
    goals = Table(title="security cost targets")
    for column in ("target", "measured", "result"):
        goals.add_column(column)
    for c in checks:
        goals.add_row(str(c["target"]), str(c["measured"]), "[green]pass[/green]" if c["pass"] else "[red]FAIL[/red]")
    console = Console(width=200)
    console.print(table)
    console.print(goals)


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    modes = args.modes.split(",")
    if not set(modes) <= set(MODES) or not {"off", "on"} <= set(modes):
        raise SystemExit(f"--modes takes off,on and optionally tls,auth; got {args.modes}")
    rows: list[SecurityRow] = []
    for round_no in range(1, args.rounds + 1):
        # every other round in reverse order, so a drift of the machine's other load favours neither mode
        for mode in modes if round_no % 2 else modes[::-1]:
            rows.extend(await bench_mode(mode, round_no, args.row_seconds, console))
    checks = targets(rows)
    print_tables(rows, checks)
    report_rows = [{**asdict(r), "servers_cpu_us": r.servers_cpu_us, "total_cpu_us": r.total_cpu_us} for r in rows]
    return {"rows": report_rows, "targets": checks, "row_seconds": args.row_seconds, "machine": machine()}


def main(argv: Sequence[str] | None = None) -> None:
    """Run both clusters' rows, print the tables, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/security.json", help="JSON report path")
    parser.add_argument("--row-seconds", type=float, default=6.0, help="seconds per measured row (<= ~20)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the modes, interleaved (noise)")
    parser.add_argument(
        "--modes", default="off,on", help="clusters to run in order: off,on and optionally tls (TLS only), auth"
    )
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    report = asyncio.run(run(args, console))
    write_json(Path(args.out), report)
    console.print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
