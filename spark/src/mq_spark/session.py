"""A local SparkSession that stays on loopback, with the ``rocketmq`` data source registered.

Loopback only: ``SPARK_LOCAL_IP=127.0.0.1`` (else Spark binds the external interface and does a reverse
DNS lookup), driver host/bind address 127.0.0.1, no UI. Python workers run this interpreter
(``PYSPARK_PYTHON``). Create the session before the driver opens any gRPC channel.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from pyspark.sql import SparkSession

from mq_spark.datasource import register

DEFAULT_MASTER: Final = "local[2]"


def build_spark_session(app_name: str, master: str = DEFAULT_MASTER) -> SparkSession:
    """Get or create the session (UTC session time zone, Arrow on) and register ``rocketmq``."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
