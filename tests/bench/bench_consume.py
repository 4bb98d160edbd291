"""Consume benchmark (not a pytest module): consume throughput from a backlog, end-to-end latency through a
long-polling consumer, and the broker memory that parked polls and in-flight POP messages cost, next to NATS
JetStream measured in the same run.

1 KiB bodies, one SYNC_FLUSH LocalCluster (name server, one broker, gateway as real processes on 127.0.0.1).

- Throughput: a backlog of ``--backlog`` messages (200,000) on a topic of 16 queues, then 16 consumers (asyncio tasks
  of this process) drain it. ``pull``: each consumer owns one queue and pulls ``PULL_BATCH`` messages per PullMessage,
  committing its offset on the next pull (commit_offset, as RocketMQ's pull consumer piggy-backs it). ``POP``: the 16
  consumers PopMessage(32) from any queue of the topic (a group of its own, from the first offset) and acknowledge
  each receive with one AckMessage carrying every handle; a second POP row (another group, the same backlog)
  acknowledges each receive in the consumer's next PopMessage instead (ack_receipt_handles: one call per receive; the
  last receive by an AckMessage). All decode every record (what a client does). JetStream: nats-server with a file
  store, the same backlog published first, 16 nats-py pull subscribers of one durable consumer doing ``fetch(100)``
  and acking each message.
- Latency: single Sends through the gateway paced at 500 msgs/s (open loop), the send time in the body; one
  consumer long-polls every queue (PullMessage with suspend_timeout_ms, parked on the broker until dispatch wakes
  it); latency = received - sent, p50/p99 over ``--latency-seconds``. No poll interval exists to wait for.
- Memory: broker anonymous RSS (RssAnon, /proc) before and with 1,000 parked long polls, then with 100,000 popped
  and unacknowledged messages (invisible for 300 s). Anonymous memory is what these structures cost: the records
  the pops read are mmap'd CommitLog pages, counted in RssFile, which the kernel drops at will.

Prints the table and the targets (pull >= 2 x JetStream; POP acking in the next pop >= 1 x JetStream, the AckMessage
row for reference; latency p99 <= 20 ms; memory <= 200 MiB extra) and writes a JSON report (``--out``).
Run: ``uv run --frozen python tests/bench/bench_consume.py --out bench-results/consume.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import grpc
from bench_gateway import (
    freeze_client_heap,
    machine,
    nats_server_binary,
    pace,
    percentile_ms,
    running_nats_server,
    write_report,
)
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.codec import iter_messages
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from mq_local.testing import TEST_BROKER_ENV, make_topic
from rich.console import Console
from rich.table import Table

BODY: Final = os.urandom(1024)
QUEUES: Final = 16
CONSUMERS: Final = 16
PULL_BATCH: Final = 32
POP_BATCH: Final = 32
NATS_FETCH: Final = 100
FILL_BATCH: Final = 100
FILL_CLIENTS: Final = 16
RPC_TIMEOUT_S: Final = 30.0
PACED_RATE: Final = 500
LATENCY_SUSPEND_MS: Final = 15_000
PARKED_POLLS: Final = 1_000
INFLIGHT_POP_MESSAGES: Final = 100_000
INFLIGHT_INVISIBLE_MS: Final = 300_000
# Targets (the consumption issue).
PULL_VS_JETSTREAM_MIN: Final = 2.0
POP_VS_JETSTREAM_MIN: Final = 1.0
LATENCY_P99_MAX_MS: Final = 20.0
MEMORY_EXTRA_MAX_MIB: Final = 200.0
_TIME_PREFIX: Final = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement. ``msgs_per_s`` for throughput rows, ``p50_ms``/``p99_ms`` for latency rows."""

    system: str
    api: str
    consumers: int
    messages: int
    seconds: float
    msgs_per_s: float
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")


# -- backlog --------------------------------------------------------------------------------------------------


async def fill(gateway: Any, topic: str, count: int) -> None:
    """``count`` messages on ``topic`` through the gateway's SendBatch(100), FILL_CLIENTS at a time; raises
    RuntimeError when any send failed (a benchmark on a partial backlog would mean nothing)."""
    message = gateway_pb2.Message(topic=topic, body=BODY)
    calls = [FILL_BATCH] * (count // FILL_BATCH) + ([count % FILL_BATCH] if count % FILL_BATCH else [])
    failed = 0

    async def client(mine: Sequence[int]) -> None:
        nonlocal failed
        for n in mine:
            reply = await gateway.SendBatch(gateway_pb2.SendBatchRequest(messages=[message] * n), timeout=60)
            failed += sum(1 for r in reply.results if r.code != 0)

    await asyncio.gather(*(client(calls[i::FILL_CLIENTS]) for i in range(FILL_CLIENTS)))
    if failed:
        raise RuntimeError(f"{failed} of {count} backlog sends failed")


# -- our consumers ----------------------------------------------------------------------------------------------


async def bench_pull(broker: Any, topic: str, group: str, backlog: int) -> Row:
    """CONSUMERS tasks, one queue each, pulling PULL_BATCH per call with the previous offset committed."""
    consumed = 0

    async def consumer(queue_id: int) -> None:
        nonlocal consumed
        offset = 0
        while True:
            request = broker_pb2.PullMessageRequest(
                consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                max_msg_nums=PULL_BATCH, commit_offset=offset,
            )  # fmt: skip
            reply = await broker.PullMessage(request, timeout=RPC_TIMEOUT_S)
            if reply.code != 0 or reply.message_count == 0:
                return
            consumed += sum(1 for _ in iter_messages(reply.message_bytes))
            offset = reply.next_begin_offset

    began = time.perf_counter()
    await asyncio.gather(*(consumer(q) for q in range(QUEUES)))
    secs = time.perf_counter() - began
    if consumed != backlog:
        raise RuntimeError(f"pull consumed {consumed} of {backlog}")
    return Row("pyrocketmq", f"PullMessage({PULL_BATCH}) + commit offset", CONSUMERS, consumed, round(secs, 2),
               round(consumed / secs, 1))  # fmt: skip


async def bench_pop(broker: Any, topic: str, group: str, backlog: int, *, piggyback: bool = False) -> Row:
    """CONSUMERS tasks popping POP_BATCH from any queue. Each receive is acknowledged by one AckMessage carrying
    every handle, or (``piggyback``) by the consumer's next PopMessage (ack_receipt_handles; the last receive by
    an AckMessage)."""
    consumed = 0
    empty_in_a_row = 0

    def check(code: int, remark: str, codes: Sequence[int], remarks: Sequence[str]) -> None:
        if code != 0 or any(codes):
            raise RuntimeError(f"ack refused: {code} {remark} {list(remarks)[:3]}")

    async def ack(handles: list[str]) -> None:
        request = broker_pb2.AckMessageRequest(consumer_group=group, topic=topic, receipt_handles=handles)
        answer = await broker.AckMessage(request, timeout=RPC_TIMEOUT_S)
        check(answer.code, answer.remark, answer.codes, answer.remarks)

    async def consumer() -> None:
        nonlocal consumed, empty_in_a_row
        unacked: list[str] = []
        while consumed < backlog and empty_in_a_row < 3 * CONSUMERS:
            request = broker_pb2.PopMessageRequest(
                consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=POP_BATCH, invisible_time_ms=60_000,
                poll_time_ms=0, init_mode=1, ack_receipt_handles=unacked,
            )  # fmt: skip
            reply = await broker.PopMessage(request, timeout=RPC_TIMEOUT_S)
            if unacked:
                check(0, "", reply.ack_codes, reply.ack_remarks)
                if len(reply.ack_codes) != len(unacked):
                    raise RuntimeError(f"{len(reply.ack_codes)} ack codes for {len(unacked)} handles")
            unacked = []
            if not reply.messages:
                empty_in_a_row += 1
                continue
            empty_in_a_row = 0
            consumed += sum(1 for m in reply.messages for _ in iter_messages(m.message))
            unacked = [m.receipt_handle for m in reply.messages]
            if not piggyback:
                await ack(unacked)
                unacked = []
        if unacked:
            await ack(unacked)

    began = time.perf_counter()
    await asyncio.gather(*(consumer() for _ in range(CONSUMERS)))
    secs = time.perf_counter() - began
    if consumed < backlog:
        raise RuntimeError(f"POP consumed {consumed} of {backlog}")
    api = f"PopMessage({POP_BATCH}) + " + ("acks in the next pop" if piggyback else "batch ack")
    return Row("pyrocketmq", api, CONSUMERS, consumed, round(secs, 2), round(consumed / secs, 1))


async def bench_latency(gateway: Any, broker: Any, topic: str, group: str, seconds: float) -> Row:
    """Sends paced at PACED_RATE through the gateway; one long-polling pull per queue receives them."""
    latencies: list[float] = []
    total = int(PACED_RATE * seconds)
    done = asyncio.Event()

    async def consumer(queue_id: int) -> None:
        offset = 0
        while not done.is_set():
            request = broker_pb2.PullMessageRequest(
                consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=PULL_BATCH,
                commit_offset=offset, suspend_timeout_ms=LATENCY_SUSPEND_MS,
            )  # fmt: skip
            reply = await broker.PullMessage(request, timeout=LATENCY_SUSPEND_MS / 1000 + RPC_TIMEOUT_S)
            now_ns = time.time_ns()
            for message in iter_messages(reply.message_bytes):
                latencies.append((now_ns - _TIME_PREFIX.unpack_from(message.body)[0]) / 1e9)
            if len(latencies) >= total:
                done.set()
            if reply.message_count:
                offset = reply.next_begin_offset

    async def send(i: int) -> None:
        body = _TIME_PREFIX.pack(time.time_ns()) + BODY[_TIME_PREFIX.size :]
        reply = await gateway.Send(gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=body)))
        if reply.result.code != 0:
            raise RuntimeError(f"send {i} failed: {reply.result.code} {reply.result.remark}")

    consumers = [asyncio.create_task(consumer(q)) for q in range(QUEUES)]
    await asyncio.sleep(1.0)  # every consumer parked on the broker before the first send
    began = await pace(PACED_RATE, total, send)
    try:
        await asyncio.wait_for(done.wait(), timeout=RPC_TIMEOUT_S)
    finally:
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
    secs = time.perf_counter() - began
    return Row("pyrocketmq", f"Send {PACED_RATE}/s -> long-polling pull", 1, len(latencies), round(secs, 2),
               round(len(latencies) / secs, 1), round(percentile_ms(latencies, 50), 2),
               round(percentile_ms(latencies, 99), 2))  # fmt: skip


# -- memory -------------------------------------------------------------------------------------------------------


def rss_anon_mib(pid: int) -> float:
    """RssAnon of ``pid`` in MiB (/proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no RssAnon for pid {pid}")


async def bench_memory(broker: Any, pid: int, topic: str, empty_topic: str, group: str) -> dict[str, float]:
    """Broker RssAnon: baseline, with PARKED_POLLS parked pulls, with INFLIGHT_POP_MESSAGES popped unacked."""
    await asyncio.sleep(1.0)
    baseline = rss_anon_mib(pid)
    polls = [
        asyncio.ensure_future(
            broker.PullMessage(
                broker_pb2.PullMessageRequest(
                    consumer_group=group, topic=empty_topic, queue_id=i % QUEUES, queue_offset=0, max_msg_nums=32,
                    suspend_timeout_ms=LATENCY_SUSPEND_MS,
                ),
                timeout=LATENCY_SUSPEND_MS / 1000 + RPC_TIMEOUT_S,
            )
        )
        for i in range(PARKED_POLLS)
    ]  # fmt: skip
    await asyncio.sleep(3.0)
    parked = rss_anon_mib(pid)
    answered_early = sum(1 for p in polls if p.done())
    for p in polls:
        p.cancel()
    await asyncio.gather(*polls, return_exceptions=True)
    popped = 0
    while popped < INFLIGHT_POP_MESSAGES:
        request = broker_pb2.PopMessageRequest(
            consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=POP_BATCH,
            invisible_time_ms=INFLIGHT_INVISIBLE_MS, init_mode=1,
        )  # fmt: skip
        reply = await broker.PopMessage(request, timeout=RPC_TIMEOUT_S)
        if not reply.messages:
            break
        popped += len(reply.messages)
    inflight = rss_anon_mib(pid)
    return {
        "baseline_rss_anon_mib": round(baseline, 1),
        "parked_polls": PARKED_POLLS,
        "parked_polls_answered_early": answered_early,
        "parked_extra_mib": round(parked - baseline, 1),
        "inflight_pop_messages": popped,
        "inflight_extra_mib": round(inflight - baseline, 1),
    }


# -- NATS JetStream ----------------------------------------------------------------------------------------------


async def bench_nats_consume(port: int, backlog: int, fetch: int = NATS_FETCH) -> Row:
    """CONSUMERS pull subscribers of one durable consumer drain ``backlog`` messages (published first), each
    ``fetch``-ing up to ``fetch`` messages and acking every one."""
    import nats  # type: ignore[import-not-found]  # nats-py, dev-only
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType  # type: ignore[import-not-found]

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream(publish_async_max_pending=4000)
        await js.add_stream(name="CONSUME", subjects=["consume.>"], storage=StorageType.FILE)
        for _ in range(backlog):
            await js.publish_async("consume.m", BODY)
        await js.publish_async_completed()
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=CONSUMERS * fetch * 4)
        subs = [await js.pull_subscribe("consume.m", durable="bench", config=config) for _ in range(CONSUMERS)]
        consumed = 0

        async def consumer(sub: Any) -> None:
            nonlocal consumed
            while consumed < backlog:
                try:
                    msgs = await sub.fetch(fetch, timeout=2)
                except TimeoutError:  # nats-py raises its own subclass or the builtin
                    return
                for msg in msgs:
                    await msg.ack()
                consumed += len(msgs)

        began = time.perf_counter()
        await asyncio.gather(*(consumer(s) for s in subs))
        await nc.flush()
        secs = time.perf_counter() - began
    finally:
        await nc.close()
    if consumed < backlog:
        raise RuntimeError(f"JetStream consumed {consumed} of {backlog}")
    return Row("nats-jetstream", f"fetch({fetch}) + ack", CONSUMERS, consumed, round(secs, 2),
               round(consumed / secs, 1))  # fmt: skip


async def run_nats(backlog: int, console: Console) -> list[Row]:
    binary = nats_server_binary(console)
    if binary is None:
        return []
    with (
        tempfile.TemporaryDirectory(prefix="bench-nats-consume-") as tmp,
        running_nats_server(binary, Path(tmp)) as port,
    ):
        if port is None:
            console.print(f"[red]nats-server did not start; see {tmp}/nats.log[/red]")
            return []
        freeze_client_heap()
        row = await bench_nats_consume(port, backlog)
        console.log(f"{row.system} {row.api}: {row.msgs_per_s:,.0f} msgs/s")
        return [row]


# -- ours ---------------------------------------------------------------------------------------------------------


def cluster_spec(data_dir: Path) -> ClusterSpec:
    env = {**TEST_BROKER_ENV, "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(512 * 1024 * 1024)}
    return ClusterSpec(
        data_dir=data_dir, ports=PortLayout.free(1), flush_disk_type="SYNC_FLUSH", log_level="WARNING",
        broker_env=env,
    )  # fmt: skip


async def run_ours(args: argparse.Namespace, console: Console) -> tuple[list[Row], dict[str, float]]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-consume-") as tmp:
        cluster = await asyncio.to_thread(LocalCluster(cluster_spec(Path(tmp) / "data")).start)
        try:
            gw_channel = grpc.aio.insecure_channel(cluster.gateway_addr, options=CHANNEL_OPTIONS)
            broker_addr = next(iter(cluster.broker_addrs.values()))
            channels = [grpc.aio.insecure_channel(broker_addr, options=CHANNEL_OPTIONS) for _ in range(4)]
            try:
                gateway = gateway_pb2_grpc.ProducerGatewayStub(gw_channel)
                brokers = [broker_pb2_grpc.BrokerStub(c) for c in channels]
                topic = await make_topic(cluster, "bench_consume", queues=QUEUES)
                began = time.perf_counter()
                await fill(gateway, topic, args.backlog)
                console.log(f"backlog of {args.backlog:,} stored in {time.perf_counter() - began:.1f} s")
                freeze_client_heap()
                rows.append(await bench_pull(brokers[0], topic, "bench_pull_group", args.backlog))
                console.log(f"pull: {rows[-1].msgs_per_s:,.0f} msgs/s")
                freeze_client_heap()
                rows.append(await bench_pop(brokers[1], topic, "bench_pop_group", args.backlog))
                console.log(f"POP: {rows[-1].msgs_per_s:,.0f} msgs/s")
                freeze_client_heap()
                rows.append(
                    await bench_pop(brokers[1], topic, "bench_pop_piggyback_group", args.backlog, piggyback=True)
                )
                console.log(f"POP, acks in the next pop: {rows[-1].msgs_per_s:,.0f} msgs/s")
                latency_topic = await make_topic(cluster, "bench_latency", queues=QUEUES)
                freeze_client_heap()
                rows.append(
                    await bench_latency(gateway, brokers[2], latency_topic, "bench_latency_group", args.latency_seconds)
                )
                console.log(f"latency: p50 {rows[-1].p50_ms} ms p99 {rows[-1].p99_ms} ms")
                empty_topic = await make_topic(cluster, "bench_parked", queues=QUEUES)
                broker_pid = next(iter(cluster.brokers.values())).pid
                memory = await bench_memory(brokers[3], broker_pid, topic, empty_topic, "bench_memory_group")
                console.log(f"memory: {memory}")
            finally:
                for channel in (*channels, gw_channel):
                    await channel.close()
        finally:
            await asyncio.to_thread(cluster.stop)
    return rows, memory


# -- report ------------------------------------------------------------------------------------------------------


def targets(rows: Sequence[Row], memory: dict[str, float]) -> list[dict[str, object]]:
    nats_rate = next((r.msgs_per_s for r in rows if r.system == "nats-jetstream"), None)
    pull = next((r for r in rows if r.api.startswith("PullMessage")), None)
    # the target is POP's fastest way to ack (in the next pop); the separate AckMessage row is shown for reference
    pops = [(r, POP_VS_JETSTREAM_MIN if "next pop" in r.api else None) for r in rows if r.api.startswith("PopMessage")]
    latency = next((r for r in rows if "long-polling" in r.api), None)
    out: list[dict[str, object]] = []
    for row, minimum in ((pull, PULL_VS_JETSTREAM_MIN), *pops):
        if row is None:
            continue
        if nats_rate:
            ratio = row.msgs_per_s / nats_rate
            measured = f"{row.msgs_per_s:,.0f} vs {nats_rate:,.0f} msgs/s = {ratio:.2f} x"
            target = (
                f"{row.api} vs JetStream (reference)" if minimum is None else f"{row.api} >= {minimum:g} x JetStream"
            )
            out.append({"target": target, "measured": measured, "pass": None if minimum is None else ratio >= minimum})
        else:
            out.append({"target": f"{row.api} vs JetStream", "measured": "JetStream not run", "pass": None})
    if latency is not None:
        out.append({
            "target": f"send -> long-polling consumer p99 <= {LATENCY_P99_MAX_MS:g} ms at {PACED_RATE} msgs/s",
            "measured": f"p99 {latency.p99_ms:.2f} ms (p50 {latency.p50_ms:.2f})",
            "pass": latency.p99_ms <= LATENCY_P99_MAX_MS,
        })  # fmt: skip
    if memory:
        worst = max(memory["parked_extra_mib"], memory["inflight_extra_mib"])
        out.append({
            "target": f"{PARKED_POLLS:,} parked polls / {INFLIGHT_POP_MESSAGES:,} in-flight POP messages <= "
            f"{MEMORY_EXTRA_MAX_MIB:g} MiB extra broker RssAnon",
            "measured": f"parked +{memory['parked_extra_mib']} MiB, in flight ({memory['inflight_pop_messages']:,}) "
            f"+{memory['inflight_extra_mib']} MiB",
            "pass": worst <= MEMORY_EXTRA_MAX_MIB and memory["inflight_pop_messages"] >= INFLIGHT_POP_MESSAGES,
        })  # fmt: skip
    return out


def print_report(rows: Sequence[Row], checks: Sequence[dict[str, object]]) -> None:
    table = Table(title="Consume benchmark: 1 KiB messages, SYNC_FLUSH broker, 16 consumers")
    for column in ("system", "api", "consumers", "messages", "seconds", "msgs/s", "p50 ms", "p99 ms"):
        table.add_column(column, justify="left" if column in ("system", "api") else "right")
    for r in rows:
        table.add_row(r.system, r.api, str(r.consumers), f"{r.messages:,}", f"{r.seconds:.2f}", f"{r.msgs_per_s:,.0f}",
                      f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}")  # fmt: skip
    goals = Table(title="consume targets")
    for column in ("target", "measured", "result"):
        goals.add_column(column)
    for c in checks:
        verdict = "n/a" if c["pass"] is None else ("[green]pass[/green]" if c["pass"] else "[red]FAIL[/red]")
        goals.add_row(str(c["target"]), str(c["measured"]), verdict)
    console = Console(width=160)
    console.print(table)
    console.print(goals)


async def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    rows, memory = await run_ours(args, console)
    rows.extend(await run_nats(args.backlog, console))
    checks = targets(rows, memory)
    print_report(rows, checks)
    return {
        "rows": [asdict(r) for r in rows],
        "memory": memory,
        "targets": checks,
        "backlog": args.backlog,
        "body_bytes": len(BODY),
        "machine": machine(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run every row, print the tables, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/consume.json", help="JSON report path")
    parser.add_argument("--backlog", type=int, default=200_000, help="messages in the backlog to drain")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="seconds of paced sends")
    parser.add_argument("--only-nats", action="store_true", help="only the JetStream row")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if args.only_nats:
        rows = asyncio.run(run_nats(args.backlog, console))
        print_report(rows, [])
        return
    report = asyncio.run(run(args, console))
    write_report(Path(args.out), report)
    console.print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
