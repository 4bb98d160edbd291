"""Replication benchmark (``make bench``; not a pytest module), issue 20's figures in one run:

1. Replication throughput of a catching-up slave: a master (one broker group, ASYNC_MASTER) holds ``--fill-mib`` of
   16 KiB messages while its slave is down; the slave starts with an empty store and the time from its first
   replicated byte to holding the master's whole CommitLog gives MB/s (target >= 200 MB/s). Progress is read from
   the slave's ``mq_broker_commit_log_max_offset`` gauge.
2. SendBatch(100) x 64 clients through the gateway (1 KiB bodies, SYNC_FLUSH everywhere) against one broker group:
   a single master, SYNC_MASTER + one slave, ASYNC_MASTER + one slave. The three clusters run side by side (the two
   not under load stand idle), each warmed up once, and take ``--rounds`` rounds of one ``--row-seconds`` row each,
   the order rotated per round. Targets, judged as the median of the per-round ratios: SYNC_MASTER >= 0.6x and
   ASYNC_MASTER >= 0.9x the single master.
3. Failover (controller mode, etcd of one member): the SYNC_MASTER group of the HA chaos rounds
   (tests/chaos/ha_group.py) under 32 DefaultMQProducer SYNC senders; the master is SIGKILLed ``--kills`` times
   (default 3), each time restarted to rejoin as a slave before the next; the time from the kill to the first SEND_OK
   stored by the new master, p50/max (target max <= 10 s), and every acknowledged message read back from the last
   master (lost must be 0).

Prints a table with the targets and writes JSON (``--out``).
Run: ``uv run --frozen python tests/bench/bench_ha.py [--row-seconds 5] [--fill-mib 512] [--rounds 12] [--kills 3]
[--out PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

import grpc
from bench_gateway import CHANNEL_OPTIONS, CpuMeter, GatewayBench, Row, freeze_client_heap, machine, write_report
from mq.gateway.v1 import gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.logging import configure_logging
from mq_common.protocol import SendMessageRequestHeader
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout, free_port
from mq_local.testing import TEST_BROKER_ENV, make_topic
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))  # the HA chaos rounds' group and fleet
from ha_chaos_testkit import verify_on
from ha_group import QUEUES, TOPIC, kill_and_fail_over, producing, start_group, wait_master

CLIENTS: Final = 64
FILL_BODY_BYTES: Final = 16 * 1024
FILL_BATCH: Final = 64
CATCH_UP_WAIT_S: Final = 600.0
POLL_S: Final = 0.05
SLAVE: Final = "broker-a-s1"
REPLICATION_MIN_MB_S: Final = 200.0
SYNC_MASTER_VS_SINGLE_MIN: Final = 0.6
ASYNC_MASTER_VS_SINGLE_MIN: Final = 0.9
FAILOVER_MAX_S: Final = 10.0
MASTER_WAIT_S: Final = 30.0
WARM_UP_S: Final = 3.0
"""A send row's cluster takes this load unmeasured once after its start (its first CommitLog, ConsumeQueue and index
files are created then, as in a broker that has been taking the load)."""
_GAUGE: Final = re.compile(r"^mq_broker_commit_log_max_offset\{[^}]*\} (\S+)$", re.MULTILINE)


def spec(data_dir: Path, replicas: int, role: str, metrics: dict[str, int] | None = None) -> ClusterSpec:
    env = {**TEST_BROKER_ENV, "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(256 * 1024 * 1024)}
    return ClusterSpec(
        data_dir=data_dir,
        ports=PortLayout.free(1),
        flush_disk_type="SYNC_FLUSH",
        log_level="WARNING",
        broker_env=env,
        replicas_per_broker_group=replicas,
        broker_role=role,
        metrics_ports=metrics or {},
    )


def max_offset(metrics_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as answer:
        found = _GAUGE.search(answer.read().decode())
    return int(float(found.group(1))) if found else 0


async def _poll(metrics_port: int, at_least: int, deadline: float) -> int:
    """The gauge once it reaches ``at_least`` (or its value at ``deadline``)."""
    while True:
        held = max_offset(metrics_port)
        if held >= at_least or time.perf_counter() > deadline:
            return held
        await asyncio.sleep(POLL_S)


async def bench_replication(fill_mib: int, console: Console) -> dict[str, float]:
    metrics = {"broker-a": free_port(), SLAVE: free_port()}
    with tempfile.TemporaryDirectory(prefix="bench-ha-repl-") as tmp:
        cluster = await asyncio.to_thread(LocalCluster(spec(Path(tmp) / "data", 2, "ASYNC_MASTER", metrics)).start)
        pool = ChannelPool()
        client = BrokerClient(pool)
        try:
            await asyncio.to_thread(cluster.kill_broker, SLAVE)
            topic = await make_topic(cluster, "bench_ha_fill", queues=4)
            master = cluster.broker_addrs["broker-a"]
            body = bytes(FILL_BODY_BYTES)
            requests = [SendMessageRequestHeader(topic=topic, body=body, queue_id=i % 4) for i in range(FILL_BATCH)]
            while max_offset(metrics["broker-a"]) < fill_mib * 1024 * 1024:
                await client.send_batch(master, requests, 30_000)
            target = max_offset(metrics["broker-a"])
            shutil.rmtree(cluster.spec.broker_store_dir(SLAVE))
            await asyncio.to_thread(cluster.start_broker, SLAVE)
            deadline = time.perf_counter() + CATCH_UP_WAIT_S
            start_offset = await _poll(metrics[SLAVE], 1, deadline)  # the first replicated bytes
            first = time.perf_counter()
            held = await _poll(metrics[SLAVE], target, deadline)
            seconds = time.perf_counter() - first
            moved = held - start_offset
            row = {"bytes": float(moved), "seconds": seconds, "mb_per_s": moved / seconds / 1e6}
            console.log(f"replication: {moved / 2**20:.0f} MiB in {seconds:.2f} s = {row['mb_per_s']:.0f} MB/s")
            return row
        finally:
            await client.close()
            await pool.close()
            await asyncio.to_thread(cluster.stop)


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) clock ticks of the machine since boot (/proc/stat's cpu line)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:9]]
    return fields[7], sum(fields)


class SendCluster:
    """One send row's cluster (SEND_CONFIGS), started once and kept up for every round: between rounds the other
    rows' clusters stand idle beside it. Its rows run on the same topic and channels."""

    def __init__(self, name: str, replicas: int, role: str, data_dir: Path, row_seconds: float) -> None:
        self.name = name
        self.row_seconds = row_seconds
        self.cluster = LocalCluster(spec(data_dir, replicas, role))
        self.channels: list[grpc.aio.Channel] = []
        self.bench: GatewayBench | None = None

    async def start(self) -> None:
        cluster = self.cluster
        await asyncio.to_thread(cluster.start)
        topic = await make_topic(cluster, "bench_ha", queues=8)
        self.channels = [grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS) for _ in range(4)]
        pids = [p.pid for p in (*cluster.brokers.values(), *cluster.slaves.values())]
        stubs = [gateway_pb2_grpc.ProducerGatewayStub(c) for c in self.channels]
        meter = CpuMeter(cluster.gateway.pid, pids)
        await GatewayBench(stubs, topic, self.name, WARM_UP_S, meter).closed_loop(CLIENTS, True)  # not measured
        self.bench = GatewayBench(stubs, topic, self.name, self.row_seconds, meter)

    async def stop(self) -> None:
        for channel in self.channels:
            await channel.close()
        await asyncio.to_thread(self.cluster.stop)

    async def row(self, console: Console) -> tuple[Row, float]:
        """One closed-loop row; returns it with the share of the machine's CPU time the hypervisor stole meanwhile
        (time this VM's cores waited for the host: a row with a large share ran on a slower machine)."""
        assert self.bench is not None, "start() first"
        freeze_client_heap()
        steal_before, all_before = cpu_ticks()
        row = await self.bench.closed_loop(CLIENTS, True)
        steal_after, all_after = cpu_ticks()
        steal = (steal_after - steal_before) / max(1, all_after - all_before)
        console.log(f"{self.name}: {row.msgs_per_s:,.0f} msgs/s, failed {row.failed}, host steal {steal:.1%}")
        return row, steal


async def bench_failover(kills: int, console: Console) -> dict[str, float]:
    """``kills`` failovers of a controller-mode SYNC_MASTER group under 32 SYNC producers (module docstring, 3.)."""
    rng = random.Random(20)
    with tempfile.TemporaryDirectory(prefix="bench-ha-failover-") as tmp:
        cluster = await asyncio.to_thread(start_group, Path(tmp) / "data")
        try:
            async with producing(cluster, rng) as fleet:
                times_s = [await kill_and_fail_over(cluster, fleet, rng, wipe=False) for _ in range(kills)]
            master = await wait_master(cluster, MASTER_WAIT_S)
            checked = await verify_on(master.master_addr, TOPIC, QUEUES, fleet.ledger)  # raises on a lost message
        finally:
            await asyncio.to_thread(cluster.stop)
    row = {"kills": float(kills), "p50_s": statistics.median(times_s), "max_s": max(times_s),
           "acknowledged": float(checked), "lost": 0.0}  # fmt: skip
    console.log(f"failover: p50 {row['p50_s']:.2f} s, max {row['max_s']:.2f} s; {checked} acknowledged, 0 lost")
    return row


def round_ratios(rounds: Sequence[Sequence[Row]]) -> tuple[list[float], list[float]]:
    """Per round, the SYNC_MASTER / single and the ASYNC_MASTER / single throughput ratios (a round's rows ran back
    to back, so a slow spell of the shared host weighs on both sides of one ratio rather than on one row)."""
    single, sync_master, async_master = rounds
    sync_ratios = [s.msgs_per_s / o.msgs_per_s for o, s in zip(single, sync_master, strict=True)]
    async_ratios = [a.msgs_per_s / o.msgs_per_s for o, a in zip(single, async_master, strict=True)]
    return sync_ratios, async_ratios


def paired_ratios(rounds: Sequence[Sequence[Row]]) -> tuple[float, float]:
    """The judged SYNC_MASTER / single and ASYNC_MASTER / single ratios: the medians of :func:`round_ratios`."""
    sync_ratios, async_ratios = round_ratios(rounds)
    return statistics.median(sync_ratios), statistics.median(async_ratios)


def targets(
    replication: dict[str, float], rounds: Sequence[Sequence[Row]], failover: dict[str, float]
) -> list[dict[str, Any]]:
    sync_master, async_master = paired_ratios(rounds)
    checks = [
        ("replication MB/s", replication["mb_per_s"], REPLICATION_MIN_MB_S),
        ("SYNC_MASTER / single", sync_master, SYNC_MASTER_VS_SINGLE_MIN),
        ("ASYNC_MASTER / single", async_master, ASYNC_MASTER_VS_SINGLE_MIN),
    ]
    out = [{"target": n, "value": v, "min": m, "pass": v >= m} for n, v, m in checks]
    out.append({"target": "failover max s", "value": failover["max_s"], "max": FAILOVER_MAX_S,
                "pass": failover["max_s"] <= FAILOVER_MAX_S})  # fmt: skip
    return out


SEND_CONFIGS: Final = (
    ("single master SYNC_FLUSH", 1, "ASYNC_MASTER"),
    ("SYNC_MASTER+SYNC_FLUSH", 2, "SYNC_MASTER"),
    ("ASYNC_MASTER+SYNC_FLUSH", 2, "ASYNC_MASTER"),
)


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """The catch-up row once; then the three send rows' clusters (single, SYNC_MASTER, ASYNC_MASTER) started side by
    side and ``args.rounds`` rounds of one short row each, the order rotated every round; each row reported by its
    median round and the ratios judged per round (:func:`paired_ratios`). Every process shares the machine's two
    cores and the host's speed drifts by 30 % within a minute, so the rows compared alternate at a finer grain than
    that drift; then the failover row."""
    replication = await bench_replication(args.fill_mib, console)
    rounds: list[list[Row]] = [[] for _ in SEND_CONFIGS]
    steal: list[list[float]] = [[] for _ in SEND_CONFIGS]
    with tempfile.TemporaryDirectory(prefix="bench-ha-send-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            clusters = []
            for i, (name, replicas, role) in enumerate(SEND_CONFIGS):
                cluster = SendCluster(name, replicas, role, Path(tmp) / f"data{i}", args.row_seconds)
                stack.push_async_callback(cluster.stop)
                await cluster.start()
                clusters.append(cluster)
            for r in range(args.rounds):
                for i in (*range(r % 3, 3), *range(r % 3)):
                    row, share = await clusters[i].row(console)
                    rounds[i].append(row)
                    steal[i].append(round(share, 4))
    rows = [sorted(runs, key=lambda r: r.msgs_per_s)[len(runs) // 2] for runs in rounds]
    failover = await bench_failover(args.kills, console)
    return {"machine": machine(), "replication": replication, "rows": [asdict(r) for r in rows],
            "rounds": [[asdict(r) for r in runs] for runs in rounds], "host_steal_share": steal,
            "round_ratios": round_ratios(rounds),
            "failover": failover, "targets": targets(replication, rounds, failover)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--row-seconds", type=float, default=5.0, help="seconds of one send row (one round's share)")
    parser.add_argument("--fill-mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds of the send rows (median judged)")
    parser.add_argument("--kills", type=int, default=3, help="failovers of the failover row")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("WARNING")
    console = Console()
    report = asyncio.run(run(args, console))
    table = Table(title=f"HA: SendBatch(100) x {CLIENTS} through the gateway; catching-up slave")
    for column in ("row", "msgs/s", "p99 ms", "failed"):
        table.add_column(column)
    for r in report["rows"]:
        table.add_row(r["flush"], f"{r['msgs_per_s']:,.0f}", f"{r['p99_ms']:.1f}", str(r["failed"]))
    table.add_row("replication (catch-up)", f"{report['replication']['mb_per_s']:.0f} MB/s", "", "")
    f = report["failover"]
    table.add_row(f"failover ({f['kills']:.0f} kills, p50 / max)", f"{f['p50_s']:.2f} / {f['max_s']:.2f} s", "",
                  f"lost {f['lost']:.0f}")  # fmt: skip
    console.print(table)
    per_round = Table(title="Send rows per round (ratios judged per round: their medians are the targets)")
    for column in ("round", "single msgs/s", "SYNC_MASTER", "ASYNC_MASTER", "host steal (single/SYNC/ASYNC)"):
        per_round.add_column(column)
    sync_ratios, async_ratios = report["round_ratios"]
    for i, (single, sync, asynchronous) in enumerate(zip(report["rounds"][0], sync_ratios, async_ratios, strict=True)):
        stolen = "/".join(f"{shares[i]:.1%}" for shares in report["host_steal_share"])
        per_round.add_row(str(i + 1), f"{single['msgs_per_s']:,.0f}", f"{sync:.2f}x", f"{asynchronous:.2f}x", stolen)
    console.print(per_round)
    for t in report["targets"]:
        bound = f"min {t['min']}" if "min" in t else f"max {t['max']}"
        console.print(f"{t['target']}: {t['value']:.2f} ({bound}) {'PASS' if t['pass'] else 'FAIL'}")
    if args.out is not None:
        write_report(args.out, report)


if __name__ == "__main__":
    main()
