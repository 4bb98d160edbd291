"""The ``rocketmq`` data source against a cluster with TLS and authentication + authorisation on (mqlocal's
``tls=True, auth=True``): a user allowed to Pub on the topic stores every row over TLS with signed calls; a user
without Pub is refused (NO_PERMISSION 16, not retried) and nothing is stored; no secret in any error text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_local.cluster import LocalCluster
from mq_local.testing import add_user, make_topic, read_all, spec_for_tests
from mq_spark.datasource import FORMAT_NAME, read_summary
from pyspark.sql import DataFrame, SparkSession

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ROWS = 120
WRITER_SECRET = "writer-secret-Zq81"
READER_SECRET = "reader-secret-Pw27"


@pytest.fixture(scope="module")
def secure_cluster(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker group and a gateway with TLS and auth on; started after the Spark session."""
    spec = spec_for_tests(tmp_path_factory.mktemp("spark-secure") / "data", 1, tls=True, auth=True)
    with LocalCluster(spec) as cluster:
        yield cluster


def _acl(username: str, topic: str, action: Action) -> Acl:
    entry = PolicyEntry(Resource.parse(f"Topic:{topic}"), frozenset({action}))
    return Acl(f"User:{username}", (Policy(entries=(entry,)),))


def _write(df: DataFrame, cluster: LocalCluster, topic: str, summary: Path, access_key: str, secret: str) -> None:
    files = cluster.spec.tls_files
    assert files is not None
    options = {
        "gateway": cluster.gateway_addr,
        "topic": topic,
        "batchSize": "25",
        "summaryPath": str(summary),
        "accessKey": access_key,
        "secretKey": secret,
        "tls": "true",
        "tlsCaFile": str(files.ca_file),
        "retryBackoffMs": "0",
    }
    df.write.format(FORMAT_NAME).mode("append").options(**options).save()


def _stored(cluster: LocalCluster, topic: str) -> int:
    spec = cluster.spec
    return len(
        asyncio.run(read_all(cluster.namesrv_addr, topic, tls=spec.tls_client, credentials=spec.admin_credentials))
    )


def test_a_user_with_pub_stores_every_row_and_one_without_is_refused(
    spark: SparkSession, secure_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(secure_cluster, "spark_auth"))
    asyncio.run(add_user(secure_cluster, User("spark-writer", WRITER_SECRET), _acl("spark-writer", topic, Action.PUB)))
    asyncio.run(add_user(secure_cluster, User("spark-reader", READER_SECRET), _acl("spark-reader", topic, Action.SUB)))
    df = spark.createDataFrame([(i, f"row-{i}") for i in range(ROWS)], "row_id long, name string").repartition(2)

    _write(df, secure_cluster, topic, tmp_path / "ok.json", "spark-writer", WRITER_SECRET)
    summary = read_summary(tmp_path / "ok.json")
    assert (summary["published"], summary["failed"], summary["committed"]) == (ROWS, 0, True)
    assert _stored(secure_cluster, topic) == ROWS

    with pytest.raises(Exception, match=r"refused action Pub on topic .* not retried") as info:
        _write(df, secure_cluster, topic, tmp_path / "refused.json", "spark-reader", READER_SECRET)
    assert "CODE 16 (NO_PERMISSION)" in str(info.value)
    assert READER_SECRET not in str(info.value)
    refused = read_summary(tmp_path / "refused.json")
    assert (refused["published"], refused["retried"], refused["committed"]) == (0, 0, False)
    assert READER_SECRET not in str(refused)
    assert _stored(secure_cluster, topic) == ROWS
