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


def launched_by_spark_submit() -> bool:
    """True inside a driver started by ``spark-submit`` or the spark-operator (the JVM started first and handed
    its gateway port to Python): its master, driver host and bind address come from the submission."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_spark_session(app_name: str, master: str = DEFAULT_MASTER) -> SparkSession:
    """Get or create the session (UTC session time zone, Arrow on) and register ``rocketmq``.

    Standalone (``make run``, tests): ``master`` on loopback as the module says. Under ``spark-submit`` (for
    example ``--master k8s://...``) the submitted master and network settings are kept and ``master`` is ignored.
    """
    builder = SparkSession.builder.appName(app_name)
    if not launched_by_spark_submit():
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        builder = (
            builder.master(master)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    spark = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
