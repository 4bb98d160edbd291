"""The Structured Streaming sink (issue 34 part 2): ``df.writeStream.format("rocketmq")`` publishes each micro-batch
exactly once, with trigger(availableNow=True) and a processing-time trigger; a query restarted from its checkpoint
publishes only what is new, and a micro-batch Spark runs again (its commit was not recorded in Spark's commit log
although the sink had committed it) publishes nothing twice."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all
from mq_spark.datasource import FORMAT_NAME
from mq_spark.sink_progress import STREAM_COMMITS_DIR, read_sink_record, with_sink_progress
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

SCHEMA = "row_id long, tailnum string, carrier string"


def _add_file(folder: Path, first: int, count: int) -> None:
    lines = [json.dumps({"row_id": i, "tailnum": f"N{i % 7}", "carrier": "UA"}) for i in range(first, first + count)]
    tmp = folder / f".part-{first}.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(folder / f"part-{first:06d}.json")


def _row_ids(cluster: LocalCluster, topic: str) -> Counter[int]:
    return Counter(json.loads(m.body)["row_id"] for _, m in asyncio.run(read_all(cluster.namesrv_addr, topic)))


def _run_available_now(
    spark: SparkSession, source: Path, checkpoint: Path, cluster: LocalCluster, topic: str
) -> StreamingQuery:
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", "1")
        .json(str(source))
        .writeStream.format(FORMAT_NAME)
        .option("checkpointLocation", str(checkpoint))
        .options(gateway=cluster.gateway_addr, topic=topic, keyColumn="tailnum", batchSize="20")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def _per_batch(query: StreamingQuery, checkpoint: Path) -> dict[int, tuple[int, int, int, int, int]]:
    """batch id -> (Spark's sink numOutputRows, and the sink's figures: published, failed, half messages committed,
    half messages rolled back) of every micro-batch the query ran."""
    out = {}
    for progress in query.recentProgress:
        joined = with_sink_progress(progress, checkpoint)
        figures = joined["rocketmq"]
        assert figures is not None, joined
        assert figures["guarantee"] == "exactly_once"
        out[joined["batchId"]] = (
            joined["sink"]["numOutputRows"],
            figures["published"],
            figures["failed"],
            figures["committed_half_messages"],
            figures["rolled_back_half_messages"],
        )
    return out


def test_available_now_restarts_and_a_rerun_micro_batch_publish_each_row_once(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "stream_sink"))
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    _add_file(source, 0, 50)
    _add_file(source, 50, 50)
    query = _run_available_now(spark, source, checkpoint, spark_cluster, topic)
    assert _row_ids(spark_cluster, topic) == Counter(range(100)), "two micro-batches, each row once"
    records = sorted(p.name for p in (checkpoint / STREAM_COMMITS_DIR).iterdir())
    assert records == ["0.json", "1.json"]
    # Each micro-batch's progress: Spark's count of the rows the sink took, and the sink's own figures (the
    # checkpoint record): every row published and committed, none failed or rolled back.
    assert _per_batch(query, checkpoint) == {0: (50, 50, 0, 50, 0), 1: (50, 50, 0, 50, 0)}

    _add_file(source, 100, 30)
    query = _run_available_now(spark, source, checkpoint, spark_cluster, topic)  # restarted from the checkpoint
    assert _row_ids(spark_cluster, topic) == Counter(range(130)), "only the new file was published"
    assert _per_batch(query, checkpoint) == {2: (30, 30, 0, 30, 0)}

    # The sink committed micro-batch 2, but Spark's commit log lost it: the restarted query runs it again.
    for name in ("2", ".2.crc"):  # the entry and its checksum (Hadoop's local file system keeps both)
        (checkpoint / "commits" / name).unlink()
    query = _run_available_now(spark, source, checkpoint, spark_cluster, topic)
    assert _row_ids(spark_cluster, topic) == Counter(range(130)), "the re-run micro-batch published nothing twice"
    # The re-run keeps the first run's figures and adds its own: its 30 rows sent, all rolled back.
    assert _per_batch(query, checkpoint) == {2: (30, 30, 0, 30, 0)}
    rerun = (read_sink_record(checkpoint, 2) or {})["rerun_progress"]
    assert (rerun["published"], rerun["rolled_back_half_messages"], rerun["committed_half_messages"]) == (30, 30, 0)


def test_a_processing_time_trigger_publishes_new_files_as_they_come(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "stream_trigger"))
    source = tmp_path / "in"
    source.mkdir()
    _add_file(source, 0, 40)
    query = (
        spark.readStream.schema(SCHEMA)
        .json(str(source))
        .writeStream.format(FORMAT_NAME)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .options(gateway=spark_cluster.gateway_addr, topic=topic)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + 90
        added = False
        while time.monotonic() < deadline:
            seen = _row_ids(spark_cluster, topic)
            if not added and len(seen) >= 40:
                _add_file(source, 40, 25)
                added = True
            if len(seen) >= 65:
                break
            time.sleep(0.5)
        assert query.exception() is None
    finally:
        query.stop()
    assert _row_ids(spark_cluster, topic) == Counter(range(65))
    assert query.lastProgress is not None
