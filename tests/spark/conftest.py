"""Fixtures for Spark tests: one local SparkSession (created before any gRPC channel) and one local cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests
from mq_spark.session import build_spark_session, stop_spark_session
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], loopback only, UI off, UTC; ``rocketmq`` registered."""
    session = build_spark_session("mq-spark-tests")
    yield session
    stop_spark_session(session)


@pytest.fixture(scope="session")
def spark_cluster(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Name server, broker-a + broker-b (SYNC_FLUSH, auto-create off), gateway; started after the session."""
    with LocalCluster(spec_for_tests(tmp_path_factory.mktemp("spark-cluster") / "data")) as cluster:
        yield cluster
