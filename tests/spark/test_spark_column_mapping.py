"""The sink's column mapping (as Kafka's): body/value, keys, tag, properties and topic columns, their aliases and the
bad combinations; pure checks first, then real writes into a real cluster read back through the ``rocketmq`` source."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow as pa
import pytest
from mq_common.errors import InvalidParameterError
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all
from mq_spark.datasource import FORMAT_NAME
from mq_spark.encoding import encode_batch
from mq_spark.options import ColumnMapping, WriterOptions, resolve_columns
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


def test_resolve_columns_maps_kafka_like_names_and_aliases() -> None:
    names = ["body", "keys", "tag", "properties", "topic", "extra"]
    assert resolve_columns(names, None, None) == ColumnMapping("body", "keys", "tag", "properties", "topic")
    assert resolve_columns(["value", "k", "c"], "k", "c") == ColumnMapping("value", "k", "c", None, None)
    assert resolve_columns(["a", "keys"], "keys", None) == ColumnMapping(keys="keys")  # alias naming the column itself
    assert resolve_columns(["a"], None, None) == ColumnMapping()  # today's JSON of all columns


@pytest.mark.parametrize(
    ("names", "key", "tag", "topic_set", "message"),
    [
        (["body", "value"], None, None, True, "'body' and 'value' both give the message body"),
        (["keys", "id"], "id", None, True, "option keyColumn='id' and a 'keys' column both give"),
        (["tag", "carrier"], None, "carrier", True, "option tagColumn='carrier' and a 'tag' column both give"),
        (["a"], "nope", None, True, "option keyColumn: column 'nope' is not in the DataFrame"),
        (["body"], None, None, False, "option topic is not set and the DataFrame has no 'topic' column"),
    ],
)
def test_bad_combinations_are_refused(
    names: list[str], key: str | None, tag: str | None, topic_set: bool, message: str
) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        resolve_columns(names, key, tag, topic_option_set=topic_set)


def test_column_types_are_checked_against_the_schema() -> None:
    options = WriterOptions.parse({"topic": "t"})
    good = StructType(
        [
            StructField("body", BinaryType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("topic", StringType()),
        ]
    )
    assert options.check_columns(good) == ColumnMapping(body="body", properties="properties", topic="topic")
    with pytest.raises(InvalidParameterError, match=r"column 'value' .* must be binary or string, not int"):
        options.check_columns(StructType([StructField("value", IntegerType())]))
    with pytest.raises(InvalidParameterError, match="must be map<string,string>, not map<string,int>"):
        options.check_columns(StructType([StructField("properties", MapType(StringType(), IntegerType()))]))
    no_topic = WriterOptions.parse({"deliveryGuarantee": "at_least_once"})
    assert no_topic.topic == ""
    assert no_topic.check_columns(["body", "topic"]).topic == "topic"
    with pytest.raises(InvalidParameterError, match="need deliveryGuarantee=at_least_once"):
        WriterOptions.parse({}).check_columns(["body", "topic"])


def test_encode_batch_takes_body_keys_tag_properties_and_topic_from_their_columns() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array(["héllo", "x"]),
            "keys": pa.array(["k1", None]),
            "tag": pa.array(["TagA", ""]),
            "properties": pa.array([[("color", "red"), ("n", None)], None], pa.map_(pa.string(), pa.string())),
            "topic": pa.array(["t1", "t2"]),
            "ignored": pa.array([1, 2]),
        }
    )
    rows = encode_batch(batch, None, None)
    assert [(r.body, r.key, r.tag, r.properties, r.topic) for r in rows] == [
        ("héllo".encode(), "k1", "TagA", {"color": "red"}, "t1"),
        (b"x", None, None, None, "t2"),
    ]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"body": pa.array([b"a", None])}, "a row has a null or empty body"),
        ({"body": pa.array([b""])}, "a row has a null or empty body"),
        (
            {"body": pa.array([b"a"]), "properties": pa.array([[("TAGS", "x")]], pa.map_(pa.string(), pa.string()))},
            r"property names \['TAGS'\] are reserved by RocketMQ",
        ),
        ({"body": pa.array([b"a"]), "topic": pa.array(["bad topic"])}, "topic 'bad topic': .*illegal characters"),
    ],
)
def test_encode_batch_refuses_bad_values(columns: dict[str, pa.Array], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        encode_batch(pa.RecordBatch.from_pydict(columns), None, None)


def test_a_row_without_topic_is_refused_when_the_option_is_not_set() -> None:
    batch = pa.RecordBatch.from_pydict({"body": pa.array([b"a", b"b"]), "topic": pa.array(["t", None])})
    assert [r.topic for r in encode_batch(batch, None, None)] == ["t", None]  # the option gives the topic
    with pytest.raises(InvalidParameterError, match="a row has no topic and the option topic is not set"):
        encode_batch(batch, None, None, topic_option_set=False)


# --- real writes, read back through the source -------------------------------------------------------------------

MAPPED = StructType(
    [
        StructField("body", BinaryType()),
        StructField("keys", StringType()),
        StructField("tag", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("topic", StringType()),
        StructField("note", StringType()),
    ]
)


def _read(spark: SparkSession, cluster: LocalCluster, topic: str) -> DataFrame:
    return spark.read.format(FORMAT_NAME).options(namesrv=cluster.namesrv_addr, topic=topic).load()


@pytest.mark.spark
@pytest.mark.integration
@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_mapped_columns_round_trip_through_the_source(
    spark: SparkSession, spark_cluster: LocalCluster, guarantee: str
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "spark_mapped"))
    data = [
        (
            f"payload-{i}".encode(),
            f"order-{i % 5}",
            "TagA" if i % 2 else "TagB",
            {"shop": f"s{i % 3}"},
            "elsewhere",
            "x",
        )
        for i in range(30)
    ]
    df = spark.createDataFrame(data, MAPPED).repartition(2)
    options = {"gateway": spark_cluster.gateway_addr, "topic": topic, "deliveryGuarantee": guarantee}
    df.write.format(FORMAT_NAME).options(**options).mode("append").save()  # the option wins over the topic column

    rows = _read(spark, spark_cluster, topic).collect()
    # RocketMQ's own properties (an exactly-once job's __transactionId__ among them) are not in the column.
    got = sorted((bytes(r.body), r.keys, r.tag, dict(r.properties)) for r in rows)
    assert got == sorted((b, k, t, p) for b, k, t, p, _, _ in data)
    # Same sharding key, same queue.
    queues: dict[str, set[tuple[str, int]]] = {}
    for r in rows:
        queues.setdefault(r.keys, set()).add((r.broker_name, r.queue_id))
    assert all(len(q) == 1 for q in queues.values()), queues


@pytest.mark.spark
@pytest.mark.integration
def test_a_topic_column_routes_each_row_and_a_string_value_is_the_body(
    spark: SparkSession, spark_cluster: LocalCluster
) -> None:
    first = asyncio.run(make_topic(spark_cluster, "spark_route_a"))
    second = asyncio.run(make_topic(spark_cluster, "spark_route_b"))
    data = [(json.dumps({"i": i}), first if i % 3 else second) for i in range(12)]
    df = spark.createDataFrame(data, "value string, topic string")
    options = {"gateway": spark_cluster.gateway_addr, "deliveryGuarantee": "at_least_once"}
    df.write.format(FORMAT_NAME).options(**options).mode("append").save()
    for topic in (first, second):
        bodies = sorted(bytes(r.body).decode() for r in _read(spark, spark_cluster, topic).collect())
        assert bodies == sorted(v for v, t in data if t == topic)


@pytest.mark.spark
@pytest.mark.integration
def test_bad_combinations_fail_before_any_send(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "spark_badmap"))
    both = spark.createDataFrame([(b"a", "b")], "body binary, value string")
    with pytest.raises(Exception, match="'body' and 'value' both give the message body"):
        both.write.format(FORMAT_NAME).options(gateway=spark_cluster.gateway_addr, topic=topic).mode("append").save()
    reserved = spark.createDataFrame([(b"a", {"KEYS": "k"})], "body binary, properties map<string,string>")
    with pytest.raises(Exception, match=r"property names \['KEYS'\] are reserved by RocketMQ"):
        reserved.write.format(FORMAT_NAME).options(gateway=spark_cluster.gateway_addr, topic=topic).mode(
            "append"
        ).save()
    assert asyncio.run(read_all(spark_cluster.namesrv_addr, topic)) == []
