"""Option parsing of the rocketmq data source."""

from __future__ import annotations

import pytest
from mq_common.errors import InvalidParameterError
from mq_spark.options import DEFAULT_BATCH_SIZE, WriterOptions
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


@pytest.mark.parametrize(("topic", "remark"), [("", "blank"), ("a b", "illegal characters"), ("x" * 128, "longer")])
def test_illegal_topics_are_refused(topic: str, remark: str) -> None:
    with pytest.raises(InvalidParameterError, match=remark):
        WriterOptions.parse({"topic": topic})


def test_key_and_tag_columns_must_exist() -> None:
    opts = WriterOptions.parse({"topic": "t", "keyColumn": "k", "tagColumn": "tag"})
    opts.check_columns(["k", "tag", "x"])
    with pytest.raises(InvalidParameterError, match="option tagColumn: column 'tag' is not in the DataFrame"):
        opts.check_columns(["k"])
