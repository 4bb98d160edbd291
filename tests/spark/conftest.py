"""Fixtures for Spark tests: one local SparkSession (created before any gRPC channel) and one local cluster."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_local.cluster import LocalCluster
from mq_local.testing import spec_for_tests
from mq_spark.session import build_spark_session, stop_spark_session
from pyspark.sql import SparkSession

SESSION_NAME = "mq-spark-tests"
SPARK_TESTS = Path(__file__).resolve().parent


def pytest_collection_finish(session: pytest.Session) -> None:
    """When Spark tests were collected, launch the session's JVM now, before any test starts a gRPC channel or
    server (mq_spark.session asks for that order): pyspark forks the JVM's launcher (Popen with a preexec_fn), and a
    fork while gRPC's threads run can lose the child (gRPC logs "Other threads are currently calling into gRPC,
    skipping fork() handlers", then "epoll_wait error: Bad file descriptor"; one fresh-clone run lost every Spark
    test to JAVA_GATEWAY_EXITED that way). The ``spark`` fixture then gets this session (getOrCreate). A launch
    that fails here is left to the fixture, which tries again and fails the Spark tests with its error."""
    if any(Path(item.path).is_relative_to(SPARK_TESTS) for item in session.items):
        with contextlib.suppress(Exception):
            build_spark_session(SESSION_NAME)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], loopback only, UI off, UTC; ``rocketmq`` registered."""
    session = build_spark_session(SESSION_NAME)
    yield session
    stop_spark_session(session)


@pytest.fixture(scope="session")
def spark_cluster(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Name server, broker-a + broker-b (SYNC_FLUSH, auto-create off), gateway; started after the session."""
    with LocalCluster(spec_for_tests(tmp_path_factory.mktemp("spark-cluster") / "data")) as cluster:
        yield cluster
