"""Options of the ``rocketmq`` source (``spark.read.format("rocketmq").option(...)``, and ``readStream``).

| option               | meaning                                                                   | default        |
|----------------------|---------------------------------------------------------------------------|----------------|
| namesrv              | name server(s) ``host:port``, ``;``-separated (RocketMQ's namesrvAddr)   | 127.0.0.1:9876 |
| topic                | the topic to read (required)                                              |                |
| subscription         | tag expression: ``*`` or ``TagA || TagB`` (FilterAPI)                     | ``*``          |
| startingOffsets      | ``earliest``, ``latest`` or offsets JSON (:mod:`mq_spark.source.offsets`) | see below      |
| startingTimestamp    | ms since the epoch: each queue from its first message stored then or later | none         |
| endingOffsets        | batch only: ``latest`` or offsets JSON                                    | latest         |
| maxRowsPerPartition  | a queue's range is cut into Spark partitions of at most this many offsets | 100000         |
| maxOffsetsPerTrigger | stream only: at most this many offsets per micro-batch, over all queues   | none           |
| consumerGroup        | the consumer group named in the pulls (no offsets are committed)          | SPARK_CONSUMER |
| pullBatchSize        | messages per pull (1..1024, MessageStoreConfig.maxTransferCountOnMessageInMemory) | 1024   |
| pullTimeoutMs        | one pull's deadline                                                       | 10000          |
| readTimeoutMs        | how long a partition waits for offsets it was planned with (a slave behind) | 60000        |
| tls, tlsCaFile       | reach name servers and brokers over TLS, as the writer's options          | false          |
| tlsCertFile, tlsKeyFile | the client certificate pair brokers that want mutual TLS ask for       | env (below)    |
| accessKey, secretKey | sign every call (a user with Sub on the topic), as the writer's options  | env (below)    |

startingOffsets defaults to ``earliest`` for a batch read and ``latest`` for a stream (as Kafka's source);
startingTimestamp (SearchOffset on each queue) wins over startingOffsets. The keys fall back to
MQ_SPARK_ACCESS_KEY / MQ_SPARK_SECRET_KEY, as the writer's do, and the TLS files to MQ_SPARK_TLS_CA_FILE /
MQ_SPARK_TLS_CERT_FILE / MQ_SPARK_TLS_KEY_FILE (mq_spark.job_security's names). Names are case-insensitive (Spark's
CaseInsensitiveDict). Mirrors the settings of DefaultLitePullConsumer
(namesrvAddr, consumerGroup, pullBatchSize, consumerPullTimeoutMillis, ConsumeFromWhere + consumeTimestamp).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from mq_common.auth.settings import Credentials
from mq_common.constants import validate_topic
from mq_common.errors import InvalidParameterError

from mq_spark.job_security import TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV
from mq_spark.options import TLS_CA_FILE_ENV, _bool_option, _int_option, _option_or_env, credentials_of
from mq_spark.source.offsets import QueueOffsets, parse_offsets_json

DEFAULT_NAMESRV: Final = "127.0.0.1:9876"
DEFAULT_CONSUMER_GROUP: Final = "SPARK_CONSUMER"
DEFAULT_MAX_ROWS_PER_PARTITION: Final = 100_000
DEFAULT_PULL_BATCH_SIZE: Final = 1024
DEFAULT_PULL_TIMEOUT_MS: Final = 10_000
DEFAULT_READ_TIMEOUT_MS: Final = 60_000
_EARLIEST: Final = "earliest"
_LATEST: Final = "latest"


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a range starts or ends: ``earliest`` / ``latest`` (``kind``), or per-queue offsets (``kind`` "json",
    ``queues``), or a timestamp (``kind`` "timestamp", ``timestamp_ms``)."""

    kind: str
    queues: QueueOffsets | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Parsed, validated source options (picklable: shipped to every read task)."""

    namesrv_addrs: tuple[str, ...]
    topic: str
    subscription: str = "*"
    starting: OffsetSpec = OffsetSpec(_EARLIEST)
    ending: OffsetSpec = OffsetSpec(_LATEST)
    max_rows_per_partition: int = DEFAULT_MAX_ROWS_PER_PARTITION
    max_offsets_per_trigger: int | None = None
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    credentials: Credentials | None = field(default=None, repr=False)

    @classmethod
    def parse(
        cls, options: Mapping[str, str], *, streaming: bool, env: Mapping[str, str] | None = None
    ) -> SourceOptions:
        """Read the options of a batch (``streaming`` False) or streaming read. Raises InvalidParameterError (29)
        for a missing/illegal value (one credential without the other: never quoting a secret) or a combination
        that makes no sense (``latest`` as a batch start, an ending offset on a stream, ``earliest`` as an end)."""
        env = os.environ if env is None else env
        topic = options.get("topic") or ""
        problem = validate_topic(topic)
        if problem is not None:
            raise InvalidParameterError(f"option topic: {problem}")
        namesrv = options.get("namesrv") or options.get("namesrvAddr") or DEFAULT_NAMESRV
        addrs = tuple(a.strip() for a in namesrv.split(";") if a.strip())
        if not addrs or any(":" not in a for a in addrs):
            raise InvalidParameterError(f"option namesrv must be host:port[;host:port...], got {namesrv!r}")
        starting = _offset_spec(options, "startingOffsets", topic, _LATEST if streaming else _EARLIEST)
        raw_ts = options.get("startingTimestamp")
        if raw_ts:
            ts = _int_option(options, "startingTimestamp", 0, 0, 2**63 - 1)
            starting = OffsetSpec("timestamp", timestamp_ms=ts)
        if not streaming and starting.kind == _LATEST:
            raise InvalidParameterError("option startingOffsets: 'latest' is not allowed for a batch read")
        ending = _offset_spec(options, "endingOffsets", topic, _LATEST)
        if streaming and options.get("endingOffsets"):
            raise InvalidParameterError("option endingOffsets is for batch reads only (a stream has no end)")
        if ending.kind == _EARLIEST:
            raise InvalidParameterError("option endingOffsets: 'earliest' is not allowed (use latest or JSON)")
        if ending.queues is not None and any(o == -2 for o in ending.queues.values()):
            raise InvalidParameterError("option endingOffsets: -2 (earliest) is not allowed as an end")
        raw_max = options.get("maxOffsetsPerTrigger")
        if raw_max and not streaming:
            raise InvalidParameterError("option maxOffsetsPerTrigger is for streaming reads only")
        return cls(
            namesrv_addrs=addrs,
            topic=topic,
            subscription=(options.get("subscription") or "*").strip() or "*",
            starting=starting,
            ending=ending,
            max_rows_per_partition=_int_option(
                options, "maxRowsPerPartition", DEFAULT_MAX_ROWS_PER_PARTITION, 1, 2**31 - 1
            ),
            max_offsets_per_trigger=(_int_option(options, "maxOffsetsPerTrigger", 0, 1, 2**62) if raw_max else None),
            consumer_group=options.get("consumerGroup") or DEFAULT_CONSUMER_GROUP,
            pull_batch_size=_int_option(options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, 1, 1024),
            pull_timeout_ms=_int_option(options, "pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, 1, 600_000),
            read_timeout_ms=_int_option(options, "readTimeoutMs", DEFAULT_READ_TIMEOUT_MS, 1, 3_600_000),
            tls=_bool_option(options, "tls"),
            tls_ca_file=_option_or_env(options, "tlsCaFile", env, TLS_CA_FILE_ENV),
            tls_cert_file=_option_or_env(options, "tlsCertFile", env, TLS_CERT_FILE_ENV),
            tls_key_file=_option_or_env(options, "tlsKeyFile", env, TLS_KEY_FILE_ENV),
            credentials=credentials_of(options, env),
        )


def _offset_spec(options: Mapping[str, str], name: str, topic: str, default: str) -> OffsetSpec:
    raw = (options.get(name) or "").strip()
    if not raw:
        return OffsetSpec(default)
    if raw.lower() in (_EARLIEST, _LATEST):
        return OffsetSpec(raw.lower())
    if raw.startswith("{"):
        return OffsetSpec("json", queues=parse_offsets_json(raw, topic, name))
    raise InvalidParameterError(
        f'option {name} must be earliest, latest or {{"{topic}": {{"<brokerName>:<queueId>": offset}}}}, got {raw!r}'
    )
