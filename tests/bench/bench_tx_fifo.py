"""Transaction and FIFO benchmark (``make bench``; not a pytest module): issue 33's figures in one run.

One SYNC_FLUSH LocalCluster (name server, one broker, gateway as real processes on 127.0.0.1), 1 KiB bodies, the
project's own v1 clients talking to the broker as its users run them: ``TransactionMQProducer`` /
``DefaultMQProducer`` (the producer core, over the broker's SendStream) and ``SimpleConsumer`` (PopMessage +
AckMessage). The broker's ``transactionCheckInterval`` is ``--check-interval-ms`` (5,000 ms here; RocketMQ's 30 s
would make the check row a minute of waiting) and ``transactionTimeOut`` ``--transaction-timeout-ms`` (2,000 ms).

1. **Half + commit**: ``CLIENTS`` (16) TransactionMQProducers, each a closed loop of ``send_message_in_transaction``
   (half message, a local transaction that says COMMIT_MESSAGE, END_TRANSACTION) on a topic of
   ``message.type=TRANSACTION``, next to 16 DefaultMQProducers each a closed loop of plain ``send`` on a NORMAL topic;
   ``--rounds`` rounds of each, ``--round-seconds`` each, alternating which goes first: the median of the per-pair
   ratios (target >= 0.3). Every committed message is read back from the real topic (exactly once, by body).
2. **Check-back**: ``--open`` (10,000) transactions whose local transaction says UNKNOW (left open), sent by 16
   TransactionMQProducers whose ``check_local_transaction`` answers COMMIT_MESSAGE. The last one may be checked from
   ``transactionTimeOut`` after it was sent; from then, every one must be checked and its real message stored within
   2 check intervals (a pass may have begun just before: the next starts one interval later). Exactly once each.
3. **FIFO**: ``--groups`` (100) message groups x ``--per-group`` (1,000) messages sent in order per group
   (``sharding_key`` = the group; the producer core picks the group's queue by Java's String#hashCode) on a topic of
   ``message.type=FIFO`` with ``QUEUES`` queues, then drained by ``CONSUMERS`` (8) SimpleConsumers of one group with
   ``consumeMessageOrderly=true`` (orderly POP), each receive(32) then one AckMessage for the batch; the same backlog
   drained likewise by a group without it. Drains alternate (plain, orderly, orderly, plain with ``--fifo-rounds``
   2), each group a fresh one from the first offset. Orderly msgs/s over plain (target >= 0.5) and, per message
   group, the order of first receipt (violations: target 0); the plain group's violations are shown for contrast.

Prints the table with PASS/MISS and writes JSON (``--out``). The whole run is bounded (each wait has a deadline, the
cluster is stopped whatever happened; about 2 min on the 2-core VM). Run:
``uv run --frozen python tests/bench/bench_tx_fifo.py --out bench-results/tx_fifo.json`` (smaller: ``--open 2000
--groups 20 --rounds 1``). ``--profile DIR``: py-spy records the broker during the rows (collapsed stacks in DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench_gateway import freeze_client_heap, machine, write_report
from mq_client.consumer import PullConsumer
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_client.producer.transaction import LocalTransactionState, TransactionMQProducer
from mq_client.simple_consumer import SimpleConsumer
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import RemotingError
from mq_common.logging import configure_logging
from mq_common.protocol import ConsumeInitMode, SubscriptionGroupConfig, TopicConfig
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from mq_local.testing import TEST_BROKER_ENV, read_all
from mq_local.topics import create_topic_on_cluster
from rich.console import Console
from rich.table import Table

BODY_BYTES: Final = 1024
CLIENTS: Final = 16
CONSUMERS: Final = 8
QUEUES: Final = 8
RECEIVE_BATCH: Final = 32
INVISIBLE_MS: Final = 60_000
"""Longer than any drain: a redelivery here would be a fault, not a retry."""
AWAIT_MS: Final = 1_000
FILL_BATCH: Final = 100
WARM_UP_S: Final = 1.0
DRAIN_DEADLINE_S: Final = 120.0
RUN_TIMEOUT_S: Final = 600.0
TX_TOPIC: Final = "BenchTxTopic"
PLAIN_TOPIC: Final = "BenchPlainTopic"
CHECK_TOPIC: Final = "BenchTxCheckTopic"
FIFO_TOPIC: Final = "BenchFifoTopic"
# Targets (issue 33).
TX_VS_PLAIN_MIN: Final = 0.3
CHECK_INTERVALS_MAX: Final = 2
FIFO_VS_PLAIN_MIN: Final = 0.5


# -- pure helpers (tests/bench/test_bench_tx_fifo_helpers.py) --------------------------------------------------------


def body(key: str) -> bytes:
    """A BODY_BYTES body that starts with ``key`` and a ``|`` (the read-back's identity)."""
    head = f"{key}|".encode()
    return head + b"x" * (BODY_BYTES - len(head))


def key_of(data: bytes) -> str:
    """The key :func:`body` put in front."""
    return data.split(b"|", 1)[0].decode()


def fifo_key(group: int, seq: int) -> str:
    return f"g{group:03d}:{seq:06d}"


def parse_fifo_key(key: str) -> tuple[str, int]:
    """(message group, sequence number) of a :func:`fifo_key`."""
    group, _, seq = key.partition(":")
    return group, int(seq)


def ratio_of_pairs(pairs: Sequence[tuple[float, float]]) -> float:
    """The median of ``b / a`` over the (a, b) pairs (one round of each, measured back to back)."""
    return statistics.median(b / a for a, b in pairs)


@dataclass(frozen=True, slots=True)
class OrderFindings:
    """Per message group, the order in which its messages were first received. ``violations``: first receipts of
    a sequence number other than the next one expected (something earlier not yet received, or later ones
    received before it); ``duplicates``: receipts of a number already received; ``missing``: expected numbers never
    received; ``groups``: message groups seen."""

    violations: int
    duplicates: int
    missing: int
    groups: int


def order_findings(received: Mapping[str, Sequence[int]], per_group: int) -> OrderFindings:
    """Judge ``received`` (message group -> sequence numbers in receipt order, numbered 0..per_group-1 in send
    order)."""
    violations = duplicates = missing = 0
    for seqs in received.values():
        seen: set[int] = set()
        for seq in seqs:
            if seq in seen:
                duplicates += 1
                continue
            if seq != len(seen):
                violations += 1
            seen.add(seq)
        missing += sum(1 for s in range(per_group) if s not in seen)
    return OrderFindings(violations, duplicates, missing, len(received))


def exactly_once(expected: Iterable[str], found: Iterable[str]) -> dict[str, int]:
    """Read-back counts: ``delivered`` distinct expected keys found, ``missing``, ``duplicated`` (extra copies of
    a key) and ``unknown`` (keys not expected)."""
    wanted = set(expected)
    counts: dict[str, int] = {}
    for key in found:
        counts[key] = counts.get(key, 0) + 1
    return {
        "delivered": sum(1 for k in counts if k in wanted),
        "missing": sum(1 for k in wanted if k not in counts),
        "duplicated": sum(n - 1 for k, n in counts.items() if k in wanted),
        "unknown": sum(1 for k in counts if k not in wanted),
    }


def check_within_s(interval_ms: int) -> float:
    """The check row's limit: CHECK_INTERVALS_MAX check intervals, s."""
    return CHECK_INTERVALS_MAX * interval_ms / 1000


# -- cluster and clients ----------------------------------------------------------------------------------------------


def cluster_spec(data_dir: Path, args: argparse.Namespace) -> ClusterSpec:
    env = {
        **TEST_BROKER_ENV,
        "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(512 * 1024 * 1024),
        "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "300000",
        "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": str(args.check_interval_ms),
        "MQ_BROKER_TRANSACTION_TIMEOUT_MS": str(args.transaction_timeout_ms),
    }
    return ClusterSpec(
        data_dir=data_dir, ports=PortLayout.free(1), flush_disk_type="SYNC_FLUSH", log_level="WARNING",
        broker_env=env,
    )  # fmt: skip


async def create_topics(cluster: LocalCluster) -> None:
    typed = {TX_TOPIC: "TRANSACTION", CHECK_TOPIC: "TRANSACTION", FIFO_TOPIC: "FIFO", PLAIN_TOPIC: None}
    for name, message_type in typed.items():
        attributes = {"+message.type": message_type} if message_type else {}
        config = TopicConfig(name, QUEUES, QUEUES, attributes=attributes)
        await create_topic_on_cluster(cluster.namesrv_addr, config, cluster.spec.cluster_name)


class Listener:
    """Executes as the ``arg`` says; every check answers COMMIT_MESSAGE and is recorded (key, monotonic s)."""

    def __init__(self, checked: dict[str, float] | None = None) -> None:
        self.checked = checked if checked is not None else {}
        self.check_calls = 0

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState(arg)

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.check_calls += 1
        self.checked.setdefault(key_of(msg.body), time.monotonic())
        return LocalTransactionState.COMMIT_MESSAGE


@contextlib.asynccontextmanager
async def producers(namesrv: str, group: str, count: int) -> AsyncIterator[list[DefaultMQProducer]]:
    made = [DefaultMQProducer.connect(ProducerConfig(producer_group=group), [namesrv]) for _ in range(count)]
    try:
        for p in made:
            await p.start()
        yield made
    finally:
        for p in made:
            with contextlib.suppress(Exception):
                await p.shutdown()


@contextlib.asynccontextmanager
async def tx_producers(
    namesrv: str, group: str, count: int, listener: Listener
) -> AsyncIterator[list[TransactionMQProducer]]:
    config = ProducerConfig(producer_group=group)
    made = [TransactionMQProducer.connect(config, [namesrv], listener) for _ in range(count)]
    try:
        for p in made:
            await p.start()
        yield made
    finally:
        for p in made:
            with contextlib.suppress(Exception):
                await p.shutdown()


async def closed_loops(count: int, seconds: float, one: Callable[[int, int], Awaitable[bool]]) -> float:
    """``count`` closed loops calling ``one(loop, n)`` for ``seconds``; the successes per second."""
    done = 0
    end = time.perf_counter() + seconds

    async def loop(index: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < end:
            if await one(index, n):
                done += 1
            n += 1

    began = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(count)))
    return done / (time.perf_counter() - began)


async def topic_messages(consumer: PullConsumer, topic: str) -> int:
    """The sum of the topic's queue max offsets (messages stored; all start at 0 here)."""
    return sum([await consumer.max_offset(q) for q in await consumer.fetch_subscribe_message_queues(topic)])


def start_py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy (``uv tool run``) recording ``pid`` for ``seconds`` into ``out`` (collapsed stacks, idle frames out)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    uv = Path(__file__).resolve().parents[2] / ".tools" / "uv" / "bin" / "uv"
    command = [str(uv), "tool", "run", "py-spy", "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))),
               "--rate", "200", "--format", "raw", "--output", str(out), "--nonblocking"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.asynccontextmanager
async def profiled(pid: int, profile: Path | None, name: str, seconds: float) -> AsyncIterator[None]:
    spy = None if profile is None else start_py_spy(pid, profile / f"{name}.collapsed", seconds)
    try:
        yield
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it recorded on SIGINT (uv passes it on)
            await asyncio.to_thread(spy.wait, 30)


# -- rows -------------------------------------------------------------------------------------------------------------


async def row_transactions(cluster: LocalCluster, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Row 1: half + commit versus plain sends, 16 producers each, interleaved rounds."""
    namesrv = cluster.namesrv_addr
    committed: list[str] = []
    async with (
        producers(namesrv, "bench_plain_pg", CLIENTS) as plain,
        tx_producers(namesrv, "bench_tx_pg", CLIENTS, Listener()) as tx,
    ):

        async def plain_one(index: int, n: int) -> bool:
            await plain[index].send(Message(PLAIN_TOPIC, body(f"p{index}-{n}")))
            return True

        round_no = 0

        async def tx_one(index: int, n: int) -> bool:
            key = f"t{round_no}-{index}-{n}"
            result = await tx[index].send_message_in_transaction(Message(TX_TOPIC, body(key)), "COMMIT_MESSAGE")
            committed.append(key)
            return result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE

        for one in (plain_one, tx_one):  # routes, streams and first files on both sides before any clock
            await closed_loops(CLIENTS, WARM_UP_S, one)
        pairs: list[tuple[float, float]] = []
        for round_no in range(1, args.rounds + 1):
            freeze_client_heap()
            order = ("plain", "tx") if round_no % 2 else ("tx", "plain")
            rates: dict[str, float] = {}
            for name in order:
                rates[name] = await closed_loops(CLIENTS, args.round_seconds, plain_one if name == "plain" else tx_one)
            pairs.append((rates["plain"], rates["tx"]))
            console.log(f"round {round_no}: plain {rates['plain']:,.0f} msgs/s, half + commit {rates['tx']:,.0f} tx/s")
    await asyncio.sleep(1.0)
    found = exactly_once(committed, (key_of(m.body) for _, m in await read_all(namesrv, TX_TOPIC)))
    return {
        "pairs": [(round(a), round(b)) for a, b in pairs],
        "ratio": round(ratio_of_pairs(pairs), 3),
        "committed": len(committed),
        "read_back": found,
    }


async def row_check_back(cluster: LocalCluster, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Row 2: ``args.open`` transactions left open (UNKNOW), checked back and committed by the check answers."""
    namesrv = cluster.namesrv_addr
    checked: dict[str, float] = {}
    listener = Listener(checked)
    keys = [f"c{i:06d}" for i in range(args.open)]
    async with (
        tx_producers(namesrv, "bench_check_pg", CLIENTS, listener) as tx,
        PullConsumer([namesrv], "bench_check_probe") as probe,
    ):

        async def sender(index: int) -> None:
            for key in keys[index::CLIENTS]:
                await tx[index].send_message_in_transaction(Message(CHECK_TOPIC, body(key)), "UNKNOW")

        began = time.monotonic()
        await asyncio.gather(*(sender(i) for i in range(CLIENTS)))
        sent_at = time.monotonic()
        eligible_at = sent_at + args.transaction_timeout_ms / 1000
        console.log(f"{args.open:,} open transactions sent in {sent_at - began:.1f} s")
        limit_s = check_within_s(args.check_interval_ms)
        deadline = eligible_at + limit_s + 30
        stored = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(RemotingError):  # a refused probe (the broker busy) is asked again
                stored = await topic_messages(probe, CHECK_TOPIC)
            if stored >= args.open and len(checked) >= args.open:
                break
            await asyncio.sleep(0.1)
        resolved_at = time.monotonic()
    await asyncio.sleep(1.0)
    found = exactly_once(keys, (key_of(m.body) for _, m in await read_all(namesrv, CHECK_TOPIC)))
    first = min(checked.values(), default=float("nan"))
    last = max(checked.values(), default=float("nan"))
    row = {
        "open": args.open,
        "send_seconds": round(sent_at - began, 2),
        "checked": len(checked),
        "check_calls": listener.check_calls,
        "stored": stored,
        "read_back": found,
        "check_interval_ms": args.check_interval_ms,
        "transaction_timeout_ms": args.transaction_timeout_ms,
        "resolved_after_eligible_s": round(resolved_at - eligible_at, 2),
        "resolved_after_sent_s": round(resolved_at - sent_at, 2),
        "first_check_after_eligible_s": round(first - eligible_at, 2),
        "checks_span_s": round(last - first, 2),
        "limit_s": limit_s,
    }
    console.log(f"check-back: {row}")
    return row


@dataclass
class Drain:
    """What one drain received: per message group the sequence numbers in receipt order."""

    received: dict[str, list[int]] = field(default_factory=dict)
    total: int = 0


async def fill_fifo(cluster: LocalCluster, groups: int, per_group: int) -> float:
    """``groups`` x ``per_group`` messages, in order per group (each group sent by one loop, FILL_BATCH per call);
    seconds taken. Raises RuntimeError when any send failed."""
    failed = 0

    async def sender(producer: DefaultMQProducer, mine: Sequence[int]) -> None:
        nonlocal failed
        for g in mine:
            for start in range(0, per_group, FILL_BATCH):
                msgs = [
                    Message(FIFO_TOPIC, body(fifo_key(g, s)), sharding_key=f"g{g:03d}")
                    for s in range(start, min(start + FILL_BATCH, per_group))
                ]
                outcomes = await producer.send_batch(msgs)
                failed += sum(1 for o in outcomes if isinstance(o, Exception))

    began = time.perf_counter()
    async with producers(cluster.namesrv_addr, "bench_fifo_pg", CLIENTS) as made:
        await asyncio.gather(*(sender(made[i], range(i, groups, CLIENTS)) for i in range(CLIENTS)))
    if failed:
        raise RuntimeError(f"{failed} FIFO sends failed")
    return time.perf_counter() - began


async def drain(cluster: LocalCluster, group: str, total: int) -> tuple[float, Drain]:
    """CONSUMERS SimpleConsumers of ``group`` receive(RECEIVE_BATCH) and ack each batch until ``total`` messages
    came (or DRAIN_DEADLINE_S passed); (msgs/s from the first receive call to the last message, what came)."""
    got = Drain()
    namesrv = cluster.namesrv_addr
    consumers = [
        SimpleConsumer([namesrv], group, {FIFO_TOPIC: "*"}, await_duration_ms=AWAIT_MS, init_mode=ConsumeInitMode.FIRST)
        for _ in range(CONSUMERS)
    ]
    for c in consumers:
        await c.start()
    deadline = time.perf_counter() + DRAIN_DEADLINE_S
    last = time.perf_counter()

    async def consume(consumer: SimpleConsumer) -> None:
        nonlocal last
        while got.total < total and time.perf_counter() < deadline:
            views = await consumer.receive(RECEIVE_BATCH, INVISIBLE_MS)
            for view in views:
                message_group, seq = parse_fifo_key(key_of(view.body))
                got.received.setdefault(message_group, []).append(seq)
            if views:
                errors = await consumer.ack_batch(views)
                if any(errors):
                    raise RuntimeError(f"{group}: acks refused: {[e for e in errors if e][:3]}")
                got.total += len(views)
                last = time.perf_counter()

    began = time.perf_counter()
    try:
        await asyncio.gather(*(consume(c) for c in consumers))
    finally:
        for c in consumers:
            await c.close()
    return got.total / (last - began), got


async def row_fifo(cluster: LocalCluster, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Row 3: the FIFO backlog drained by orderly and plain groups, alternating."""
    total = args.groups * args.per_group
    seconds = await fill_fifo(cluster, args.groups, args.per_group)
    console.log(f"FIFO backlog of {total:,} ({args.groups} groups x {args.per_group:,}) stored in {seconds:.1f} s")
    calls = ConsumerAdminCalls(ChannelPool())
    broker_addr = next(iter(cluster.broker_addrs.values()))
    rates: dict[str, list[float]] = {"orderly": [], "plain": []}
    findings: dict[str, list[OrderFindings]] = {"orderly": [], "plain": []}
    order = ["plain", "orderly", "orderly", "plain"] * args.fifo_rounds
    for n, kind in enumerate(order[: 2 * args.fifo_rounds]):
        group = f"bench_fifo_{kind}_{n}"
        config = SubscriptionGroupConfig(group, consume_message_orderly=kind == "orderly")
        await calls.update_subscription_group(broker_addr, config)
        freeze_client_heap()
        rate, got = await drain(cluster, group, total)
        found = order_findings(got.received, args.per_group)
        rates[kind].append(rate)
        findings[kind].append(found)
        console.log(f"{kind} drain {n}: {rate:,.0f} msgs/s, {got.total:,} received, {found}")
    plain_rate = statistics.mean(rates["plain"])
    orderly_rate = statistics.mean(rates["orderly"])

    def summed(kind: str, name: str) -> int:
        return sum(getattr(f, name) for f in findings[kind])

    return {
        "messages": total,
        "groups": args.groups,
        "fill_seconds": round(seconds, 2),
        "orderly_msgs_per_s": [round(r) for r in rates["orderly"]],
        "plain_msgs_per_s": [round(r) for r in rates["plain"]],
        "ratio": round(orderly_rate / plain_rate, 3),
        "orderly_violations": summed("orderly", "violations"),
        "orderly_duplicates": summed("orderly", "duplicates"),
        "orderly_missing": summed("orderly", "missing"),
        "plain_violations": summed("plain", "violations"),
        "plain_missing": summed("plain", "missing"),
    }


# -- report -----------------------------------------------------------------------------------------------------------


def targets(
    tx: dict[str, Any] | None, check: dict[str, Any] | None, fifo: dict[str, Any] | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if tx is not None:
        back = tx["read_back"]
        exact = back["missing"] == 0 and back["duplicated"] == 0 and back["unknown"] == 0
        out.append({
            "target": f"half + commit x{CLIENTS} (TransactionMQProducer) >= {TX_VS_PLAIN_MIN:g} x plain SYNC_FLUSH "
            f"send x{CLIENTS}; every commit read back once",
            "measured": f"{tx['ratio']:.2f} x (median of {len(tx['pairs'])} pairs, plain msgs/s / half+commit tx/s "
            f"{tx['pairs']}); read back {back['delivered']:,}/{tx['committed']:,} (missing {back['missing']}, "
            f"duplicated {back['duplicated']})",
            "pass": tx["ratio"] >= TX_VS_PLAIN_MIN and exact,
        })  # fmt: skip
    if check is not None:
        back = check["read_back"]
        exact = back["delivered"] == check["open"] and back["duplicated"] == 0 and check["checked"] == check["open"]
        out.append({
            "target": f"check-back of {check['open']:,} open transactions: all checked and committed within "
            f"{CHECK_INTERVALS_MAX} check intervals ({check['limit_s']:g} s; transactionCheckInterval "
            f"{check['check_interval_ms']:,} ms, transactionTimeOut {check['transaction_timeout_ms']:,} ms)",
            "measured": f"{check['resolved_after_eligible_s']} s after the last became checkable (first check "
            f"{check['first_check_after_eligible_s']} s, checks over {check['checks_span_s']} s); checked "
            f"{check['checked']:,} ({check['check_calls']:,} calls), read back {back['delivered']:,} (duplicated "
            f"{back['duplicated']})",
            "pass": exact and check["resolved_after_eligible_s"] <= check["limit_s"],
        })  # fmt: skip
    if fifo is not None:
        out.append({
            "target": f"FIFO {fifo['groups']} groups x {fifo['messages'] // fifo['groups']:,}: orderly POP group x"
            f"{CONSUMERS} >= {FIFO_VS_PLAIN_MIN:g} x a plain group on the same topic",
            "measured": f"{fifo['ratio']:.2f} x (orderly {fifo['orderly_msgs_per_s']} msgs/s, plain "
            f"{fifo['plain_msgs_per_s']} msgs/s)",
            "pass": fifo["ratio"] >= FIFO_VS_PLAIN_MIN,
        })  # fmt: skip
        out.append({
            "target": "FIFO orderly: order violations per message group 0, nothing missing or duplicated",
            "measured": f"{fifo['orderly_violations']} violations, {fifo['orderly_missing']} missing, "
            f"{fifo['orderly_duplicates']} duplicated (the plain group: {fifo['plain_violations']} violations)",
            "pass": fifo["orderly_violations"] == 0 and fifo["orderly_missing"] == 0
            and fifo["orderly_duplicates"] == 0,
        })  # fmt: skip
    return out


def print_report(checks: Sequence[dict[str, Any]]) -> None:
    table = Table(title="Transactions and FIFO: 1 KiB bodies, SYNC_FLUSH broker, the project's v1 clients")
    for column in ("target", "measured", "result"):
        table.add_column(column)
    for c in checks:
        table.add_row(str(c["target"]), str(c["measured"]), "[green]PASS[/green]" if c["pass"] else "[red]MISS[/red]")
    Console(width=200).print(table)


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    rows = set(args.rows.split(","))
    tx = check = fifo = None
    with tempfile.TemporaryDirectory(prefix="bench-tx-fifo-") as tmp:
        cluster = await asyncio.to_thread(LocalCluster(cluster_spec(Path(tmp) / "data", args)).start)
        try:
            await create_topics(cluster)
            pid = next(iter(cluster.brokers.values())).pid
            if "tx" in rows:
                async with profiled(pid, args.profile, "tx", 2 * args.rounds * args.round_seconds + 4):
                    tx = await row_transactions(cluster, args, console)
            if "check" in rows:
                async with profiled(pid, args.profile, "check", 60):
                    check = await row_check_back(cluster, args, console)
            if "fifo" in rows:
                async with profiled(pid, args.profile, "fifo", 120):
                    fifo = await row_fifo(cluster, args, console)
        finally:
            await asyncio.to_thread(cluster.stop)
    checks = targets(tx, check, fifo)
    print_report(checks)
    return {"transactions": tx, "check_back": check, "fifo": fifo, "targets": checks, "body_bytes": BODY_BYTES,
            "machine": machine()}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Run the rows, print the table, write ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/tx_fifo.json", help="JSON report path")
    parser.add_argument("--rows", default="tx,check,fifo", help="comma-separated rows to run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds of each kind (row 1)")
    parser.add_argument("--round-seconds", type=float, default=5.0, help="seconds per throughput round")
    parser.add_argument("--open", type=int, default=10_000, help="open transactions to check back")
    parser.add_argument("--check-interval-ms", type=int, default=5_000, help="the broker's transactionCheckInterval")
    parser.add_argument("--transaction-timeout-ms", type=int, default=2_000, help="the broker's transactionTimeOut")
    parser.add_argument("--groups", type=int, default=100, help="FIFO message groups")
    parser.add_argument("--per-group", type=int, default=1_000, help="FIFO messages per group")
    parser.add_argument("--fifo-rounds", type=int, default=2, help="drains of each kind (plain, orderly, ...)")
    parser.add_argument("--profile", type=Path, help="py-spy the broker during each row (collapsed stacks here)")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    configure_logging("WARNING", json=False)
    report = asyncio.run(asyncio.wait_for(run(args, console), timeout=RUN_TIMEOUT_S))
    write_report(Path(args.out), report)
    console.print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
