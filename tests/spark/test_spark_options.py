"""Option parsing of the rocketmq data source."""

from __future__ import annotations

from pathlib import Path

import pytest
from mq_common.auth.settings import Credentials
from mq_common.errors import InvalidParameterError
from mq_common.tls import TlsClientConfig
from mq_spark.job_security import TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV, JobSecurity
from mq_spark.options import (
    ACCESS_KEY_ENV,
    DEFAULT_BATCH_SIZE,
    DEFAULT_TRANSACTION_TIMEOUT_S,
    SECRET_KEY_ENV,
    TLS_CA_FILE_ENV,
    WriterOptions,
)
from pyspark.sql.datasource import CaseInsensitiveDict


def test_defaults_and_case_insensitive_names() -> None:
    opts = WriterOptions.parse(
        CaseInsensitiveDict({"topic": "flights", "KEYCOLUMN": "tailnum", "tagcolumn": "carrier"})
    )
    assert (opts.gateway, opts.topic, opts.key_column, opts.tag_column) == (
        "127.0.0.1:8081",
        "flights",
        "tailnum",
        "carrier",
    )
    assert (opts.batch_size, opts.max_retries, opts.send_timeout_ms) == (DEFAULT_BATCH_SIZE, 3, 3000)


def test_numbers_are_parsed_and_bounded() -> None:
    opts = WriterOptions.parse({"topic": "t", "batchSize": "100", "maxRetries": "0", "sendTimeoutMs": "500"})
    assert (opts.batch_size, opts.max_retries, opts.send_timeout_ms) == (100, 0, 500)
    with pytest.raises(InvalidParameterError, match=r"batchSize must be in \[1, 10000\], got 0"):
        WriterOptions.parse({"topic": "t", "batchSize": "0"})
    with pytest.raises(InvalidParameterError, match="maxRetries must be an integer"):
        WriterOptions.parse({"topic": "t", "maxRetries": "many"})


def test_transaction_timeout_is_the_half_messages_check_immunity() -> None:
    assert WriterOptions.parse({"topic": "t"}).transaction_timeout_s == DEFAULT_TRANSACTION_TIMEOUT_S == 3600
    long_job = CaseInsensitiveDict({"topic": "t", "TRANSACTIONTIMEOUTSEC": "86400"})
    assert WriterOptions.parse(long_job).transaction_timeout_s == 86_400
    with pytest.raises(InvalidParameterError, match=r"transactionTimeoutSec must be in \[1, 604800\], got 0"):
        WriterOptions.parse({"topic": "t", "transactionTimeoutSec": "0"})


@pytest.mark.parametrize(("topic", "remark"), [("", "blank"), ("a b", "illegal characters"), ("x" * 128, "longer")])
def test_illegal_topics_are_refused(topic: str, remark: str) -> None:
    with pytest.raises(InvalidParameterError, match=remark):
        WriterOptions.parse({"topic": topic})


def test_key_and_tag_columns_must_exist() -> None:
    opts = WriterOptions.parse({"topic": "t", "keyColumn": "k", "tagColumn": "tag"})
    opts.check_columns(["k", "tag", "x"])
    with pytest.raises(InvalidParameterError, match="option tagColumn: column 'tag' is not in the DataFrame"):
        opts.check_columns(["k"])


def test_credentials_and_tls_from_options_or_the_environment() -> None:
    plain = WriterOptions.parse({"topic": "t"}, env={})
    assert (plain.credentials, plain.tls, plain.tls_ca_file) == (None, False, None)
    env = {ACCESS_KEY_ENV: "spark", SECRET_KEY_ENV: "env-secret-9", TLS_CA_FILE_ENV: "/ca.pem"}
    from_env = WriterOptions.parse({"topic": "t", "tls": "true"}, env=env)
    assert from_env.credentials == Credentials("spark", "env-secret-9")
    assert (from_env.tls, from_env.tls_ca_file) == (True, "/ca.pem")
    given = WriterOptions.parse(CaseInsensitiveDict({"topic": "t", "accesskey": "a", "SECRETKEY": "opt-secret"}), env)
    assert given.credentials == Credentials("a", "opt-secret")
    assert "opt-secret" not in repr(given)
    assert "env-secret-9" not in repr(from_env)


def test_half_credentials_and_bad_flags_are_refused_without_quoting_the_secret() -> None:
    with pytest.raises(InvalidParameterError, match=r"accessKey \(MQ_SPARK_ACCESS_KEY\) is not set") as info:
        WriterOptions.parse({"topic": "t", "secretKey": "lonely-secret"}, env={})
    assert "lonely-secret" not in str(info.value)
    with pytest.raises(InvalidParameterError, match="option tls must be true or false"):
        WriterOptions.parse({"topic": "t", "tls": "maybe"}, env={})
    unreadable = WriterOptions.parse({"topic": "t", "tls": "true", "tlsCaFile": "/nonexistent/ca.pem"}, env={})
    with pytest.raises(InvalidParameterError, match=r"option tlsCaFile: cannot read /nonexistent/ca\.pem"):
        unreadable.tls_ca_bytes()


def test_job_security_reads_the_environment_and_passes_no_secret_as_an_option() -> None:
    env = {ACCESS_KEY_ENV: "spark", SECRET_KEY_ENV: "job-secret-3", TLS_CA_FILE_ENV: "/tls/ca.pem"}
    env |= {TLS_CERT_FILE_ENV: "/tls/spark.pem", TLS_KEY_FILE_ENV: "/tls/spark-key.pem"}
    secured = JobSecurity.from_env(True, env)
    assert secured.credentials == Credentials("spark", "job-secret-3")
    assert secured.tls_client == TlsClientConfig(
        Path("/tls/ca.pem"), Path("/tls/spark.pem"), Path("/tls/spark-key.pem")
    )
    assert secured.writer_options() == {"tls": "true", "tlsCaFile": "/tls/ca.pem"}
    assert "job-secret-3" not in repr(secured)
    plain = JobSecurity.from_env(False, {})
    assert (plain.tls_client, plain.credentials, plain.writer_options()) == (None, None, {})
