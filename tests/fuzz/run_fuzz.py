"""``make fuzz``: start a local cluster, fuzz every RPC of every service, print the table, stop the cluster.

Per service: ``--requests`` hostile requests (random bytes, truncated, oversized, another RPC's request, huge
repeated fields) with the broker's topics and queue offsets compared before and after, then as many valid-shaped
random requests (extreme numbers, system topic names, long strings), 1,000 idle streams on one connection and one
100 MiB request. Exit status 1 when a service crashed, a call hung, an answer was unexpected (gRPC UNKNOWN/INTERNAL,
RocketMQ SYSTEM_ERROR, v2 INTERNAL_SERVER_ERROR/INTERNAL_ERROR: see fuzz_harness.UNEXPECTED), RSS grew past
``--max-rss-growth-mib``, or the store changed while no storing request succeeded. Unexpected answers are listed by
service, RPC and case; ``--samples-dir`` keeps the first request of each (``<service>.<RPC>.<case>.bin``) to replay.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fuzz_cluster import fuzz_spec, huge_request, idle_streams, store_snapshot, targets, write_successes  # noqa: E402
from fuzz_harness import ServiceReport, Target, fuzz_target, rss_bytes  # noqa: E402
from mq_local.cluster import LocalCluster  # noqa: E402
from proto_grammar import HOSTILE_CASES, SHAPED  # noqa: E402

SEED = 19


@dataclass(slots=True)
class Outcome:
    """Everything measured of one service."""

    hostile: ServiceReport
    shaped: ServiceReport
    store_unchanged: bool
    idle_streams_ok: bool
    huge_label: str
    rss_start_bytes: int
    rss_end_bytes: int
    problems: list[str] = field(default_factory=list)


async def run_service(cluster: LocalCluster, target: Target, requests: int, max_rss_growth_bytes: int) -> Outcome:
    rss_start = rss_bytes(target.pid)
    before = await store_snapshot(cluster)
    hostile = await fuzz_target(target, requests=requests, seed=SEED, cases=HOSTILE_CASES)
    await asyncio.sleep(2.0)  # the broker persists topics.json in the background
    after = await store_snapshot(cluster)
    unchanged = (
        before.without_empty_retry_topics() == after.without_empty_retry_topics() or write_successes(hostile) > 0
    )
    shaped = await fuzz_target(target, requests=requests, seed=SEED + 1, cases=(SHAPED,))
    streams_ok = await idle_streams(target)
    huge = await huge_request(target)
    outcome = Outcome(hostile, shaped, unchanged, streams_ok, huge, rss_start, rss_bytes(target.pid))
    for report in (hostile, shaped):
        if report.crashed:
            outcome.problems.append(f"{target.name} stopped serving")
        if report.hangs or report.unexpected:
            outcome.problems.append(f"{target.name}: {report.hangs} hangs, {report.unexpected} unexpected answers")
    if not unchanged:
        outcome.problems.append(f"{target.name}: the store changed while every storing request was refused")
    if not streams_ok:
        outcome.problems.append(f"{target.name}: not serving with {1000} idle streams open")
    if huge in ("hang", "grpc:UNKNOWN", "grpc:INTERNAL"):
        outcome.problems.append(f"{target.name}: the 100 MiB request got {huge}")
    if outcome.rss_end_bytes - rss_start > max_rss_growth_bytes:
        outcome.problems.append(f"{target.name}: RSS grew {(outcome.rss_end_bytes - rss_start) >> 20} MiB")
    return outcome


def render_findings(outcomes: dict[str, Outcome]) -> Table:
    """The unexpected answers by service, RPC, case and label."""
    table = Table(title="unexpected answers (fuzz_harness.UNEXPECTED)")
    for column in ("service", "RPC", "case", "answer", "count", "first remark"):
        table.add_column(column)
    for name, o in outcomes.items():
        for report in (o.hostile, o.shaped):
            for key, count in sorted(report.findings.items()):
                table.add_row(name, *key, str(count), report.samples[key][1][:120])
    return table


def save_samples(outcomes: dict[str, Outcome], samples_dir: Path) -> None:
    samples_dir.mkdir(parents=True, exist_ok=True)
    for name, o in outcomes.items():
        for report in (o.hostile, o.shaped):
            for (method, case, label), (data, _remark) in report.samples.items():
                (samples_dir / f"{name}.{method}.{case}.{label.replace(':', '_')}.bin").write_bytes(data)


def render(outcomes: dict[str, Outcome]) -> Table:
    table = Table(title="make fuzz: every RPC of every service")
    for column in (
        "service",
        "requests",
        "answers by code",
        "crashes",
        "hangs",
        "unexpected",
        "store",
        "idle 1000",
        "100 MiB",
        "RSS start MiB",
        "RSS growth MiB",
    ):
        table.add_column(column)
    for name, o in outcomes.items():
        answers = o.hostile.answers + o.shaped.answers
        codes = ", ".join(f"{label} {count}" for label, count in answers.most_common())
        table.add_row(
            name,
            str(o.hostile.requests + o.shaped.requests),
            codes,
            str(int(o.hostile.crashed) + int(o.shaped.crashed)),
            str(o.hostile.hangs + o.shaped.hangs),
            str(o.hostile.unexpected + o.shaped.unexpected),
            "unchanged" if o.store_unchanged else "CHANGED",
            "serving" if o.idle_streams_ok else "NOT SERVING",
            o.huge_label,
            str(o.rss_start_bytes >> 20),
            str((o.rss_end_bytes - o.rss_start_bytes) >> 20),
        )
    return table


async def main_async(requests: int, max_rss_growth_mib: int, data_dir: Path, samples_dir: Path | None) -> int:
    outcomes: dict[str, Outcome] = {}
    with LocalCluster(fuzz_spec(data_dir)) as cluster:
        for target in targets(cluster):
            outcomes[target.name] = await run_service(cluster, target, requests, max_rss_growth_mib << 20)
    console = Console(width=200)
    console.print(render(outcomes))
    if any(o.hostile.findings or o.shaped.findings for o in outcomes.values()):
        console.print(render_findings(outcomes))
    if samples_dir is not None:
        save_samples(outcomes, samples_dir)
    problems = [p for o in outcomes.values() for p in o.problems]
    for problem in problems:
        console.print(f"[red]{problem}[/red]")
    console.print("fuzz: OK" if not problems else f"fuzz: {len(problems)} problem(s)")
    return 1 if problems else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=5000, help="hostile requests per service, and as many shaped")
    parser.add_argument("--max-rss-growth-mib", type=int, default=512)
    parser.add_argument("--samples-dir", type=Path, help="where to keep the first request of each unexpected answer")
    parser.add_argument("--keep-logs", type=Path, help="copy the services' logs here after the run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mq-fuzz-") as tmp:
        status = asyncio.run(main_async(args.requests, args.max_rss_growth_mib, Path(tmp), args.samples_dir))
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in Path(tmp).glob("*.log"):
                shutil.copy(log, args.keep_logs / log.name)
    sys.exit(status)


if __name__ == "__main__":
    main()
