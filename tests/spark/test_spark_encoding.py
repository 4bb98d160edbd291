"""Row -> JSON body encoding of the rocketmq data source (no Spark, no services)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import math
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mq_common.errors import InvalidParameterError
from mq_spark.encoding import encode_batch, encode_bodies, encode_json

UTC = dt.UTC


def _batch(columns: dict[str, pa.Array]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))


def _decoded(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return [json.loads(body) for body in encode_bodies(batch)]


def test_numbers_strings_bools_and_nulls_keep_their_json_types() -> None:
    batch = _batch(
        {
            "i": pa.array([1, None, -7], pa.int32()),
            "f": pa.array([2.5, None, float("nan")], pa.float64()),
            "s": pa.array(["UA", None, "ä"], pa.string()),
            "b": pa.array([True, False, None], pa.bool_()),
        }
    )
    assert _decoded(batch) == [
        {"i": 1, "f": 2.5, "s": "UA", "b": True},
        {"i": None, "f": None, "s": None, "b": False},
        {"i": -7, "f": None, "s": "ä", "b": None},
    ]


def test_infinities_become_null_so_every_body_is_strict_json() -> None:
    batch = _batch({"f": pa.array([float("inf"), float("-inf"), 1.0])})
    bodies = encode_bodies(batch)
    assert [json.loads(b, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}")) for b in bodies] == [
        {"f": None},
        {"f": None},
        {"f": 1.0},
    ]


def test_utc_timestamps_are_iso8601_with_z_and_seconds_only_when_whole() -> None:
    whole = pa.array([dt.datetime(2013, 1, 1, 10, tzinfo=UTC), None], pa.timestamp("us", tz="UTC"))
    frac = pa.array([dt.datetime(2013, 1, 1, 10, 0, 0, 250000, tzinfo=UTC), None], pa.timestamp("us", tz="UTC"))
    assert _decoded(_batch({"t": whole})) == [{"t": "2013-01-01T10:00:00Z"}, {"t": None}]
    assert _decoded(_batch({"t": frac})) == [{"t": "2013-01-01T10:00:00.250000Z"}, {"t": None}]


def test_timestamps_in_another_zone_are_written_as_utc_instants() -> None:
    ts = pa.array([dt.datetime(2013, 1, 1, 10, tzinfo=UTC)], pa.timestamp("us", tz="America/New_York"))
    assert _decoded(_batch({"t": ts})) == [{"t": "2013-01-01T10:00:00Z"}]


def test_naive_timestamps_dates_decimals_and_binary() -> None:
    batch = _batch(
        {
            "ntz": pa.array([dt.datetime(2020, 2, 29, 23, 59, 59)], pa.timestamp("us")),
            "d": pa.array([dt.date(2013, 9, 30)], pa.date32()),
            "dec": pa.array([decimal.Decimal("12345678901234567890.12")], pa.decimal128(22, 2)),
            "bin": pa.array([b"\x00\xff"], pa.binary()),
        }
    )
    assert _decoded(batch) == [
        {
            "ntz": "2020-02-29T23:59:59",
            "d": "2013-09-30",
            "dec": "12345678901234567890.12",
            "bin": base64.b64encode(b"\x00\xff").decode(),
        }
    ]


def test_strings_needing_escapes_and_nested_values_round_trip() -> None:
    batch = _batch(
        {
            "s": pa.array(['say "hi"\\', "tab\there\nnew\x01", None]),
            "nested": pa.array([{"k": [1.0, float("nan")]}, None, {"k": []}]),
        }
    )
    assert _decoded(batch) == [
        {"s": 'say "hi"\\', "nested": {"k": [1.0, None]}},
        {"s": "tab\there\nnew\x01", "nested": None},
        {"s": None, "nested": {"k": []}},
    ]


def test_column_names_are_escaped_and_order_is_schema_order() -> None:
    batch = _batch({'we"ird': pa.array([1]), "a": pa.array([2])})
    (body,) = encode_bodies(batch)
    assert body == b'{"we\\"ird":1,"a":2}'


def test_empty_batch_gives_no_bodies() -> None:
    assert encode_bodies(_batch({"a": pa.array([], pa.int64())})) == []


def test_keys_and_tags_come_from_their_columns_and_null_or_empty_means_absent() -> None:
    batch = _batch(
        {
            "row_id": pa.array([0, 1, 2]),
            "tailnum": pa.array(["N14228", None, ""]),
            "carrier": pa.array(["UA", "AA", None]),
        }
    )
    rows = encode_batch(batch, "tailnum", "carrier")
    assert [(r.key, r.tag) for r in rows] == [("N14228", "UA"), (None, "AA"), (None, None)]
    assert json.loads(rows[1].body) == {"row_id": 1, "tailnum": None, "carrier": "AA"}


def test_non_string_key_column_uses_the_value_text() -> None:
    rows = encode_batch(_batch({"id": pa.array([42])}), "id", None)
    assert (rows[0].key, rows[0].tag) == ("42", None)


def test_missing_key_column_is_an_invalid_parameter() -> None:
    with pytest.raises(InvalidParameterError, match="'nope' is not in the DataFrame"):
        encode_batch(_batch({"a": pa.array([1])}), "nope", None)


def test_row_fallback_encoder_matches_python_json() -> None:
    assert encode_json({"a": 1, "t": dt.date(2020, 1, 2), "x": math.inf}) == b'{"a":1,"t":"2020-01-02","x":null}'


_json_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    ints=st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20),
    data=st.data(),
)
def test_vectorised_bodies_decode_to_the_row_values(ints: list[int | None], data: st.DataObject) -> None:
    n = len(ints)
    floats = data.draw(st.lists(st.none() | st.floats(allow_nan=False, allow_infinity=False), min_size=n, max_size=n))
    texts = data.draw(st.lists(st.none() | _json_text, min_size=n, max_size=n))
    batch = _batch({"i": pa.array(ints, pa.int64()), "f": pa.array(floats, pa.float64()), "s": pa.array(texts)})
    decoded = _decoded(batch)
    assert [d["i"] for d in decoded] == ints
    assert [d["f"] for d in decoded] == floats
    assert [d["s"] for d in decoded] == texts


def test_encoding_a_batch_does_not_import_pandas() -> None:
    # A cold Spark Python worker would otherwise spend ~0.35 s CPU importing pandas (pyarrow's pandas shim
    # runs on every Python value turned into an Arrow scalar) before its first message.
    batch = _batch(
        {
            "n": pa.array([1, None], pa.int64()),
            "x": pa.array([0.5, float("inf")], pa.float64()),
            "s": pa.array(["a", None], pa.string()),
            "t": pa.array([dt.datetime(2013, 1, 1, 5, tzinfo=UTC), None], pa.timestamp("us", tz="UTC")),
        }
    )
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    child = (
        "import json, sys\n"
        "import pyarrow as pa\n"
        "from mq_spark.encoding import encode_batch\n"
        "batch = pa.ipc.open_stream(sys.stdin.buffer.read()).read_next_batch()\n"
        "rows = encode_batch(batch, 's', None)\n"
        "print(json.dumps({'pandas': 'pandas' in sys.modules, 'bodies': [r.body.decode() for r in rows]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child], input=sink.getvalue(), capture_output=True, check=True, timeout=60
    )
    report = json.loads(out.stdout)
    assert report["pandas"] is False
    assert [json.loads(b) for b in report["bodies"]] == [
        {"n": 1, "x": 0.5, "s": "a", "t": "2013-01-01T05:00:00Z"},
        {"n": None, "x": None, "s": None, "t": None},
    ]
