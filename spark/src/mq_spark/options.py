"""Options of the ``rocketmq`` data source (``df.write.format("rocketmq").option(...)``).

| option          | meaning                                                            | default          |
|-----------------|--------------------------------------------------------------------|------------------|
| gateway         | producer gateway ``host:port``                                     | 127.0.0.1:8081   |
| topic           | destination topic (required)                                       |                  |
| keyColumn       | column whose value is the sharding key AND the message KEYS        | none             |
| tagColumn       | column whose value is the message TAGS                             | none             |
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
from typing import Final

from mq_common.auth.settings import Credentials
from mq_common.constants import validate_topic
from mq_common.errors import InvalidParameterError

DEFAULT_GATEWAY: Final = "127.0.0.1:8081"
DEFAULT_BATCH_SIZE: Final = 500
MAX_BATCH_SIZE: Final = 10_000
DEFAULT_SEND_TIMEOUT_MS: Final = 3_000
DEFAULT_MAX_RETRIES: Final = 3
MAX_RETRIES_LIMIT: Final = 16
DEFAULT_MAX_IN_FLIGHT: Final = 2
MAX_IN_FLIGHT_LIMIT: Final = 16
DEFAULT_RETRY_BACKOFF_MS: Final = 200
DEFAULT_PRODUCER_GROUP: Final = "SPARK_PRODUCER"
ACCESS_KEY_ENV: Final = "MQ_SPARK_ACCESS_KEY"
SECRET_KEY_ENV: Final = "MQ_SPARK_SECRET_KEY"
TLS_CA_FILE_ENV: Final = "MQ_SPARK_TLS_CA_FILE"
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
    return Credentials(access_key, secret_key)


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """Parsed, validated writer options (picklable; shipped to every task)."""

    gateway: str
    topic: str
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

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @classmethod
    def parse(cls, options: Mapping[str, str], env: Mapping[str, str] | None = None) -> WriterOptions:
        """Read the data source options (credentials and the CA file fall back to ``env``, default os.environ).
        Raises InvalidParameterError (29) for a missing/illegal value, never quoting a secret."""
        env = os.environ if env is None else env
        topic = options.get("topic") or ""
        problem = validate_topic(topic)
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

    def check_columns(self, column_names: Sequence[str]) -> None:
        """Raises InvalidParameterError (29) when keyColumn or tagColumn names no column of the DataFrame."""
        for option, column in (("keyColumn", self.key_column), ("tagColumn", self.tag_column)):
            if column is not None and column not in column_names:
                raise InvalidParameterError(
                    f"option {option}: column {column!r} is not in the DataFrame {list(column_names)}"
                )
