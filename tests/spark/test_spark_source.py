"""The ``rocketmq`` source against a real local cluster and a real SparkSession: batch reads with each offsets
option, the tag subscription, a timestamp start, partition splitting, and a streaming read that restarts from its
checkpoint under maxOffsetsPerTrigger."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_client.consumer import PullConsumer
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_common.channels import ChannelPool
from mq_common.errors import MQClientError
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import add_user, make_topic, spec_for_tests
from mq_spark.datasource import FORMAT_NAME
from mq_spark.source.options import DEFAULT_CONSUMER_GROUP, SourceOptions
from mq_spark.source.pull import QueueRange, read_range
from mq_spark.source.schema import SOURCE_SCHEMA
from pyspark.sql import DataFrame, SparkSession

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ROWS = 120
SOURCE_SECRET = "source-secret-Hq52"
OTHER_SECRET = "other-secret-Lm09"


@dataclass(frozen=True)
class Sent:
    """One message the gateway stored: where, and what it carried."""

    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    body: bytes
    tag: str
    key: str


def publish(cluster: LocalCluster, topic: str, count: int, first: int = 0) -> list[Sent]:
    """``count`` messages (ids first..): tag TagA for even ids, TagB for odd, key k<id % 10>, property color."""
    messages = [
        gateway_pb2.Message(
            topic=topic,
            body=json.dumps({"id": i}).encode(),
            tag="TagA" if i % 2 == 0 else "TagB",
            keys=[f"k{i % 10}"],
            sharding_key=f"k{i % 10}",
            properties={"color": "red" if i % 3 == 0 else "blue"},
        )
        for i in range(first, first + count)
    ]
    with grpc.insecure_channel(cluster.gateway_addr) as channel:
        reply = gateway_pb2_grpc.ProducerGatewayStub(channel).SendBatch(
            gateway_pb2.SendBatchRequest(messages=messages, producer_group="spark_source_test")
        )
    assert [r.code for r in reply.results] == [0] * count, reply
    return [
        Sent(r.broker_name, r.queue_id, r.queue_offset, r.msg_id, m.body, m.tag, m.keys[0])
        for r, m in zip(reply.results, messages, strict=True)
    ]


def read(spark: SparkSession, cluster: LocalCluster, topic: str, **options: str) -> DataFrame:
    return spark.read.format(FORMAT_NAME).options(namesrv=cluster.namesrv_addr, topic=topic, **options).load()


def places(df: DataFrame) -> list[tuple[str, int, int]]:
    return sorted(
        (r.broker_name, r.queue_id, r.queue_offset)
        for r in df.select("broker_name", "queue_id", "queue_offset").collect()
    )


@pytest.fixture(scope="module")
def loaded(spark_cluster: LocalCluster) -> tuple[str, list[Sent]]:
    """A topic of 2 x 4 queues holding ROWS messages."""
    topic = asyncio.run(make_topic(spark_cluster, "spark_source"))
    return topic, publish(spark_cluster, topic, ROWS)


def test_batch_read_returns_every_message_with_its_columns(
    spark: SparkSession, spark_cluster: LocalCluster, loaded: tuple[str, list[Sent]]
) -> None:
    topic, sent = loaded
    df = read(spark, spark_cluster, topic)
    assert df.schema == SOURCE_SCHEMA
    rows = df.collect()
    assert len(rows) == ROWS
    by_place = {(r.broker_name, r.queue_id, r.queue_offset): r for r in rows}
    assert len(by_place) == ROWS
    now = time.time()
    for s in sent:
        row = by_place[(s.broker_name, s.queue_id, s.queue_offset)]
        assert (row.topic, row.msg_id, bytes(row.body), row.tag, row.keys) == (topic, s.msg_id, s.body, s.tag, s.key)
        i = json.loads(s.body)["id"]
        assert row.properties == {"color": "red" if i % 3 == 0 else "blue"}
        assert now - 600 < row.born_timestamp.timestamp() <= row.store_timestamp.timestamp() < now + 5
    # One Spark partition per queue that holds messages (all 8 do: 10 keys spread over them).
    queues = {(s.broker_name, s.queue_id) for s in sent}
    assert df.rdd.getNumPartitions() == len(queues)


def test_json_offsets_bound_the_read_per_queue(
    spark: SparkSession, spark_cluster: LocalCluster, loaded: tuple[str, list[Sent]]
) -> None:
    topic, sent = loaded
    per_queue: dict[tuple[str, int], int] = {}
    for s in sent:
        per_queue[(s.broker_name, s.queue_id)] = per_queue.get((s.broker_name, s.queue_id), 0) + 1
    (b1, q1), (b2, q2) = sorted(per_queue, key=lambda q: -per_queue[q])[:2]
    starting = {topic: {f"{b1}:{q1}": 2, f"{b2}:{q2}": -1}}  # queue 2 from its end: nothing of it
    ending = {topic: {f"{b1}:{q1}": 5}}  # other queues: to their latest
    df = read(spark, spark_cluster, topic, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    expected = sorted(
        (s.broker_name, s.queue_id, s.queue_offset)
        for s in sent
        if (s.broker_name, s.queue_id) != (b2, q2)
        and ((s.broker_name, s.queue_id) != (b1, q1) or 2 <= s.queue_offset < 5)
    )
    assert places(df) == expected
    earliest_latest = read(spark, spark_cluster, topic, startingOffsets="earliest", endingOffsets="latest")
    assert earliest_latest.count() == ROWS


def test_subscription_keeps_only_the_tags_asked_for(
    spark: SparkSession, spark_cluster: LocalCluster, loaded: tuple[str, list[Sent]]
) -> None:
    topic, sent = loaded
    rows = read(spark, spark_cluster, topic, subscription="TagA").collect()
    assert sorted(r.msg_id for r in rows) == sorted(s.msg_id for s in sent if s.tag == "TagA")
    assert read(spark, spark_cluster, topic, subscription="TagA || TagB").count() == ROWS
    assert read(spark, spark_cluster, topic, subscription="TagC").count() == 0


def test_large_ranges_are_split_at_max_rows_per_partition(
    spark: SparkSession, spark_cluster: LocalCluster, loaded: tuple[str, list[Sent]]
) -> None:
    topic, sent = loaded
    per_queue: dict[tuple[str, int], int] = {}
    for s in sent:
        per_queue[(s.broker_name, s.queue_id)] = per_queue.get((s.broker_name, s.queue_id), 0) + 1
    df = read(spark, spark_cluster, topic, maxRowsPerPartition="4")
    assert df.rdd.getNumPartitions() == sum(math.ceil(n / 4) for n in per_queue.values())
    assert places(df) == sorted((s.broker_name, s.queue_id, s.queue_offset) for s in sent)


def test_starting_timestamp_reads_what_was_stored_from_then_on(
    spark: SparkSession, spark_cluster: LocalCluster
) -> None:
    topic = asyncio.run(make_topic(spark_cluster, "spark_source_ts"))
    publish(spark_cluster, topic, 30)
    time.sleep(0.3)
    since_ms = int(time.time() * 1000)
    time.sleep(0.3)
    later = publish(spark_cluster, topic, 20, first=30)
    df = read(spark, spark_cluster, topic, startingTimestamp=str(since_ms))
    assert sorted(r.msg_id for r in df.collect()) == sorted(s.msg_id for s in later)
    assert all(r.store_timestamp.timestamp() * 1000 >= since_ms for r in df.collect())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "latest"}, "'latest' is not allowed for a batch read"),
        ({"endingOffsets": "earliest"}, "'earliest' is not allowed"),
        ({"startingOffsets": '{"other": {"broker-a:0": 1}}'}, r"topics \['other'\] are not the source's topic"),
        ({"startingOffsets": '{"T": {"broker-a": 1}}'}, 'expected "<brokerName>:<queueId>"'),
        ({"maxOffsetsPerTrigger": "10"}, "for streaming reads only"),
        ({"startingOffsets": "first"}, "option startingOffsets must be earliest, latest or"),
    ],
)
def test_bad_options_are_refused_with_a_clear_error(
    spark: SparkSession, spark_cluster: LocalCluster, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        read(spark, spark_cluster, "T", **options).collect()


@pytest.fixture
def stream_topic(spark_cluster: LocalCluster) -> str:
    return asyncio.run(make_topic(spark_cluster, "spark_source_stream", queues=2))


def _run_available_now(
    spark: SparkSession, cluster: LocalCluster, topic: str, out: Path, checkpoint: Path
) -> list[int]:
    """One AvailableNow run of the stream into parquet files; returns each micro-batch's input rows."""
    stream = (
        spark.readStream.format(FORMAT_NAME)
        .options(namesrv=cluster.namesrv_addr, topic=topic, startingOffsets="earliest", maxOffsetsPerTrigger="15")
        .load()
        .select("broker_name", "queue_id", "queue_offset", "msg_id", "tag")
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return [int(p["numInputRows"]) for p in query.recentProgress]


def test_stream_reads_in_bounded_micro_batches_and_restarts_from_its_checkpoint(
    spark: SparkSession, spark_cluster: LocalCluster, stream_topic: str, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = publish(spark_cluster, stream_topic, 40)
    batches = _run_available_now(spark, spark_cluster, stream_topic, out, checkpoint)
    assert sum(batches) == 40, batches
    assert max(batches) <= 15, batches  # maxOffsetsPerTrigger
    assert len([b for b in batches if b]) >= 3, batches

    second = publish(spark_cluster, stream_topic, 25, first=40)
    batches = _run_available_now(spark, spark_cluster, stream_topic, out, checkpoint)
    assert sum(batches) == 25, batches  # only what came after the checkpoint
    assert max(batches) <= 15, batches

    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.msg_id for r in rows) == sorted(s.msg_id for s in first + second)  # each once


@pytest.fixture
def replicated(spark: SparkSession, tmp_path: Path) -> Iterator[LocalCluster]:
    """One broker group with a SYNC_MASTER and its slave (a SEND_OK message is on both)."""
    spec = spec_for_tests(tmp_path / "data", broker_groups=1, replicas_per_broker_group=2, broker_role="SYNC_MASTER")
    with LocalCluster(spec) as cluster:
        yield cluster


def test_a_read_goes_to_the_slave_while_the_master_is_away(spark: SparkSession, replicated: LocalCluster) -> None:
    topic = asyncio.run(make_topic(replicated, "spark_source_slave", queues=2))

    async def on_the_slave_too() -> None:  # the test slave takes no topic configs from its master
        pool = ChannelPool()
        try:
            config = TopicConfig(topic, read_queue_nums=2, write_queue_nums=2)
            await BrokerClient(pool).create_topic(replicated.slave_addrs["broker-a-s1"], config)
        finally:
            await pool.close()

    asyncio.run(on_the_slave_too())
    sent = publish(replicated, topic, 30)
    replicated.stop_broker("broker-a")  # a clean stop unregisters it: the route keeps the slave only

    async def master_gone() -> bool:
        async with PullConsumer([replicated.namesrv_addr]) as consumer:
            data = (await consumer.refresh_route(topic)).broker_data("broker-a")
            return data is not None and data.master_addr() is None and bool(data.broker_addrs)

    deadline = time.monotonic() + 60
    while not asyncio.run(master_gone()):
        assert time.monotonic() < deadline, "the name server still routes to the stopped master"
        time.sleep(0.5)
    rows = read(spark, replicated, topic).collect()
    assert sorted(r.msg_id for r in rows) == sorted(s.msg_id for s in sent)


@pytest.fixture
def secure(spark: SparkSession, tmp_path: Path) -> Iterator[LocalCluster]:
    """One broker group and a gateway with TLS and authentication + authorisation on; only the services' own
    certificates are components (else any certificate of the local CA, the test client's too, would be one and
    skip the ACLs)."""
    components = ",".join(f"{name}.pyrocketmq" for name in ("broker", "gateway", "namesrv", "controller"))
    spec = spec_for_tests(
        tmp_path / "data", 1, tls=True, auth=True, broker_env={"MQ_BROKER_COMPONENT_IDENTITIES": components}
    )
    with LocalCluster(spec) as cluster:
        yield cluster


def _sub_acl(username: str, topic: str) -> Acl:
    """Sub on the topic and on the source's consumer group: what a pull needs (the broker's PullMessage check)."""
    entries = (
        PolicyEntry(Resource.parse(f"Topic:{topic}"), frozenset({Action.SUB})),
        PolicyEntry(Resource.parse(f"Group:{DEFAULT_CONSUMER_GROUP}"), frozenset({Action.SUB})),
    )
    return Acl(f"User:{username}", (Policy(entries=entries),))


def test_signed_reads_over_tls_need_sub_on_the_topic(spark: SparkSession, secure: LocalCluster) -> None:
    spec, files = secure.spec, secure.spec.tls_files
    assert spec.admin_credentials is not None
    assert files is not None
    topic = asyncio.run(make_topic(secure, "spark_source_auth"))
    asyncio.run(add_user(secure, User("spark-source", SOURCE_SECRET), _sub_acl("spark-source", topic)))
    pub_only = Acl(
        "User:no-sub", (Policy(entries=(PolicyEntry(Resource.parse(f"Topic:{topic}"), frozenset({Action.PUB})),)),)
    )
    asyncio.run(add_user(secure, User("no-sub", OTHER_SECRET), pub_only))
    df = spark.createDataFrame([(f"row-{i}",) for i in range(20)], "value string")
    tls = {"tls": "true", "tlsCaFile": str(files.ca_file)}
    client = files.client_config()  # brokers and name servers ask for a client certificate (mutual TLS)
    mutual = {"tlsCertFile": str(client.cert_file), "tlsKeyFile": str(client.key_file), **tls}
    admin = {"accessKey": spec.admin_credentials.access_key, "secretKey": spec.admin_credentials.secret_key}
    df.write.format(FORMAT_NAME).options(gateway=secure.gateway_addr, topic=topic, **tls, **admin).mode("append").save()

    rows = read(spark, secure, topic, accessKey="spark-source", secretKey=SOURCE_SECRET, **mutual).collect()
    assert sorted(bytes(r.body).decode() for r in rows) == sorted(f"row-{i}" for i in range(20))
    with pytest.raises(Exception, match=r"CODE: 16 \(NO_PERMISSION\)") as info:
        read(spark, secure, topic, accessKey="no-sub", secretKey=OTHER_SECRET, **mutual).collect()
    assert OTHER_SECRET not in str(info.value)


def _mirror(spark: SparkSession, cluster: LocalCluster, source: str, target: str, checkpoint: Path) -> list[int]:
    """One AvailableNow run of a stream from ``source`` into ``target`` (the sink's column mapping: the source's
    body, keys, tag and properties columns as they are; its other columns ignored); input rows per micro-batch."""
    stream = (
        spark.readStream.format(FORMAT_NAME)
        .options(namesrv=cluster.namesrv_addr, topic=source, startingOffsets="earliest", maxOffsetsPerTrigger="20")
        .load()
    )
    query = (
        stream.writeStream.format(FORMAT_NAME)
        .options(gateway=cluster.gateway_addr, topic=target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return [int(p["numInputRows"]) for p in query.recentProgress]


def test_a_stream_mirrors_a_topic_into_another_once_across_restarts(
    spark: SparkSession, spark_cluster: LocalCluster, tmp_path: Path
) -> None:
    source = asyncio.run(make_topic(spark_cluster, "spark_mirror_from", queues=2))
    target = asyncio.run(make_topic(spark_cluster, "spark_mirror_to", queues=2))
    first = publish(spark_cluster, source, 30)
    assert sum(_mirror(spark, spark_cluster, source, target, tmp_path / "checkpoint")) == 30
    second = publish(spark_cluster, source, 15, first=30)
    assert sum(_mirror(spark, spark_cluster, source, target, tmp_path / "checkpoint")) == 15

    copied = read(spark, spark_cluster, target).collect()
    assert sorted((bytes(r.body), r.keys, r.tag) for r in copied) == sorted(
        (s.body, s.key, s.tag) for s in first + second
    )  # every message once, with its key and tag
    assert {r.properties["color"] for r in copied} == {"red", "blue"}


def test_a_range_that_stops_moving_fails_after_read_timeout(
    spark_cluster: LocalCluster, loaded: tuple[str, list[Sent]]
) -> None:
    """A task planned past what its broker holds (a slave far behind, say) fails with SYSTEM_ERROR, naming where."""
    topic, sent = loaded
    last = max(sent, key=lambda s: (s.broker_name, s.queue_id, s.queue_offset))
    options = SourceOptions.parse(
        {"topic": topic, "namesrv": spark_cluster.namesrv_addr, "readTimeoutMs": "600"}, streaming=False, env={}
    )
    rng = QueueRange(topic, last.broker_name, last.queue_id, last.queue_offset, last.queue_offset + 5)
    batches = read_range(options, rng)
    assert next(batches).num_rows == 1  # the last stored message
    with pytest.raises(MQClientError, match=rf"stuck at offset {last.queue_offset + 1} of") as info:
        next(batches)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
