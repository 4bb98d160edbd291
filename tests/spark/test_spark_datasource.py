"""The ``rocketmq`` data source end to end: a DataFrame into a real local cluster, read back from the brokers."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all, unique_topic
from mq_spark.datasource import FORMAT_NAME, read_summary
from mq_spark.progress import PublishProgress
from mq_spark.verify import read_back
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType
from rich.console import Console

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    # pyspark 4.3 warns about pandas 3 on import paths we do not use
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ROWS = 300
SCHEMA = StructType(
    [
        StructField("row_id", LongType(), False),
        StructField("tailnum", StringType(), True),
        StructField("carrier", StringType(), True),
        StructField("delay", DoubleType(), True),
        StructField("time_hour", TimestampType(), True),
    ]
)


def _frame(spark: SparkSession, rows: int = ROWS, partitions: int = 3) -> DataFrame:
    base = dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC)
    data = [
        (
            i,
            None if i % 50 == 0 else f"N{i % 17:03d}",
            ["UA", "AA", "DL"][i % 3],
            None if i % 7 == 0 else i / 4,
            base + dt.timedelta(hours=i),
        )
        for i in range(rows)
    ]
    return spark.createDataFrame(data, SCHEMA).repartition(partitions)


def _write(df: DataFrame, cluster: LocalCluster, topic: str, summary: Path, **extra: str) -> None:
    writer = df.write.format(FORMAT_NAME).mode("append")
    options = {"gateway": cluster.gateway_addr, "topic": topic, "keyColumn": "tailnum", "tagColumn": "carrier"}
    options.update({"batchSize": "40", "summaryPath": str(summary)}, **extra)
    writer.options(**options).save()


def test_every_row_arrives_once_as_json_with_key_and_tag(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "spark_rows"))
    with PublishProgress(spark_cluster.namesrv_addr, topic, ROWS, console=Console(file=io.StringIO())) as progress:
        _write(_frame(spark), spark_cluster, topic, tmp_path / "summary.json")
    assert progress.stored == ROWS  # the bar's last poll saw every stored message

    summary = read_summary(tmp_path / "summary.json")
    assert (summary["rows"], summary["published"], summary["failed"], summary["committed"]) == (ROWS, ROWS, 0, True)
    assert summary["tasks"] == 3
    assert sum(summary["per_broker"].values()) == ROWS
    assert set(summary["per_broker"]) == {"broker-a", "broker-b"}

    check = asyncio.run(read_back(spark_cluster.namesrv_addr, topic, ROWS))
    assert (check.verified, check.missing, check.duplicates, check.unexpected) == (ROWS, 0, 0, 0)
    assert check.keys_on_many_queues == 0
    assert dict(check.per_broker) == summary["per_broker"]

    stored = asyncio.run(read_all(spark_cluster.namesrv_addr, topic))
    by_id = {json.loads(m.body)["row_id"]: m for _, m in stored}
    assert json.loads(by_id[7].body) == {
        "row_id": 7,
        "tailnum": "N007",
        "carrier": "AA",
        "delay": None,
        "time_hour": "2013-01-01T17:00:00Z",
    }
    assert (by_id[7].tags, by_id[7].keys) == ("AA", ["N007"])
    assert json.loads(by_id[9].body)["delay"] == 2.25
    assert (by_id[50].tags, by_id[50].keys) == ("DL", [])  # null key: no KEYS, no sharding key


def test_unknown_topic_fails_the_job_with_the_response_code(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = unique_topic("spark_missing")  # never created; brokers do not auto-create
    with pytest.raises(Exception, match=r"still failed after 1 retries; first error: CODE 17 \(TOPIC_NOT_EXIST\)"):
        _write(
            _frame(spark, 20, 1),
            spark_cluster,
            topic,
            tmp_path / "s.json",
            maxRetries="1",
            retryBackoffMs="0",
            deliveryGuarantee="at_least_once",  # exactly once never re-sends in the task
        )
    summary = read_summary(tmp_path / "s.json")
    assert (summary["committed"], summary["published"]) == (False, 0)


def test_a_missing_key_column_is_refused_before_any_send(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "spark_badopt"))
    with pytest.raises(Exception, match="option keyColumn: column 'tail' is not in the DataFrame"):
        _write(_frame(spark, 10, 1), spark_cluster, topic, tmp_path / "s.json", keyColumn="tail")
    assert asyncio.run(read_all(spark_cluster.namesrv_addr, topic)) == []
