"""Timer benchmark (``make bench``; not a pytest module): issue 32's figures for timer messages in one run.

Real ``mqbroker`` processes (``python -m mq_broker.main``, SYNC_FLUSH, on 127.0.0.1, no name server), 1 KiB bodies,
sends over the broker's SendStream (SendBatch frames, a few in flight), timers as TIMER_DELIVER_MS on a topic of
``message.type=DELAY``. The delivered records are pulled back from the real topic afterwards: lateness = the
delivered record's store time - its TIMER_OUT_MS; every timer must be there exactly once (count by UNIQ_KEY) and
none stored before it was due.

1. **Pending timers**: twin brokers P and N. ``--pending`` (1,000,000) timers due over the next 24 h (from 10 min
   on: none fires during the run) are sent to P; P's RSS before and after they are in its wheel (QueryTimers) gives
   the extra memory (target <= 256 MiB of anonymous memory, VmRSS less RssFile: what the wheel costs; the GiB of
   CommitLog the sends wrote stays mapped as file pages the kernel drops at will, reported apart next to what plain
   sends add to the twin's RssFile, as bench_consume reports RssAnon). Then SendBatch(100)
   of normal messages from 16 clients, rounds alternating N and P (``--rounds`` each, ``--round-seconds`` each):
   P's msgs/s over N's, the median of the per-pair ratios (target >= 0.8). P is stopped after the row.
2. **Burst**: ``--burst`` (100,000) timers due within one second, that second ``--burst-lead-s`` (25 s) after the
   sends start (on N): all delivered, lateness p99 <= 2 s and max <= 5 s. ``--profile DIR``: py-spy records the
   broker while the burst and the sustained row fire (collapsed stacks in DIR).
3. **Sustained**: timers due at ``--rate`` (5,000)/s for ``--sustained-s`` (40 s), all sent ahead (on N): lateness
   p99 <= 1.5 s.

Prints the table with PASS/MISS and writes JSON (``--out``). The whole run is bounded: each wait has a deadline and
the brokers are killed at the end whatever happened (about 3.5 min on the 2-core VM). Run:
``uv run --frozen python tests/bench/bench_timer.py --out bench-results/timer.json`` (smaller: ``--pending 100000
--burst 20000 --sustained-s 10``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
from bench_gateway import freeze_client_heap, machine, write_report
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.logging import configure_logging
from mq_common.protocol import SendMessageRequestHeader, TopicConfig
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chaos"))  # the timer rounds' helpers
from chaos_testkit import BrokerProcess, broker_env
from timer_testkit import (
    delay_topic,
    now_ms,
    percentile,
    pull_delivered,
    send_frames,
    timer_request,
    verdict,
)

BODY: Final = os.urandom(1024)
TOPIC: Final = "BenchTimerTopic"
NORMAL_TOPIC: Final = "BenchTimerNormalTopic"
QUEUES: Final = 8
FRAME: Final = 500
"""Timer sends per SendBatch frame."""
IN_FLIGHT: Final = 4
"""Frames in flight on a broker's SendStream while timers are sent."""
CLIENTS: Final = 16
BATCH: Final = 100
WARM_UP_S: Final = 2.0
PENDING_FROM_S: Final = 600
PENDING_SPAN_S: Final = 24 * 3600
DELIVERY_GRACE_S: Final = 90.0
"""How long after the last due time the run waits for deliveries before it judges what arrived."""
RUN_TIMEOUT_S: Final = 900.0
"""The whole run stops (brokers killed) after this long whatever happened."""
# Targets (issue 32).
PENDING_EXTRA_RSS_MAX_MIB: Final = 256.0
PENDING_THROUGHPUT_MIN: Final = 0.8
BURST_P99_MAX_S: Final = 2.0
BURST_MAX_S: Final = 5.0
SUSTAINED_P99_MAX_S: Final = 1.5


# -- helpers ----------------------------------------------------------------------------------------------------------


def burst_due_ms(start_ms: int, count: int) -> list[int]:
    """``count`` due times spread evenly over the one second that begins at ``start_ms`` (a whole second)."""
    return [start_ms + (i * 1000) // count for i in range(count)]


def paced_due_ms(start_ms: int, rate: int, seconds: float) -> list[int]:
    """Due times at ``rate`` per second for ``seconds`` from ``start_ms``."""
    return [start_ms + (i * 1000) // rate for i in range(int(rate * seconds))]


def spread_due_ms(start_ms: int, count: int, span_s: int) -> list[int]:
    """``count`` due times spread evenly over ``span_s`` seconds from ``start_ms``."""
    return [start_ms + (i * span_s * 1000) // count for i in range(count)]


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon and RssFile of ``pid`` in KiB (/proc/<pid>/status)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            out[name] = int(value.split()[0])
    return out


def ratio_of_pairs(pairs: Sequence[tuple[float, float]]) -> float:
    """The median of ``b / a`` over the (a, b) pairs (a round of each twin, measured back to back)."""
    return statistics.median(b / a for a, b in pairs)


def lateness_row(name: str, sent: int, due: dict[str, int], records: Sequence[Any], seconds: float) -> dict[str, Any]:
    """The figures of one delivery row: counts, exactly-once findings and lateness p50/p99/max (s)."""
    found = verdict(due, records)
    late = [ms / 1000 for ms in found.lateness_ms]
    fire = [(r.dequeue_ms - r.timer_out_ms) / 1000 for r in records if r.dequeue_ms]
    return {
        "row": name,
        "sent": sent,
        "delivered": found.delivered,
        "missing": len(found.missing),
        "duplicated": len(found.duplicated),
        "early": len(found.early),
        "unknown": len(found.unknown),
        "p50_s": round(percentile(late, 50), 3),
        "p99_s": round(percentile(late, 99), 3),
        "max_s": round(max(late, default=float("nan")), 3),
        "fire_p99_s": round(percentile(fire, 99), 3),
        "send_seconds": round(seconds, 2),
    }


# -- brokers -------------------------------------------------------------------------------------------------------


@dataclass
class Broker:
    process: BrokerProcess
    name: str

    @property
    def addr(self) -> str:
        return self.process.addr

    @property
    def pid(self) -> int:
        return self.process.proc.pid


def start_broker(work: Path, name: str, flush: str = "SYNC_FLUSH") -> Broker:
    """A broker on ``work/name``: 256 MiB CommitLog files, 300,000-unit ConsumeQueue files, INFO logs."""
    env = broker_env(
        work / name / "store", 256 * 1024 * 1024, flush,
        MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS="300000", MQ_BROKER_BROKER_NAME=name,
    )  # fmt: skip
    process = BrokerProcess(env, work / f"{name}.log")
    try:
        process.wait_started()
    except BaseException:
        process.close()
        raise
    return Broker(process, name)


@contextlib.asynccontextmanager
async def clients(count: int) -> AsyncIterator[list[BrokerClient]]:
    """``count`` BrokerClients, each with its own channel pool (own SendStream per broker)."""
    pools = [ChannelPool() for _ in range(count)]
    made = [BrokerClient(pool) for pool in pools]
    try:
        yield made
    finally:
        for client, pool in zip(made, pools, strict=True):
            with contextlib.suppress(Exception):
                await client.close()
            await pool.close()


async def create_topics(client: BrokerClient, addr: str) -> None:
    await client.create_topic(addr, delay_topic(TOPIC, QUEUES))
    await client.create_topic(addr, TopicConfig(NORMAL_TOPIC, QUEUES, QUEUES))


async def pending_timers(addr: str, topic: str) -> int:
    """QueryTimers' pending count of ``topic`` on ``addr`` (O(pending) on the broker: called seldom)."""
    async with grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS) as channel:
        stub: Any = broker_pb2_grpc.BrokerStub(channel)
        reply = await stub.QueryTimers(broker_pb2.QueryTimersRequest(topic=topic), timeout=60)
        if reply.code != 0:
            raise RuntimeError(f"QueryTimers: {reply.code} {reply.remark}")
        return int(reply.pending_timers)


async def wait_pending(addr: str, topic: str, predicate: Any, what: str, deadline_s: float, poll_s: float) -> int:
    end = time.monotonic() + deadline_s
    while True:
        pending = await pending_timers(addr, topic)
        if predicate(pending):
            return pending
        if time.monotonic() > end:
            raise RuntimeError(f"not within {deadline_s:.0f} s: {what} (pending {pending})")
        await asyncio.sleep(poll_s)


async def send_timers(client: BrokerClient, addr: str, prefix: str, due: Sequence[int]) -> tuple[dict[str, int], float]:
    """Timers due at ``due`` on TOPIC, FRAME per frame, IN_FLIGHT frames at a time; (UNIQ_KEY -> due ms, seconds)."""
    keys = {f"{prefix}{i:08d}": d for i, d in enumerate(due)}
    batches = (
        [timer_request(TOPIC, BODY, f"{prefix}{n:08d}", due[n], n % QUEUES) for n in range(i, min(i + FRAME, len(due)))]
        for i in range(0, len(due), FRAME)
    )  # built as the frames go: a million requests at once would be a GiB of client heap
    began = time.perf_counter()
    await send_frames(client, addr, batches, IN_FLIGHT)
    return keys, time.perf_counter() - began


def start_py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy (``uv tool run``) recording ``pid`` for ``seconds`` into ``out`` (collapsed stacks, idle frames out)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    uv = Path(__file__).resolve().parents[2] / ".tools" / "uv" / "bin" / "uv"
    command = [str(uv), "tool", "run", "py-spy", "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))),
               "--rate", "200", "--format", "raw", "--output", str(out), "--nonblocking"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# -- rows ----------------------------------------------------------------------------------------------------------


async def throughput_round(brokers: Sequence[BrokerClient], addr: str, seconds: float) -> float:
    """SendBatch(BATCH) of normal 1 KiB messages from CLIENTS closed-loop clients for ``seconds``: msgs/s."""
    requests = [
        SendMessageRequestHeader(
            topic=NORMAL_TOPIC, body=BODY, producer_group="bench", queue_id=i % QUEUES,
            properties=encode_properties({"UNIQ_KEY": f"N{i:06d}"}),
        )
        for i in range(BATCH)
    ]  # fmt: skip
    stored = 0
    end = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal stored
        mine = brokers[index % len(brokers)]
        while time.perf_counter() < end:
            answers = await mine.send_batch(addr, requests, 60_000)
            stored += sum(1 for a in answers if a.code == 0)

    began = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return stored / (time.perf_counter() - began)


async def row_pending(work: Path, args: argparse.Namespace, console: Console) -> tuple[dict[str, Any], Broker]:
    """Row 1 on twins P (timers) and N (none); P is stopped at the end, N returned for the next rows."""
    timed, normal = start_broker(work, "broker-p", args.flush), start_broker(work, "broker-n", args.flush)
    try:
        async with clients(4) as made:
            for broker in (timed, normal):
                await create_topics(made[0], broker.addr)
            for broker in (timed, normal):  # first files exist on both before any clock
                await throughput_round(made, broker.addr, WARM_UP_S)
            await asyncio.sleep(2.0)
            before = memory_kib(timed.pid)
            start = (now_ms() // 1000 + PENDING_FROM_S) * 1000
            due = spread_due_ms(start, args.pending, PENDING_SPAN_S)
            _keys, seconds = await send_timers(made[0], timed.addr, "P", due)
            del _keys, due
            console.log(f"{args.pending:,} pending timers sent in {seconds:.1f} s ({args.pending / seconds:,.0f}/s)")
            began = time.perf_counter()
            await wait_pending(timed.addr, TOPIC, lambda n: n >= args.pending, "every timer in the wheel", 300, 2.0)
            console.log(f"in the wheel {time.perf_counter() - began:.1f} s after the last send")
            await asyncio.sleep(2.0)
            after = memory_kib(timed.pid)
            normal_before = memory_kib(normal.pid)
            pairs: list[tuple[float, float]] = []
            for round_no in range(args.rounds):
                order = (normal, timed) if round_no % 2 == 0 else (timed, normal)
                rates = {b.name: await throughput_round(made, b.addr, args.round_seconds) for b in order}
                pairs.append((rates[normal.name], rates[timed.name]))
                console.log(f"round {round_no}: none pending {pairs[-1][0]:,.0f} msgs/s, pending {pairs[-1][1]:,.0f}")
            pending_after = await pending_timers(timed.addr, TOPIC)
            normal_after = memory_kib(normal.pid)
    except BaseException:
        normal.process.close()
        raise
    finally:
        timed.process.close()
    anon_extra = (after["VmRSS"] - after["RssFile"] - (before["VmRSS"] - before["RssFile"])) / 1024
    row = {
        "pending": args.pending,
        "pending_after_rounds": pending_after,
        "send_seconds": round(seconds, 2),
        "rss_before_kib": before,
        "rss_after_kib": after,
        "extra_anon_mib": round(anon_extra, 1),
        "extra_rss_mib": round((after["VmRSS"] - before["VmRSS"]) / 1024, 1),
        "extra_rss_file_mib": round((after["RssFile"] - before["RssFile"]) / 1024, 1),
        # the twin without timers over its throughput rounds: how much RssFile plain sends add (CommitLog pages)
        "twin_rss_file_growth_mib": round((normal_after["RssFile"] - normal_before["RssFile"]) / 1024, 1),
        "throughput_pairs": [(round(a), round(b)) for a, b in pairs],
        "throughput_ratio": round(ratio_of_pairs(pairs), 3),
    }
    return row, normal


async def row_delivery(
    broker: Broker, name: str, prefix: str, due: list[int], console: Console, profile: Path | None
) -> dict[str, Any]:
    """Send timers due at ``due`` (sorted), wait until none is pending and the last due time passed, read back.
    ``profile``: py-spy records the broker from the first due time to the last + 10 s (collapsed stacks there)."""
    async with clients(1) as (client,):
        if due[0] <= now_ms():
            raise RuntimeError(f"{name}: the first timer is due before the sends start")
        keys, seconds = await send_timers(client, broker.addr, prefix, due)
        lead_left_s = (due[0] - now_ms()) / 1000
        console.log(f"{name}: {len(due):,} timers sent in {seconds:.1f} s; first due in {lead_left_s:.1f} s")
        spy = None
        if profile is not None:
            await asyncio.sleep(max(0.0, lead_left_s - 0.5))
            spy = start_py_spy(broker.pid, profile / f"{prefix}.collapsed", (due[-1] - now_ms()) / 1000 + 10)
        await asyncio.sleep(max(0.0, (due[-1] - now_ms()) / 1000 + 1))  # QueryTimers is O(pending): not meanwhile
        await wait_pending(broker.addr, TOPIC, lambda n: n == 0, f"{name}: every timer fired", DELIVERY_GRACE_S, 1.0)
        if spy is not None:
            await asyncio.to_thread(spy.wait, 120)
        await asyncio.sleep(1.0)
        records = [r for r in await pull_delivered(client, broker.addr, TOPIC, QUEUES) if r.uniq_key[:1] == prefix]
    row = lateness_row(name, len(due), keys, records, seconds)
    row["sent_ahead_s"] = round(lead_left_s, 1)
    console.log(f"{name}: {row}")
    return row


# -- report -----------------------------------------------------------------------------------------------------------


def targets(
    pending: dict[str, Any] | None, burst: dict[str, Any] | None, sustained: dict[str, Any] | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if pending is not None:
        out.append({
            "target": f"{pending['pending']:,} pending timers over 24 h: extra broker RSS <= "
            f"{PENDING_EXTRA_RSS_MAX_MIB:g} MiB (anonymous)",
            "measured": f"+{pending['extra_anon_mib']} MiB anonymous (VmRSS +{pending['extra_rss_mib']} MiB, of which "
            f"+{pending['extra_rss_file_mib']} MiB CommitLog pages; the twin's RssFile grew "
            f"+{pending['twin_rss_file_growth_mib']} MiB over its plain-send rounds)",
            "pass": pending["extra_anon_mib"] <= PENDING_EXTRA_RSS_MAX_MIB,
        })  # fmt: skip
        out.append({
            "target": f"SendBatch({BATCH}) x{CLIENTS} with them pending >= {PENDING_THROUGHPUT_MIN:g} x none pending",
            "measured": f"{pending['throughput_ratio']:.2f} x (median of {len(pending['throughput_pairs'])} pairs, "
            f"msgs/s none/pending {pending['throughput_pairs']})",
            "pass": pending["throughput_ratio"] >= PENDING_THROUGHPUT_MIN,
        })  # fmt: skip
    for row, p99_max, max_max in ((burst, BURST_P99_MAX_S, BURST_MAX_S), (sustained, SUSTAINED_P99_MAX_S, None)):
        if row is None:
            continue
        exact = row["delivered"] == row["sent"] and not (row["missing"] or row["duplicated"] or row["early"])
        limit = f"p99 <= {p99_max:g} s" + (f", max <= {max_max:g} s" if max_max is not None else "")
        passed = exact and row["p99_s"] <= p99_max and (max_max is None or row["max_s"] <= max_max)
        out.append({
            "target": f"{row['row']}: all delivered once, none early, lateness {limit}",
            "measured": f"{row['delivered']:,}/{row['sent']:,} delivered (missing {row['missing']}, duplicated "
            f"{row['duplicated']}, early {row['early']}); lateness p50 {row['p50_s']} s p99 {row['p99_s']} s max "
            f"{row['max_s']} s",
            "pass": passed,
        })  # fmt: skip
    return out


def print_report(checks: Sequence[dict[str, Any]]) -> None:
    table = Table(title="Timer benchmark: 1 KiB bodies, SYNC_FLUSH broker processes, SendStream sends")
    for column in ("target", "measured", "result"):
        table.add_column(column)
    for c in checks:
        table.add_row(str(c["target"]), str(c["measured"]), "[green]PASS[/green]" if c["pass"] else "[red]MISS[/red]")
    Console(width=200).print(table)


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    rows = set(args.rows.split(","))
    pending = burst = sustained = None
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as tmp:
        work = Path(tmp)
        normal: Broker | None = None
        try:
            if "pending" in rows:
                pending, normal = await row_pending(work, args, console)
            if normal is None:
                normal = start_broker(work, "broker-n", args.flush)
                async with clients(1) as (client,):
                    await create_topics(client, normal.addr)
            freeze_client_heap()
            if "burst" in rows:
                start = (now_ms() // 1000 + int(args.burst_lead_s)) * 1000
                burst = await row_delivery(normal, "burst", "B", burst_due_ms(start, args.burst), console, args.profile)
            freeze_client_heap()
            if "sustained" in rows:
                lead_s = args.rate * args.sustained_s / args.timer_send_rate + 10
                start = now_ms() + int(lead_s * 1000)
                due = paced_due_ms(start, args.rate, args.sustained_s)
                sustained = await row_delivery(normal, f"sustained {args.rate:,}/s for {args.sustained_s:g} s", "S",
                                               due, console, args.profile)  # fmt: skip
        finally:
            if normal is not None:
                normal.process.close()
    checks = targets(pending, burst, sustained)
    print_report(checks)
    return {
        "pending": pending,
        "burst": burst,
        "sustained": sustained,
        "targets": checks,
        "body_bytes": len(BODY),
        "machine": machine(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run the rows, print the table, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/timer.json", help="JSON report path")
    parser.add_argument("--rows", default="pending,burst,sustained", help="comma-separated rows to run")
    parser.add_argument("--pending", type=int, default=1_000_000, help="timers pending over 24 h")
    parser.add_argument("--rounds", type=int, default=4, help="throughput rounds per twin")
    parser.add_argument("--round-seconds", type=float, default=4.0, help="seconds per throughput round")
    parser.add_argument("--burst", type=int, default=100_000, help="timers due in the same second")
    parser.add_argument("--burst-lead-s", type=float, default=25.0, help="the burst's second, after the sends start")
    parser.add_argument("--rate", type=int, default=5_000, help="timers due per second (sustained row)")
    parser.add_argument("--sustained-s", type=float, default=40.0, help="seconds of timers due at --rate")
    parser.add_argument(
        "--timer-send-rate", type=float, default=15_000.0, help="timer sends/s assumed for the sustained row's lead"
    )
    parser.add_argument("--flush", default="SYNC_FLUSH", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), help="brokers' flush")
    parser.add_argument("--profile", type=Path, help="py-spy the broker while timers fire (collapsed stacks here)")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    configure_logging("WARNING", json=False)  # the client library's own logs (a stream closed at the end) stay out
    report = asyncio.run(asyncio.wait_for(run(args, console), timeout=RUN_TIMEOUT_S))
    write_report(Path(args.out), report)
    console.print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
