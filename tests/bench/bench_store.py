"""Store benchmark (``make bench``; not a pytest module): appends/s of the in-process DefaultMessageStore.

1 KiB bodies. Rows: ASYNC_FLUSH and SYNC_FLUSH with 1, 16, 64 and 256 concurrent producers (asyncio tasks), each
twice: one message per put (put_messages) and RocketMQ's MessageBatch of 100 messages per put (put_message_batch, the
body encoded as a producer sends it), next to two references measured in the same run: a raw mmap write of the same
record bytes (the ceiling) and a write + fsync per record (the floor). Every cell starts from a warm store (each queue
has its first ConsumeQueue file, the index file exists), as the ceiling starts from a preallocated file. Also msyncs per
message (MappedFile.msync_calls, every file of the process), p50/p99 put latency, and the recovery time of a 1 GiB
log after SIGKILL (a child builds it with ASYNC_FLUSH and big batches and is killed; a fresh child times
DefaultMessageStore.start()).

Prints a rich table with the store targets (pass/fail) and writes a JSON report (``--out``).
Run: ``uv run --frozen python tests/bench/bench_store.py [--messages N] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from mq_broker.store.config import GIB, FlushDiskType, MessageStoreConfig
from mq_broker.store.mapped_file import MappedFile
from mq_broker.store.message import MessageExtBatch, MessageExtBrokerInner
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_message, host_to_bytes
from mq_common.constants import MessageConst
from mq_common.logging import configure_logging
from rich.console import Console
from rich.table import Table

BODY_BYTES: Final = 1024
TOPIC: Final = "BenchTopic"
QUEUES: Final = 8
STORE_HOST: Final = host_to_bytes("127.0.0.1", 10911)
BORN_HOST: Final = host_to_bytes("127.0.0.1", 40000)
PRODUCERS: Final = (1, 16, 64, 256)
BATCH: Final = 100
FSYNC_FLOOR_MAX_S: Final = 5.0
RECOVERY_LOG_BYTES: Final = GIB - 4 * 1024 * 1024  # one 1 GiB file, killed just before it rolls
RECOVERY_BUILD_TIMEOUT_S: Final = 300.0
# The store targets (docs/performance.md).
ASYNC_VS_MMAP_MIN: Final = 0.3
SYNC64_VS_ASYNC_MIN: Final = 0.4
MSYNCS_PER_MESSAGE_MAX: Final = 0.1
RECOVERY_MAX_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Row:
    """One measured cell."""

    name: str
    mode: str
    producers: int
    batch: int
    messages: int
    elapsed_s: float
    appends_per_s: float
    msyncs_per_message: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None


def make_messages(count: int) -> list[MessageExtBrokerInner]:
    body = os.urandom(BODY_BYTES)
    return [
        MessageExtBrokerInner.build(
            topic=TOPIC,
            queue_id=i % QUEUES,
            body=body,
            properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"BENCH{i:012d}", MessageConst.TAGS: "TagA"},
            born_timestamp_ms=1_700_000_000_000 + i,
            born_host=BORN_HOST,
        )
        for i in range(count)
    ]


def make_batches(messages: Sequence[MessageExtBrokerInner], size: int) -> list[MessageExtBatch]:
    """MessageBatches of ``size`` messages, each batch for one queue (round robin), bodies encoded as a producer
    encodes them (MessageDecoder#encodeMessages)."""
    out: list[MessageExtBatch] = []
    for n, start in enumerate(range(0, len(messages), size)):
        chunk = messages[start : start + size]
        body = encode_batch((m.body, m.properties_string, m.flag) for m in chunk)
        first = chunk[0]
        out.append(MessageExtBatch(TOPIC, n % QUEUES, body, "", 0, first.born_timestamp_ms, first.born_host))
    return out


def store_config(root: Path, mode: FlushDiskType) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root, flush_disk_type=mode)


def percentile_ms(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def chunks(messages: Sequence[MessageExtBrokerInner], size: int) -> Iterator[Sequence[MessageExtBrokerInner]]:
    for start in range(0, len(messages), size):
        yield messages[start : start + size]


async def drive(
    store: DefaultMessageStore,
    puts: Iterator[Sequence[MessageExtBrokerInner]] | Iterator[MessageExtBatch],
    producers: int,
) -> list[float]:
    """``producers`` tasks take the next put (a list of messages or a MessageBatch), put it and wait for it;
    returns each put's latency (s)."""
    latencies: list[float] = []

    async def producer() -> None:
        for put in puts:
            started = time.perf_counter()
            if isinstance(put, MessageExtBatch):
                result = await store.put_message_batch(put)
                assert result.is_ok, result
            else:
                results = await store.put_messages(put)
                assert all(r.is_ok for r in results), results[0]
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(producer() for _ in range(producers)))
    return latencies


def warm_up(store: DefaultMessageStore) -> None:
    """One message per queue before the clock starts: ConsumeQueue files, the index file, the first CommitLog
    pages exist, as in a broker that has been running (the ceiling's file is preallocated before its clock)."""
    asyncio.run(drive(store, chunks(make_messages(QUEUES), 1), 1))


def put_cell(work: Path, mode: FlushDiskType, producers: int, batch: int, messages: list[MessageExtBrokerInner]) -> Row:
    """``batch`` 1: one message per put_messages call; else MessageBatches of ``batch`` messages."""
    root = work / f"{mode.value}-{producers}-{batch}"
    store = DefaultMessageStore(store_config(root, mode), STORE_HOST)
    store.start()
    puts = chunks(messages, 1) if batch == 1 else iter(make_batches(messages, batch))
    try:
        warm_up(store)
        msyncs_before = MappedFile.msync_calls
        started = time.perf_counter()
        latencies = asyncio.run(drive(store, puts, producers))
        elapsed = time.perf_counter() - started
        msyncs = MappedFile.msync_calls - msyncs_before
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    label = f"{mode.value} x{producers}" + (f" (MessageBatch {batch})" if batch > 1 else "")
    return Row(
        name=label,
        mode=mode.value,
        producers=producers,
        batch=batch,
        messages=len(messages),
        elapsed_s=elapsed,
        appends_per_s=len(messages) / elapsed,
        msyncs_per_message=msyncs / len(messages),
        p50_ms=percentile_ms(latencies, 0.50),
        p99_ms=percentile_ms(latencies, 0.99),
    )


def sample_record() -> bytes:
    msg = make_messages(1)[0]
    return encode_message(
        topic=TOPIC.encode(),
        body=msg.body,
        properties=msg.properties_string.encode(),
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp_ms=msg.born_timestamp_ms,
        born_host=BORN_HOST,
        store_timestamp_ms=int(time.time() * 1000),
        store_host=STORE_HOST,
    )


def raw_mmap_row(work: Path, record: bytes, count: int) -> Row:
    """The ceiling: the same record bytes copied into a preallocated shared mmap, no encoding, no flush."""
    path = work / "raw-mmap"
    size = len(record) * count
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mm:
            length = len(record)
            started = time.perf_counter()
            pos = 0
            for _ in range(count):
                mm[pos : pos + length] = record
                pos += length
            elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return Row("raw mmap write (ceiling)", "-", 1, 1, count, elapsed, count / elapsed)


def fsync_row(work: Path, record: bytes, count: int) -> Row:
    """The floor: write + fsync per record (bounded to FSYNC_FLOOR_MAX_S)."""
    path = work / "fsync-floor"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    latencies: list[float] = []
    started = time.perf_counter()
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, record)
            os.fsync(fd)
            latencies.append(time.perf_counter() - t0)
            if t0 - started > FSYNC_FLOOR_MAX_S:
                break
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    done = len(latencies)
    return Row(
        "write + fsync per message (floor)",
        "-",
        1,
        1,
        done,
        elapsed,
        done / elapsed,
        msyncs_per_message=1.0,
        p50_ms=percentile_ms(latencies, 0.5),
        p99_ms=percentile_ms(latencies, 0.99),
    )


# --- recovery of a 1 GiB log after SIGKILL --------------------------------------------------------------------------


def build_log(root: Path, target_bytes: int) -> None:
    """Child: append 1 KiB messages (ASYNC_FLUSH, batches of 1000) until the log holds ``target_bytes``, print
    READY, then keep the store open until SIGKILLed."""
    store = DefaultMessageStore(store_config(root, FlushDiskType.ASYNC_FLUSH), STORE_HOST)
    store.start()
    messages = make_messages(1000)

    async def fill() -> None:
        while store.commit_log.max_offset < target_bytes:
            results = await store.put_messages(messages)
            assert results[-1].is_ok
        print(f"READY {store.commit_log.max_offset}", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(fill())


def recover_log(root: Path) -> None:
    """Child: time the start (load + recovery) of the store left by :func:`build_log`; print one JSON line."""
    store = DefaultMessageStore(store_config(root, FlushDiskType.ASYNC_FLUSH), STORE_HOST)
    started = time.perf_counter()
    store.start()
    elapsed = time.perf_counter() - started
    report = {"recovery_s": elapsed, "last_exit_ok": store.last_exit_ok, "max_offset": store.commit_log.max_offset}
    store.shutdown()
    print(json.dumps(report), flush=True)


def recovery_row(work: Path, target_bytes: int) -> dict[str, object]:
    root = work / "recovery"
    me = str(Path(__file__).resolve())
    builder = subprocess.Popen(
        [sys.executable, me, "--build-log", str(root), "--log-bytes", str(target_bytes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert builder.stdout is not None
        built_started = time.perf_counter()
        line = builder.stdout.readline()  # blocks until READY (or the child died)
        build_s = time.perf_counter() - built_started
        if not line.startswith("READY"):
            raise RuntimeError(f"log builder failed: {line!r} (exit {builder.poll()})")
        built_bytes = int(line.split()[1])
    finally:
        if builder.poll() is None:
            builder.send_signal(signal.SIGKILL)
        builder.wait(timeout=60)
    try:
        out = subprocess.run(
            [sys.executable, me, "--recover-log", str(root)], capture_output=True, text=True, timeout=300, check=True
        )
        report: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.update(log_bytes=built_bytes, build_s=build_s)
    return report


# --- report ---------------------------------------------------------------------------------------------------------


def targets(rows: list[Row], recovery: dict[str, object] | None) -> list[dict[str, object]]:
    """The store targets. ASYNC_FLUSH >= 0.3 x raw mmap is judged on the MessageBatch rows (the store's write
    path: one call, many messages, as RocketMQ's batch put); one message per put is reported next to it: there
    a CPython call per message (~20 us with its results) bounds the rate, not the store."""
    by_name = {r.name: r for r in rows}
    ceiling = by_name["raw mmap write (ceiling)"].appends_per_s
    out: list[dict[str, object]] = []
    batched = f" (MessageBatch {BATCH})"
    for p in PRODUCERS:
        for suffix, judged in ((batched, True), ("", False)):
            ratio = by_name[f"ASYNC_FLUSH x{p}{suffix}"].appends_per_s / ceiling
            out.append(
                {
                    "target": f"ASYNC_FLUSH x{p}{suffix or ' (one message per put)'} >= {ASYNC_VS_MMAP_MIN} x raw mmap",
                    "value": f"{ratio:.3f} x",
                    "pass": ratio >= ASYNC_VS_MMAP_MIN if judged else None,
                }
            )
    for suffix in (batched, ""):
        sync64, async64 = by_name[f"SYNC_FLUSH x64{suffix}"], by_name[f"ASYNC_FLUSH x64{suffix}"]
        ratio = sync64.appends_per_s / async64.appends_per_s
        out.append(
            {
                "target": f"SYNC_FLUSH x64{suffix} >= {SYNC64_VS_ASYNC_MIN} x ASYNC_FLUSH x64{suffix}",
                "value": f"{ratio:.3f} x",
                "pass": ratio >= SYNC64_VS_ASYNC_MIN,
            }
        )
        msyncs = sync64.msyncs_per_message or 0.0
        out.append(
            {
                "target": f"SYNC_FLUSH x64{suffix} msyncs/message <= {MSYNCS_PER_MESSAGE_MAX}",
                "value": f"{msyncs:.4f}",
                "pass": msyncs <= MSYNCS_PER_MESSAGE_MAX,
            }
        )
    if recovery is not None:
        seconds = float(str(recovery["recovery_s"]))
        out.append(
            {
                "target": f"recovery of a 1 GiB log <= {RECOVERY_MAX_S} s",
                "value": f"{seconds:.2f} s",
                "pass": seconds <= RECOVERY_MAX_S,
            }
        )
    return out


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_report(
    console: Console, rows: list[Row], recovery: dict[str, object] | None, checks: list[dict[str, object]]
) -> None:
    table = Table(title=f"PyRocketMQ store, {BODY_BYTES} B bodies")
    for column in ("case", "messages", "appends/s", "x raw mmap", "msyncs/msg", "p50 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "case" else "right")
    ceiling = next(r for r in rows if r.name.startswith("raw mmap")).appends_per_s
    for r in rows:
        table.add_row(
            r.name,
            str(r.messages),
            f"{r.appends_per_s:,.0f}",
            f"{r.appends_per_s / ceiling:.3f}",
            _fmt(r.msyncs_per_message, ".4f"),
            _fmt(r.p50_ms, ".3f"),
            _fmt(r.p99_ms, ".3f"),
        )
    console.print(table)
    if recovery is not None:
        console.print(
            f"recovery after SIGKILL: {float(str(recovery['recovery_s'])):.2f} s for a "
            f"{int(str(recovery['log_bytes'])) / GIB:.2f} GiB log (built in {float(str(recovery['build_s'])):.1f} s)"
        )
    checks_table = Table(title="store targets")
    for column in ("target", "measured", "result"):
        checks_table.add_column(column)
    for c in checks:
        verdict = "reported" if c["pass"] is None else "[green]PASS" if c["pass"] else "[red]FAIL"
        checks_table.add_row(str(c["target"]), str(c["value"]), verdict)
    console.print(checks_table)


def run(args: argparse.Namespace) -> dict[str, object]:
    console = Console(width=130)
    base = Path(args.dir) if args.dir else None
    work = Path(tempfile.mkdtemp(prefix="bench-store-", dir=base))
    try:
        messages = make_messages(args.messages)
        record = sample_record()
        rows = [raw_mmap_row(work, record, args.messages), fsync_row(work, record, args.messages)]
        for mode in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
            for batch in (1, BATCH):
                for producers in PRODUCERS:
                    rows.append(put_cell(work, mode, producers, batch, messages))
                    console.log(rows[-1].name, f"{rows[-1].appends_per_s:,.0f}/s")
        recovery = None if args.skip_recovery else recovery_row(work, int(args.log_bytes))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    checks = targets(rows, recovery)
    print_report(console, rows, recovery, checks)
    return {
        "benchmark": "store",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "body_bytes": BODY_BYTES,
        "record_bytes": len(record),
        "rows": [asdict(r) for r in rows],
        "recovery": recovery,
        "targets": checks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/store.json", help="JSON report path")
    parser.add_argument("--messages", type=int, default=30_000, help="messages per cell")
    parser.add_argument("--dir", default="", help="where the stores go (a temp folder inside it)")
    parser.add_argument("--log-bytes", type=int, default=RECOVERY_LOG_BYTES, help="log size for the recovery row")
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--build-log", default="", help=argparse.SUPPRESS)
    parser.add_argument("--recover-log", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    configure_logging("WARNING", json=False, service="bench_store")  # store logs on stderr, warnings only
    if args.build_log:
        build_log(Path(args.build_log), int(args.log_bytes))
        return
    if args.recover_log:
        recover_log(Path(args.recover_log))
        return
    report = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
