"""The driver of test_spark_speculation.py, run as its own process (one SparkContext per JVM: the test session's
local[2,4] context cannot be pointed at a standalone master): ``python speculation_driver.py <config.json>``.

It connects to the standalone master with speculation on and tuned to fire within seconds, the event log on (plain
JSON lines), and writes an exactly-once job with the plain ``rocketmq`` format. The input is slow on purpose, in the
DataFrame only: the Python UDF that makes each row's ``pad`` stalls the first attempt of partition ``slow_partition``
at row ``stall_row`` for ``stall_s`` seconds. Rows before the stall reach the writer (a Python worker's output is
flushed every ``spark.buffer.size`` bytes, so that is set small and the UDF returns 600 characters a row), so that
attempt sends half messages before it stalls. Spark launches the speculative copy on the other host; the copy's UDF
holds it until the test has seen the first attempt's half messages on the brokers and created ``gate_file`` (so the
copy never wins before the original sent anything, whatever the load); then the copy sends the whole partition and
wins.

config keys: master, gateway, topic, summary, event_log_dir, rows, partitions, slow_partition, stall_row, stall_s,
gate_file.
Exits 0 when ``save()`` returned.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mq_local.ports import LOCAL_HOST
from mq_spark.datasource import FORMAT_NAME, register
from mq_spark.session import stop_spark_session
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

PAD_CHARS = 600
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "1s",
    # Spark 4 only speculates "inefficient" tasks (slow processing rate) unless this is off; a stalled task has
    # read few rows, which the efficiency check may not call slow in time
    "spark.speculation.efficiency.enabled": "false",
}


def build(config: dict[str, Any]) -> SparkSession:
    os.environ["SPARK_LOCAL_IP"] = LOCAL_HOST
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.appName("mq-spark-speculation")
        .master(config["master"])
        .config("spark.driver.host", LOCAL_HOST)
        .config("spark.driver.bindAddress", LOCAL_HOST)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.dir", str(config["event_log_dir"]))
        .config("spark.buffer.size", "4096")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    )
    for key, value in SPECULATION.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def main(config: dict[str, Any]) -> None:
    Path(config["event_log_dir"]).mkdir(parents=True, exist_ok=True)
    spark = build(config)
    slow, stall_row, stall_s = int(config["slow_partition"]), int(config["stall_row"]), float(config["stall_s"])

    gate = Path(config["gate_file"])

    def padded(row_id: int) -> str:
        """The row's ``pad`` (PAD_CHARS of it: the UDF's output must fill Python's write buffer to reach the JVM
        before the stall); stalls the first attempt of the slow partition at ``stall_row``, and holds every later
        attempt of it until ``gate_file`` exists."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == slow:
            if ctx.attemptNumber() == 0 and row_id == stall_row:
                time.sleep(stall_s)
            deadline = time.monotonic() + stall_s
            while ctx.attemptNumber() > 0 and not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        return "x" * PAD_CHARS

    try:
        frame = (
            spark.range(0, int(config["rows"]), 1, int(config["partitions"]))
            .withColumnRenamed("id", "row_id")
            .withColumn("tailnum", F.format_string("N%03d", F.col("row_id") % 13))
            .withColumn("carrier", F.concat(F.lit("C"), (F.col("row_id") % 3).cast("string")))
            .withColumn("pad", F.udf(padded, StringType())(F.col("row_id")))
        )
        options = {
            "gateway": config["gateway"],
            "topic": config["topic"],
            "keyColumn": "tailnum",
            "tagColumn": "carrier",
            "batchSize": "50",
            "sendTimeoutMs": "15000",  # 6+ JVMs on 2 loaded cores: a send may wait seconds for CPU
            "summaryPath": str(config["summary"]),
        }
        frame.write.format(FORMAT_NAME).mode("append").options(**options).save()
    finally:
        stop_spark_session(spark)


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
