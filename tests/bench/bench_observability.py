"""Observability cost benchmark (not a pytest module): gateway throughput with metrics + logging on vs off.

Two local clusters (name server, broker-a, broker-b, gateway as real processes on 127.0.0.1) run side by side:

- ``off``: metrics_port 0 on every service (no registry, no hooks, no /metrics) and log level WARNING;
- ``on``: /metrics on every service, log level INFO, and a scraper in this process reading every /metrics
  endpoint every ``--scrape-interval-s`` seconds (default 5 s: 3-6 x more often than usual deployments).

Request ids (the gateway makes one per call and passes it to the broker) are part of both: they are logging
infrastructure, not a switch. Each repetition sends a fixed count of SendBatch(100) calls of 1 KiB messages
from 16 concurrent clients (asyncio tasks of this process) through one cluster's gateway; repetitions
alternate off / on so drift of the shared machine hits both alike. Reports the median msgs/s of each and the
cost ``1 - on / off`` (target: at most 5 %) two ways: from wall-clock throughput (median of the per-pair costs;
noisy when other work shares the machine) and from the CPU time the cluster's processes (name server, brokers,
gateway; from /proc/<pid>/stat) spend per message, which other load on the machine barely moves. Prints a
table and writes JSON (``--out``).
Run: ``uv run --frozen python tests/bench/bench_observability.py --out bench-results/observability.json``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
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
BATCH: Final = 100
CLIENTS: Final = 16
QUEUES: Final = 8
RPC_TIMEOUT_S: Final = 60.0
MAX_COST: Final = 0.05
SERVICES: Final = ("namesrv", "broker-a", "broker-b", "gateway")


@dataclass(frozen=True, slots=True)
class Rep:
    """One repetition: ``messages`` sent by ``calls`` SendBatch calls in ``seconds``."""

    mode: str
    flush: str
    rep: int
    calls: int
    messages: int
    failed: int
    seconds: float
    msgs_per_s: float
    cpu_us_per_msg: float


def cluster_spec(data_dir: Path, flush: FlushDiskType, metrics: bool) -> ClusterSpec:
    env = {**TEST_BROKER_ENV, "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(256 * 1024 * 1024)}
    ports = {name: free_port() for name in SERVICES} if metrics else {}
    return ClusterSpec(
        data_dir=data_dir,
        ports=PortLayout.free(2),
        flush_disk_type=flush,
        log_level="INFO" if metrics else "WARNING",
        broker_env=env,
        metrics_ports=ports,
    )


_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of ``pids`` (fields 14 and 15 of /proc/<pid>/stat), seconds."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _CLOCK_TICKS


class Scraper:
    """Reads every /metrics endpoint every ``interval_s`` on a thread (as Prometheus would) until stopped."""

    def __init__(self, ports: Sequence[int], interval_s: float) -> None:
        self.ports = list(ports)
        self.interval_s = interval_s
        self.scrapes = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for port in self.ports:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    self.bytes += len(resp.read())
                self.scrapes += 1

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


async def one_rep(addr: str, topic: str, calls: int) -> tuple[int, int, float]:
    """``calls`` SendBatch(100) calls from CLIENTS tasks; returns (messages ok, failed, seconds)."""
    request = gateway_pb2.SendBatchRequest(messages=[gateway_pb2.Message(topic=topic, body=BODY)] * BATCH)
    remaining = [calls]
    ok = [0]
    failed = [0]
    async with grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS) as channel:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)

        async def client() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                results = (await stub.SendBatch(request, timeout=RPC_TIMEOUT_S)).results
                bad = sum(1 for r in results if r.code != 0)
                ok[0] += len(results) - bad
                failed[0] += bad

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(CLIENTS)))
        return ok[0], failed[0], time.perf_counter() - began


async def bench_flush(flush: FlushDiskType, args: argparse.Namespace, console: Console) -> list[Rep]:
    reps: list[Rep] = []
    with tempfile.TemporaryDirectory(prefix="bench-obs-") as tmp, ExitStack() as stack:
        clusters: dict[str, LocalCluster] = {}
        topics: dict[str, str] = {}
        for mode in ("off", "on"):
            spec = cluster_spec(Path(tmp) / mode, flush, metrics=mode == "on")
            clusters[mode] = stack.enter_context(LocalCluster(spec))
            topics[mode] = await make_topic(clusters[mode], f"bench_obs_{mode}", queues=QUEUES)
        scraper = stack.enter_context(Scraper(list(clusters["on"].spec.metrics_ports.values()), args.scrape_interval_s))
        for mode in ("off", "on"):  # warm-up: routes, channels, first files
            await one_rep(clusters[mode].gateway_addr, topics[mode], max(CLIENTS, args.calls // 10))
        for rep in range(args.reps):
            order = ("off", "on") if rep % 2 == 0 else ("on", "off")
            for mode in order:
                pids = [p.pid for p in clusters[mode].processes()]
                cpu_before = cpu_seconds(pids)
                ok, failed, secs = await one_rep(clusters[mode].gateway_addr, topics[mode], args.calls)
                cpu_us = (cpu_seconds(pids) - cpu_before) / max(ok, 1) * 1e6
                row = Rep(
                    mode, flush, rep, args.calls, ok, failed, round(secs, 3), round(ok / secs, 1), round(cpu_us, 2)
                )
                reps.append(row)
                console.log(f"{flush} {mode} rep {rep}: {row.msgs_per_s:,.0f} msgs/s, {cpu_us:.1f} cpu us/msg")
        console.log(f"scraper: {scraper.scrapes} scrapes, {scraper.bytes / max(scraper.scrapes, 1):,.0f} bytes each")
    return reps


def summarize(reps: Sequence[Rep]) -> list[dict[str, Any]]:
    """Per flush mode: median throughput and CPU per message of each mode, and both costs as the median of the
    per-repetition pair costs (an off and an on run back to back see the same machine load). ``ok``: the CPU
    cost is at most MAX_COST (the wall-clock figure is reported next to it)."""
    out: list[dict[str, Any]] = []
    for flush in sorted({r.flush for r in reps}):
        by = {
            mode: sorted((r for r in reps if r.flush == flush and r.mode == mode), key=lambda r: r.rep)
            for mode in ("off", "on")
        }
        med = {mode: statistics.median(r.msgs_per_s for r in rows) for mode, rows in by.items()}
        cpu = {mode: statistics.median(r.cpu_us_per_msg for r in rows) for mode, rows in by.items()}
        pair_cost = statistics.median(
            1 - on.msgs_per_s / off.msgs_per_s for off, on in zip(by["off"], by["on"], strict=True)
        )
        cpu_cost = statistics.median(
            on.cpu_us_per_msg / off.cpu_us_per_msg - 1 for off, on in zip(by["off"], by["on"], strict=True)
        )
        out.append(
            {
                "flush": flush,
                "off_median_msgs_per_s": round(med["off"], 1),
                "on_median_msgs_per_s": round(med["on"], 1),
                "throughput_cost_pct": round(pair_cost * 100, 2),
                "off_median_cpu_us_per_msg": round(cpu["off"], 2),
                "on_median_cpu_us_per_msg": round(cpu["on"], 2),
                "cpu_cost_pct": round(cpu_cost * 100, 2),
                "max_cost_pct": MAX_COST * 100,
                "ok": cpu_cost <= MAX_COST,
            }
        )
    return out


def print_report(reps: Sequence[Rep], summary: Sequence[dict[str, Any]], console: Console) -> None:
    table = Table(title=f"Gateway SendBatch({BATCH}) x 1 KiB, {CLIENTS} clients: metrics + logging off vs on")
    for col in ("flush", "mode", "reps (msgs/s)", "median msgs/s", "median cluster CPU us/msg"):
        table.add_column(col, justify="right")
    for row in summary:
        for mode in ("off", "on"):
            values = ", ".join(f"{r.msgs_per_s:,.0f}" for r in reps if r.flush == row["flush"] and r.mode == mode)
            table.add_row(
                row["flush"],
                mode,
                values,
                f"{row[f'{mode}_median_msgs_per_s']:,.0f}",
                f"{row[f'{mode}_median_cpu_us_per_msg']:.1f}",
            )
    console.print(table)
    for row in summary:
        verdict = "[green]OK[/green]" if row["ok"] else "[red]OVER[/red]"
        console.print(
            f"{row['flush']}: observability cost {row['cpu_cost_pct']:+.2f} % cluster CPU per message, "
            f"{row['throughput_cost_pct']:+.2f} % throughput (median of pairs); target <= "
            f"{row['max_cost_pct']:.0f} % {verdict}"
        )


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    reps: list[Rep] = []
    for flush in args.flush:
        reps.extend(await bench_flush(flush, args, console))
    summary = summarize(reps)
    print_report(reps, summary, console)
    return {
        "benchmark": "observability",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {
            "batch": BATCH,
            "clients": CLIENTS,
            "body_bytes": len(BODY),
            "calls_per_rep": args.calls,
            "reps": args.reps,
            "scrape_interval_s": args.scrape_interval_s,
        },
        "summary": summary,
        "reps": [asdict(r) for r in reps],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("bench-results/observability.json"))
    parser.add_argument("--reps", type=int, default=9, help="repetitions per mode (median reported)")
    parser.add_argument("--calls", type=int, default=1000, help="SendBatch calls per repetition (~5 s runs)")
    parser.add_argument("--scrape-interval-s", type=float, default=5.0)
    parser.add_argument(
        "--flush", nargs="+", default=["SYNC_FLUSH", "ASYNC_FLUSH"], choices=["SYNC_FLUSH", "ASYNC_FLUSH"]
    )
    args = parser.parse_args(argv)
    console = Console()
    report = asyncio.run(run(args, console))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
