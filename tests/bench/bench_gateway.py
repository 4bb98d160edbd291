"""Gateway benchmark (not a pytest module): msgs/s and end-to-end latency through mqgateway and two brokers,
next to NATS JetStream measured in the same run.

1 KiB bodies. For SYNC_FLUSH and ASYNC_FLUSH, a LocalCluster (name server, broker-a, broker-b, gateway as real
processes on 127.0.0.1) and rows for Send and SendBatch(100) with 1, 16 and 64 concurrent clients (asyncio
tasks of this process, closed loop,
``--row-seconds`` each): msgs/s and p50/p99 of the call latency (a
SendBatch's latency is every message's end-to-end latency). Plus single Sends paced at an offered 500 msgs/s
(open loop: a send starts every 2 ms whatever the previous ones do). Then NATS JetStream: ``nats-server``
(apt; installed with ``apt-get install -y nats-server`` when missing and running as root) on 127.0.0.1 with a
file store in a temp dir (no monitor, cluster, leafnode or gateway listener), the same 1 KiB messages published
with the nats-py async client (``js.publish_async``, up to 4,000 acks pending).

Prints a rich table and the gateway targets (durable SYNC_FLUSH SendBatch >= 2 x JetStream nats-py async
rate; single Send p99 <= 10 ms at 500 msgs/s) and writes a JSON report (``--out``).
Run: ``uv run --frozen --with nats-py python tests/bench/bench_gateway.py --out bench-results/gateway.json``
(nats-py belongs in the dev dependency group; without it the JetStream row is reported as missing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

import grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_local.cluster import ClusterSpec, FlushDiskType, LocalCluster
from mq_local.ports import PortLayout, free_port
from mq_local.testing import TEST_BROKER_ENV, make_topic
from rich.console import Console
from rich.table import Table

BODY: Final = os.urandom(1024)
CLIENTS: Final = (1, 16, 64)
BATCH: Final = 100
QUEUES: Final = 8
PACED_RATE: Final = 500
PACED_WARM_UP_S: Final = 2.0
# The paced row lasts at least this many sends (30 s at 500/s): its p99 is then the 150th-slowest send. This 2-core
# VM stops now and then for 10-220 ms (every process late at once, no perf sample on either CPU meanwhile); at
# 500/s one such stop delays up to 110 sends, which decided a 10 s row's p99 alone. late_runs lists every run of
# sends over the target, so such stops stay visible.
PACED_MIN_SENDS: Final = 15_000
RPC_TIMEOUT_S: Final = 30.0
WARMUP_CALLS: Final = 20
NATS_MAX_PENDING: Final = 4000
NATS_START_WAIT_S: Final = 10.0
# The gateway targets (docs/performance.md).
SYNC_BATCH_VS_JETSTREAM_MIN: Final = 2.0
PACED_SEND_P99_MAX_MS: Final = 10.0
ROW_KINDS: Final = frozenset({"paced", "send", "batch", "nats"})


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement: ``latency`` percentiles in ms over every call (or message, for NATS)."""

    system: str
    flush: str
    api: str
    clients: int
    messages: int
    failed: int
    seconds: float
    msgs_per_s: float
    p50_ms: float
    p99_ms: float
    gateway_cpu_us_per_msg: float = float("nan")
    brokers_cpu_us_per_msg: float = float("nan")
    # paced rows: the runs of sends slower than PACED_SEND_P99_MAX_MS as (seconds into the row, sends, worst ms)
    late_runs: tuple[tuple[float, int, float], ...] = ()


def percentile_ms(latencies_s: Sequence[float], pct: float) -> float:
    if not latencies_s:
        return float("nan")
    ordered = sorted(latencies_s)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))] * 1000


def make_row(
    system: str, flush: str, api: str, clients: int, counts: tuple[int, int], secs: float, lat: list[float]
) -> Row:
    messages, failed = counts
    return Row(
        system, flush, api, clients, messages, failed, round(secs, 2), round(messages / secs, 1),
        round(percentile_ms(lat, 50), 2), round(percentile_ms(lat, 99), 2),
    )  # fmt: skip


def late_runs(
    starts_s: Sequence[float], latencies_s: Sequence[float], over_s: float, gap_s: float = 0.05
) -> tuple[tuple[float, int, float], ...]:
    """The sends slower than ``over_s``, grouped into runs (a run ends at a gap of ``gap_s`` between starts):
    (first start in s, sends, worst latency in ms) each, for telling one stall from a steady tail."""
    late = sorted((start, lat) for start, lat in zip(starts_s, latencies_s, strict=True) if lat > over_s)
    runs: list[list[float]] = []
    for start, lat in late:
        if runs and start - runs[-1][3] <= gap_s:
            run = runs[-1]
            run[1] += 1
            run[2] = max(run[2], lat)
            run[3] = start
        else:
            runs.append([start, 1, lat, start])
    return tuple((round(first, 3), int(count), round(worst * 1000, 1)) for first, count, worst, _last in runs)


def summary(row: Row) -> str:
    """One line for the progress log."""
    late = f", late runs (s into the row, sends, worst ms) {list(row.late_runs)}" if row.late_runs else ""
    return (
        f"{row.system} {row.flush} {row.api} x{row.clients}: {row.msgs_per_s:,.0f} msgs/s, p99 {row.p99_ms:.2f} ms, "
        f"CPU us/msg gateway {row.gateway_cpu_us_per_msg:.1f} brokers {row.brokers_cpu_us_per_msg:.1f}{late}"
    )


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (/proc/<pid>/stat utime + stime; 0 where unreadable)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU per message of the gateway and of the brokers over one row."""

    def __init__(self, gateway_pid: int, broker_pids: Sequence[int]) -> None:
        self.gateway_pid = gateway_pid
        self.broker_pids = tuple(broker_pids)
        self._begin = (0.0, 0.0)

    def start(self) -> None:
        self._begin = (cpu_seconds([self.gateway_pid]), cpu_seconds(self.broker_pids))

    def finish(self, row: Row) -> Row:
        """``row`` with the CPU us per stored message since :meth:`start`."""
        if not row.messages:
            return row
        gateway = (cpu_seconds([self.gateway_pid]) - self._begin[0]) * 1e6 / row.messages
        brokers = (cpu_seconds(self.broker_pids) - self._begin[1]) * 1e6 / row.messages
        return replace(row, gateway_cpu_us_per_msg=round(gateway, 1), brokers_cpu_us_per_msg=round(brokers, 1))


# -- gateway -----------------------------------------------------------------------------------------------------


def cluster_spec(data_dir: Path, flush: FlushDiskType, gateway_env: dict[str, str] | None = None) -> ClusterSpec:
    """Two broker groups; ``gateway_env`` sets gateway switches (``MQ_GATEWAY_*``) for comparing send paths."""
    env = {**TEST_BROKER_ENV, "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(256 * 1024 * 1024)}
    return ClusterSpec(
        data_dir=data_dir,
        ports=PortLayout.free(2),
        flush_disk_type=flush,
        log_level="WARNING",
        broker_env=env,
        gateway_env=gateway_env or {},
    )


class GatewayBench:
    """Rows against one running cluster; ``stubs`` are spread over a few channels."""

    def __init__(self, stubs: Sequence[Any], topic: str, flush: str, row_seconds: float, meter: CpuMeter) -> None:
        self.stubs = stubs
        self.meter = meter
        self.flush = flush
        self.row_seconds = row_seconds
        message = gateway_pb2.Message(topic=topic, body=BODY)
        self.message = message
        self.send_request = gateway_pb2.SendRequest(message=message)
        self.batch_request = gateway_pb2.SendBatchRequest(messages=[message] * BATCH)

    async def _call(self, stub: Any, batch: bool) -> int:
        """One call; returns how many messages of it failed."""
        if batch:
            results = (await stub.SendBatch(self.batch_request, timeout=RPC_TIMEOUT_S)).results
            return sum(1 for r in results if r.code != 0)
        return int((await stub.Send(self.send_request, timeout=RPC_TIMEOUT_S)).result.code != 0)

    async def closed_loop(self, clients: int, batch: bool) -> Row:
        per_call = BATCH if batch else 1
        for i in range(WARMUP_CALLS):
            await self._call(self.stubs[i % len(self.stubs)], batch)
        latencies: list[float] = []
        counts = [0, 0]
        end = time.perf_counter() + self.row_seconds

        async def client(stub: Any) -> None:
            while time.perf_counter() < end:
                started = time.perf_counter()
                failed = await self._call(stub, batch)
                latencies.append(time.perf_counter() - started)
                counts[0] += per_call - failed
                counts[1] += failed

        self.meter.start()
        began = time.perf_counter()
        await asyncio.gather(*(client(self.stubs[i % len(self.stubs)]) for i in range(clients)))
        api = f"SendBatch({BATCH})" if batch else "Send"
        row = make_row(
            "gateway", self.flush, api, clients, (counts[0], counts[1]), time.perf_counter() - began, latencies
        )
        return self.meter.finish(row)

    async def paced(self, rate: int) -> Row:
        """Single Sends from one client (one channel) started every 1/rate s (open loop) for row_seconds but at
        least PACED_MIN_SENDS sends, after PACED_WARM_UP_S unmeasured at the same rate (the topic's first
        ConsumeQueue and index files, routes and channels exist by then: steady state, as a broker that has been
        taking this load)."""
        await self._pace(rate, PACED_WARM_UP_S, [], [], [0])
        latencies: list[float] = []
        starts: list[float] = []
        failures = [0]
        self.meter.start()
        seconds = max(self.row_seconds, PACED_MIN_SENDS / rate)
        total, secs = await self._pace(rate, seconds, latencies, starts, failures)
        counts = (total - failures[0], failures[0])
        row = make_row("gateway", self.flush, f"Send paced {rate}/s", 1, counts, secs, latencies)
        return self.meter.finish(replace(row, late_runs=late_runs(starts, latencies, PACED_SEND_P99_MAX_MS / 1000)))

    async def _pace(
        self, rate: int, seconds: float, latencies: list[float], starts: list[float], failures: list[int]
    ) -> tuple[int, float]:
        """Start a Send every 1/rate s for ``seconds``; returns (sends, seconds taken). Each send's latency and
        start (seconds into the row) are appended to ``latencies`` and ``starts`` as it completes."""

        mine: list[float] = []

        async def one(_: int) -> None:
            started = time.perf_counter()
            failures[0] += await self._call(self.stubs[0], False)
            latencies.append(time.perf_counter() - started)
            mine.append(started)

        total = int(rate * seconds)
        began = await pace(rate, total, one)
        starts.extend(started - began for started in mine)
        return total, time.perf_counter() - began


async def pace(rate: float, total: int, start: Callable[[int], Coroutine[Any, Any, None]]) -> float:
    """Open loop: run ``start(i)`` as a task every 1/rate s for i in range(total), whatever the earlier ones do;
    waits for those still in flight and returns when it began (time.perf_counter)."""
    began = time.perf_counter()
    tasks = []
    for i in range(total):
        delay = began + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(start(i)))
    # Only the tasks still in flight: gathering all 15,000 tasks of a paced row schedules a callback for each
    # finished one, and that burst delayed the row's last answers by ~27 ms (one late send at the end of every row).
    await asyncio.gather(*(task for task in tasks if not task.done()))
    return began


def machine() -> dict[str, object]:
    """What a report says of the machine it ran on."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def write_report(out: Path, report: dict[str, Any]) -> None:
    """``report`` as indented JSON at ``out`` (its folder created)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


def freeze_client_heap() -> None:
    """Collect, then move every object this load generator holds (rich, grpc, earlier rows' results) to the
    permanent generation, as the services do after start-up (mq_common.service_main.freeze_startup_heap):
    otherwise the client's own full collections (~25 ms with this heap) show up as send latency."""
    gc.collect()
    gc.freeze()


async def bench_flush(
    flush: FlushDiskType,
    row_seconds: float,
    console: Console,
    only: frozenset[str] = ROW_KINDS,
    clients_rows: Sequence[int] = CLIENTS,
    gateway_env: dict[str, str] | None = None,
) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-gw-{flush.lower()}-") as tmp:
        spec = cluster_spec(Path(tmp) / "data", flush, gateway_env)
        cluster = await asyncio.to_thread(LocalCluster(spec).start)
        try:
            topic = await make_topic(cluster, f"bench_{flush.lower()}", queues=QUEUES)
            channels = [grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS) for _ in range(4)]
            try:
                meter = CpuMeter(cluster.gateway.pid, [p.pid for p in cluster.brokers.values()])
                stubs = [gateway_pb2_grpc.ProducerGatewayStub(c) for c in channels]
                bench = GatewayBench(stubs, topic, flush, row_seconds, meter)
                # The paced row first: an offered 500 msgs/s on a fresh cluster, not right after an overload row.
                if "paced" in only:
                    freeze_client_heap()
                    rows.append(await bench.paced(PACED_RATE))
                    console.log(summary(rows[-1]))
                for batch in (False, True):
                    if ("batch" if batch else "send") not in only:
                        continue
                    for clients in clients_rows:
                        freeze_client_heap()
                        rows.append(await bench.closed_loop(clients, batch))
                        console.log(summary(rows[-1]))
            finally:
                for channel in channels:
                    await channel.close()
        finally:
            await asyncio.to_thread(cluster.stop)
    return rows


# -- NATS JetStream ----------------------------------------------------------------------------------------------


def nats_server_binary(console: Console) -> str | None:
    """The nats-server path; installs the apt package when missing and running as root."""
    found = shutil.which("nats-server") or (Path("/usr/sbin/nats-server").is_file() and "/usr/sbin/nats-server")
    if found:
        return str(found)
    if os.geteuid() != 0:
        console.print("[yellow]nats-server missing: run `apt-get install -y nats-server`[/yellow]")
        return None
    console.print("installing nats-server: apt-get install -y nats-server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", "nats-server"], check=False, env=env, timeout=300)
    path = shutil.which("nats-server") or "/usr/sbin/nats-server"
    return path if Path(path).is_file() else None


def nats_config(store_dir: Path, port: int) -> str:
    """Client port on 127.0.0.1 only; JetStream with a file store; no http/cluster/leafnode/gateway blocks, so
    nothing else listens (nats-server opens those only when configured)."""
    return (
        f'server_name: "bench"\nlisten: "127.0.0.1:{port}"\n'
        f'jetstream {{\n  store_dir: "{store_dir}"\n  max_memory_store: 268435456\n  max_file_store: 8589934592\n}}\n'
    )


def wait_port(port: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


async def nats_publish_async(port: int, row_seconds: float) -> Row:
    import nats  # type: ignore[import-not-found]  # nats-py, dev-only
    from nats.js.api import StorageType  # type: ignore[import-not-found]

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream(publish_async_max_pending=NATS_MAX_PENDING)
        await js.add_stream(name="BENCH", subjects=["bench.>"], storage=StorageType.FILE)
        for _ in range(WARMUP_CALLS):
            await js.publish("bench.m", BODY)
        latencies: list[float] = []
        failed = [0]

        def done(future: asyncio.Future[Any], started: float) -> None:
            latencies.append(time.perf_counter() - started)
            if future.cancelled() or future.exception() is not None:
                failed[0] += 1

        sent = 0
        began = time.perf_counter()
        end = began + row_seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            future = await js.publish_async("bench.m", BODY)
            future.add_done_callback(lambda f, s=started: done(f, s))
            sent += 1
        await js.publish_async_completed()
        secs = time.perf_counter() - began
    finally:
        await nc.close()
    return make_row(
        "nats-jetstream", "file store", "nats-py publish_async", 1, (sent - failed[0], failed[0]), secs, latencies
    )


@contextlib.contextmanager
def running_nats_server(binary: str, folder: Path) -> Iterator[int | None]:
    """nats-server on a free 127.0.0.1 port with its store in ``folder``; yields the port (None when it did not
    listen within NATS_START_WAIT_S). Stopped by PID on exit (SIGTERM, then SIGKILL)."""
    port = free_port()
    conf = folder / "nats.conf"
    conf.write_text(nats_config(folder / "js", port), encoding="utf-8")
    with (folder / "nats.log").open("wb") as log:
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield port if wait_port(port, NATS_START_WAIT_S) else None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def bench_nats(row_seconds: float, console: Console) -> list[Row]:
    binary = nats_server_binary(console)
    if binary is None:
        return []
    try:
        import nats  # noqa: F401
    except ImportError:
        console.print("[yellow]nats-py missing: run with `uv run --frozen --with nats-py ...`[/yellow]")
        return []
    with tempfile.TemporaryDirectory(prefix="bench-nats-") as tmp, running_nats_server(binary, Path(tmp)) as port:
        if port is None:
            console.print(f"[red]nats-server did not start; see {tmp}/nats.log[/red]")
            return []
        freeze_client_heap()
        row = await nats_publish_async(port, row_seconds)
        console.log(summary(row))
        return [row]


# -- report ------------------------------------------------------------------------------------------------------


def targets(rows: Sequence[Row]) -> list[dict[str, object]]:
    sync_batch = max(
        (r.msgs_per_s for r in rows if r.flush == "SYNC_FLUSH" and r.api.startswith("SendBatch")), default=0.0
    )
    nats_rate = next((r.msgs_per_s for r in rows if r.system == "nats-jetstream"), None)
    paced = next((r for r in rows if r.flush == "SYNC_FLUSH" and "paced" in r.api), None)
    out: list[dict[str, object]] = []
    if nats_rate:
        ratio = sync_batch / nats_rate
        out.append({
            "target": f"SYNC_FLUSH SendBatch >= {SYNC_BATCH_VS_JETSTREAM_MIN:g} x JetStream nats-py async",
            "measured": f"{sync_batch:,.0f} vs {nats_rate:,.0f} msgs/s = {ratio:.2f} x",
            "pass": ratio >= SYNC_BATCH_VS_JETSTREAM_MIN,
        })  # fmt: skip
    else:
        out.append({"target": "SYNC_FLUSH SendBatch vs JetStream", "measured": "JetStream not run", "pass": None})
    if paced is not None:
        out.append({
            "target": f"single Send p99 <= {PACED_SEND_P99_MAX_MS:g} ms at {PACED_RATE} msgs/s (SYNC_FLUSH)",
            "measured": f"p99 {paced.p99_ms:.2f} ms (p50 {paced.p50_ms:.2f})",
            "pass": paced.p99_ms <= PACED_SEND_P99_MAX_MS,
        })  # fmt: skip
    return out


def print_report(
    rows: Sequence[Row],
    checks: Sequence[dict[str, object]],
    title: str = "Gateway benchmark: 1 KiB messages, end to end (client -> gateway -> broker -> ack)",
    goals_title: str = "gateway targets",
    verdicts: tuple[str, str] = ("pass", "FAIL"),
) -> None:
    """The rows and the targets as rich tables on stdout; ``verdicts`` names a met and a missed target."""
    table = Table(title=title)
    columns = ("system", "flush", "api", "clients", "messages", "failed", "msgs/s", "p50 ms", "p99 ms")
    for column in (*columns, "gw CPU us/msg", "brokers CPU us/msg"):
        table.add_column(column, justify="right" if column not in ("system", "flush", "api") else "left")
    for r in rows:
        table.add_row(
            r.system, r.flush, r.api, str(r.clients), f"{r.messages:,}", str(r.failed), f"{r.msgs_per_s:,.0f}",
            f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", f"{r.gateway_cpu_us_per_msg:.1f}", f"{r.brokers_cpu_us_per_msg:.1f}",
        )  # fmt: skip
    goals = Table(title=goals_title)
    for column in ("target", "measured", "result"):
        goals.add_column(column)
    met, missed = verdicts
    for c in checks:
        verdict = "n/a" if c["pass"] is None else (f"[green]{met}[/green]" if c["pass"] else f"[red]{missed}[/red]")
        goals.add_row(str(c["target"]), str(c["measured"]), verdict)
    console = Console(width=160)
    console.print(table)
    console.print(goals)


async def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    rows: list[Row] = []
    flushes: tuple[FlushDiskType, ...] = tuple(args.flush.split(","))  # type: ignore[assignment]
    only = frozenset(args.only.split(","))
    if not only <= ROW_KINDS:
        raise SystemExit(f"--only takes {','.join(sorted(ROW_KINDS))}, got {args.only}")
    if not set(flushes) <= {"SYNC_FLUSH", "ASYNC_FLUSH"}:
        raise SystemExit(f"--flush takes SYNC_FLUSH,ASYNC_FLUSH, got {args.flush}")
    clients_rows = tuple(int(c) for c in args.clients.split(","))
    gateway_env = dict(item.split("=", 1) for item in args.gateway_env)
    for flush in flushes:
        rows.extend(await bench_flush(flush, args.row_seconds, console, only, clients_rows, gateway_env))
    if "nats" in only:
        rows.extend(await bench_nats(args.row_seconds, console))
    checks = targets(rows)
    print_report(rows, checks)
    return {
        "rows": [asdict(r) for r in rows],
        "targets": checks,
        "row_seconds": args.row_seconds,
        "gateway_env": gateway_env,
        "body_bytes": len(BODY),
        "machine": machine(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run every row, print the tables, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/gateway.json", help="JSON report path")
    parser.add_argument("--row-seconds", type=float, default=4.0, help="seconds per measured row")
    parser.add_argument(
        "--only", default=",".join(sorted(ROW_KINDS)), help="comma-separated rows to run: batch,nats,paced,send"
    )
    parser.add_argument("--flush", default="SYNC_FLUSH,ASYNC_FLUSH", help="comma-separated flush modes to run")
    parser.add_argument("--clients", default=",".join(map(str, CLIENTS)), help="comma-separated client counts")
    parser.add_argument(
        "--gateway-env",
        action="append",
        default=[],
        metavar="MQ_GATEWAY_X=value",
        help="a gateway setting for every row (repeatable), e.g. MQ_GATEWAY_COALESCE_LINGER_MS=0",
    )
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    report = asyncio.run(run(args, console))
    write_report(Path(args.out), report)
    console.print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
