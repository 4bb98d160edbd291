"""Options of the ``rocketmq`` data source (``df.write.format("rocketmq").option(...)``).

| option          | meaning                                                            | default          |
|-----------------|--------------------------------------------------------------------|------------------|
| gateway         | producer gateway ``host:port``                                     | 127.0.0.1:8081   |
| topic           | destination topic; wins over a ``topic`` column (required without one) | none         |
| keyColumn       | column whose value is the sharding key AND the message KEYS (alias of a ``keys`` column) | none |
| tagColumn       | column whose value is the message TAGS (alias of a ``tag`` column) | none             |
| batchSize       | messages per ProducerGateway.SendBatch call                        | 500              |
| sendTimeoutMs   | the gateway's send budget per message (DefaultMQProducer.sendMsgTimeout) | 3000       |
| maxRetries      | extra SendBatch rounds for messages whose result is an error      | 3                |
| maxInFlight     | SendBatch calls in flight per Spark task                           | 2                |
| retryBackoffMs  | pause before retry round n is n x this                             | 200              |
| producerGroup   | producer group sent with each batch                                | SPARK_PRODUCER   |
| summaryPath     | file where ``commit()`` writes the job's totals as JSON            | none             |
| accessKey       | access key (user name) the calls are signed with (MQv2-HMAC-SHA1)  | env MQ_SPARK_ACCESS_KEY |
| secretKey       | its secret key                                                     | env MQ_SPARK_SECRET_KEY |
| tls             | ``true``: call the gateway over TLS                                | false            |
| tlsCaFile       | PEM CA bundle that verifies the gateway (unset: the system roots)  | env MQ_SPARK_TLS_CA_FILE |
| deliveryGuarantee | ``exactly_once`` (transactions, mq_spark.transactions) or ``at_least_once`` | exactly_once  |
| transactionTimeoutSec | exactly once: seconds no check-back touches the half messages (immunity) | 3600 |

Columns (as Kafka's sink; :func:`resolve_columns`): a ``body`` or ``value`` column (binary or string) is the
message body, else the body is the JSON object of all columns (:mod:`mq_spark.encoding`); a ``keys`` column (or
``keyColumn``) gives KEYS and the sharding key, ``tag`` (or ``tagColumn``) the TAGS, ``properties``
(map<string,string>) the user properties, ``topic`` (string) the topic when the ``topic`` option is not set (then
only with ``deliveryGuarantee`` at_least_once: a job's transactions end on one topic). With a body column other
columns are ignored. Bad combinations raise InvalidParameterError (29) before any send.

Option names are case-insensitive (Spark's CaseInsensitiveDict). The secret key is best given through the
environment of the driver and executors (MQ_SPARK_SECRET_KEY), so it is no Spark option at all; Spark also redacts
options whose name matches ``spark.redaction.regex`` (``secret``, ``access.key``, ...) in its UI and plans. It is
never written to a log, a summary, a repr or an exception text. Credentials need both keys (one alone is refused).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mq_common.constants import validate_topic
from mq_common.errors import InvalidParameterError
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

if TYPE_CHECKING:  # imported where credentials are built: its module loads pydantic, ~0.08 s in each cold worker
    from mq_common.auth.settings import Credentials

DEFAULT_GATEWAY: Final = "127.0.0.1:8081"
DEFAULT_BATCH_SIZE: Final = 500
MAX_BATCH_SIZE: Final = 10_000
DEFAULT_SEND_TIMEOUT_MS: Final = 3_000
DEFAULT_MAX_RETRIES: Final = 3
MAX_RETRIES_LIMIT: Final = 16
DEFAULT_MAX_IN_FLIGHT: Final = 2
MAX_IN_FLIGHT_LIMIT: Final = 16
DEFAULT_RETRY_BACKOFF_MS: Final = 200
DEFAULT_TRANSACTION_TIMEOUT_S: Final = 3600
"""CHECK_IMMUNITY_TIME_IN_SECONDS of the exactly-once half messages: how long a job may run between an attempt's
first send and ``commit()``. Without it the broker checks a half message back after its transactionTimeout (6 s),
nobody answers for a job's group, and after transactionCheckMax checks (15 x 30 s) it is discarded: a job longer
than ~7.5 min would lose rows. One hour covers the jobs this sink runs (the flights take minutes) with a wide
margin; a longer one sets more. Not much more by default: a half message whose job died without abort() (a driver
killed) is only checked, and then discarded, once this has passed."""
MAX_TRANSACTION_TIMEOUT_S: Final = 7 * 86_400
DEFAULT_PRODUCER_GROUP: Final = "SPARK_PRODUCER"
ACCESS_KEY_ENV: Final = "MQ_SPARK_ACCESS_KEY"
SECRET_KEY_ENV: Final = "MQ_SPARK_SECRET_KEY"
TLS_CA_FILE_ENV: Final = "MQ_SPARK_TLS_CA_FILE"
BODY_COLUMNS: Final = ("body", "value")
KEYS_COLUMN: Final = "keys"
TAG_COLUMN: Final = "tag"
PROPERTIES_COLUMN: Final = "properties"
TOPIC_COLUMN: Final = "topic"
EXACTLY_ONCE: Final = "exactly_once"
AT_LEAST_ONCE: Final = "at_least_once"
DELIVERY_GUARANTEES: Final = (EXACTLY_ONCE, AT_LEAST_ONCE)
_TRUE: Final = frozenset({"true", "1", "yes"})
_FALSE: Final = frozenset({"false", "0", "no", ""})


def _int_option(options: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidParameterError(f"option {name} must be an integer, got {raw!r}") from exc
    if not low <= value <= high:
        raise InvalidParameterError(f"option {name} must be in [{low}, {high}], got {value}")
    return value


def _bool_option(options: Mapping[str, str], name: str) -> bool:
    raw = (options.get(name) or "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise InvalidParameterError(f"option {name} must be true or false, got {raw!r}")


def _choice_option(options: Mapping[str, str], name: str, choices: Sequence[str]) -> str:
    """The option's value (case-insensitive) among ``choices``, default the first. Raises InvalidParameterError."""
    raw = (options.get(name) or choices[0]).strip().lower()
    if raw not in choices:
        raise InvalidParameterError(f"option {name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _option_or_env(options: Mapping[str, str], name: str, env: Mapping[str, str], env_name: str) -> str | None:
    return options.get(name) or env.get(env_name) or None


def credentials_of(options: Mapping[str, str], env: Mapping[str, str]) -> Credentials | None:
    """accessKey/secretKey (else MQ_SPARK_ACCESS_KEY / MQ_SPARK_SECRET_KEY of ``env``); None when neither is set.
    Raises InvalidParameterError (29) when only one is set (the text names the missing one, never a value)."""
    access_key = _option_or_env(options, "accessKey", env, ACCESS_KEY_ENV)
    secret_key = _option_or_env(options, "secretKey", env, SECRET_KEY_ENV)
    if access_key is None and secret_key is None:
        return None
    if access_key is None or secret_key is None:
        missing = f"accessKey ({ACCESS_KEY_ENV})" if access_key is None else f"secretKey ({SECRET_KEY_ENV})"
        raise InvalidParameterError(f"credentials need both keys: {missing} is not set")
    from mq_common.auth.settings import Credentials

    return Credentials(access_key, secret_key)


@dataclass(frozen=True, slots=True)
class ColumnMapping:
    """Which column plays which part of a message (None: no such column). ``body`` None: the JSON of all
    columns is the body."""

    body: str | None = None
    keys: str | None = None
    tag: str | None = None
    properties: str | None = None
    topic: str | None = None


def _alias(names: Sequence[str], option: str, given: str | None, column: str) -> str | None:
    if given is None:
        return column if column in names else None
    if given not in names:
        raise InvalidParameterError(f"option {option}: column {given!r} is not in the DataFrame {list(names)}")
    if given != column and column in names:
        raise InvalidParameterError(
            f"option {option}={given!r} and a {column!r} column both give the message's {column}: drop one"
        )
    return given


def resolve_columns(
    names: Sequence[str], key_column: str | None, tag_column: str | None, *, topic_option_set: bool = True
) -> ColumnMapping:
    """The column mapping of a DataFrame with columns ``names`` (see the module docstring). Raises
    InvalidParameterError (29) when both ``body`` and ``value`` are columns, keyColumn/tagColumn names a missing
    column or competes with a ``keys``/``tag`` column, or the topic option is not set and there is no topic column."""
    bodies = [c for c in BODY_COLUMNS if c in names]
    if len(bodies) > 1:
        raise InvalidParameterError("columns 'body' and 'value' both give the message body: keep one")
    topic = TOPIC_COLUMN if TOPIC_COLUMN in names else None
    if not topic_option_set and topic is None:
        raise InvalidParameterError("option topic is not set and the DataFrame has no 'topic' column")
    return ColumnMapping(
        body=bodies[0] if bodies else None,
        keys=_alias(names, "keyColumn", key_column, KEYS_COLUMN),
        tag=_alias(names, "tagColumn", tag_column, TAG_COLUMN),
        properties=PROPERTIES_COLUMN if PROPERTIES_COLUMN in names else None,
        topic=topic,
    )


def check_column_types(schema: StructType, mapping: ColumnMapping) -> None:
    """Raises InvalidParameterError (29) when the body column is not binary/string, ``properties`` is not
    map<string,string> or ``topic`` is not a string."""
    types = {f.name: f.dataType for f in schema.fields}
    body_type = types[mapping.body] if mapping.body is not None else None
    if body_type is not None and not isinstance(body_type, BinaryType | StringType):
        raise InvalidParameterError(
            f"column {mapping.body!r} (the message body) must be binary or string, not {body_type.simpleString()}"
        )
    if mapping.properties is not None:
        kind = types[mapping.properties]
        if not (
            isinstance(kind, MapType)
            and isinstance(kind.keyType, StringType)
            and isinstance(kind.valueType, StringType)
        ):
            raise InvalidParameterError(
                f"column 'properties' (the user properties) must be map<string,string>, not {kind.simpleString()}"
            )
    if mapping.topic is not None and not isinstance(types[mapping.topic], StringType):
        raise InvalidParameterError(f"column 'topic' must be a string, not {types[mapping.topic].simpleString()}")


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """Parsed, validated writer options (picklable; shipped to every task)."""

    gateway: str
    topic: str
    """The option; "" when every row's topic comes from its ``topic`` column."""
    key_column: str | None = None
    tag_column: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    max_retries: int = DEFAULT_MAX_RETRIES
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    producer_group: str = DEFAULT_PRODUCER_GROUP
    summary_path: str | None = None
    credentials: Credentials | None = field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: str | None = None
    delivery_guarantee: str = EXACTLY_ONCE
    transaction_timeout_s: int = DEFAULT_TRANSACTION_TIMEOUT_S

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @classmethod
    def parse(cls, options: Mapping[str, str], env: Mapping[str, str] | None = None) -> WriterOptions:
        """Read the data source options (credentials and the CA file fall back to ``env``, default os.environ).
        Raises InvalidParameterError (29) for a missing/illegal value, never quoting a secret."""
        env = os.environ if env is None else env
        topic = options.get("topic") or ""
        problem = validate_topic(topic) if topic or "topic" in options else None
        if problem is not None:
            raise InvalidParameterError(f"option topic: {problem}")
        gateway = options.get("gateway") or DEFAULT_GATEWAY
        if ":" not in gateway:
            raise InvalidParameterError(f"option gateway must be host:port, got {gateway!r}")
        return cls(
            gateway=gateway,
            topic=topic,
            key_column=options.get("keyColumn") or None,
            tag_column=options.get("tagColumn") or None,
            batch_size=_int_option(options, "batchSize", DEFAULT_BATCH_SIZE, 1, MAX_BATCH_SIZE),
            send_timeout_ms=_int_option(options, "sendTimeoutMs", DEFAULT_SEND_TIMEOUT_MS, 1, 600_000),
            max_retries=_int_option(options, "maxRetries", DEFAULT_MAX_RETRIES, 0, MAX_RETRIES_LIMIT),
            max_in_flight=_int_option(options, "maxInFlight", DEFAULT_MAX_IN_FLIGHT, 1, MAX_IN_FLIGHT_LIMIT),
            retry_backoff_ms=_int_option(options, "retryBackoffMs", DEFAULT_RETRY_BACKOFF_MS, 0, 60_000),
            producer_group=options.get("producerGroup") or DEFAULT_PRODUCER_GROUP,
            summary_path=options.get("summaryPath") or None,
            credentials=credentials_of(options, env),
            tls=_bool_option(options, "tls"),
            tls_ca_file=_option_or_env(options, "tlsCaFile", env, TLS_CA_FILE_ENV),
            delivery_guarantee=_choice_option(options, "deliveryGuarantee", DELIVERY_GUARANTEES),
            transaction_timeout_s=_int_option(
                options, "transactionTimeoutSec", DEFAULT_TRANSACTION_TIMEOUT_S, 1, MAX_TRANSACTION_TIMEOUT_S
            ),
        )

    def tls_ca_bytes(self) -> bytes | None:
        """The CA bundle's PEM bytes (None: the system roots). Raises InvalidParameterError (29) when the file
        cannot be read. Blocking (a small file, read once per task)."""
        if self.tls_ca_file is None:
            return None
        try:
            return Path(self.tls_ca_file).read_bytes()
        except OSError as exc:
            raise InvalidParameterError(f"option tlsCaFile: cannot read {self.tls_ca_file}: {exc.strerror}") from None

    def check_columns(self, columns: Sequence[str] | StructType) -> ColumnMapping:
        """The DataFrame's column mapping (:func:`resolve_columns`; types checked too when ``columns`` is the
        schema). Raises InvalidParameterError (29) for a bad combination (see :func:`resolve_columns`; a ``topic``
        column without the topic option under exactly_once) or type."""
        names = columns.fieldNames() if isinstance(columns, StructType) else list(columns)
        mapping = resolve_columns(names, self.key_column, self.tag_column, topic_option_set=bool(self.topic))
        if not self.topic and self.exactly_once:
            raise InvalidParameterError(
                "rows routed by their 'topic' column need deliveryGuarantee=at_least_once (an exactly-once job ends "
                "its transactions on one topic): set the option topic, or choose at_least_once"
            )
        if isinstance(columns, StructType):
            check_column_types(columns, mapping)
        return mapping
