"""Rows of an Arrow RecordBatch -> messages: body, keys, tag, user properties and topic.

Columns map to message parts as Kafka's sink maps them (mq_spark.options.resolve_columns): a ``body`` or ``value``
column (binary, or string sent as UTF-8) is the body; without one the body is the JSON object below. ``keys`` (or
keyColumn), ``tag`` (or tagColumn), ``properties`` (map<string,string>; names RocketMQ reserves are refused, null
values dropped) and ``topic`` columns fill those parts when present.

JSON body (no body column):

Body: a UTF-8 JSON object with every column of the row, in schema order. Nulls are ``null``; float NaN and
infinities (not valid JSON) are ``null`` too; timestamps are ISO-8601 strings (``2013-01-01T10:00:00Z``
for a UTC instant with whole seconds, ``...T10:00:00.250000Z`` otherwise; no ``Z`` for TIMESTAMP_NTZ),
dates ``2013-01-01``; decimals are strings (no precision lost); binary is base64. Keys and tags are the
string form of their column's value, None when null or empty.

Numbers, booleans, timestamps, dates and strings that need no escaping are formatted column-wise with
Arrow compute kernels and joined into whole JSON objects; other columns (nested, decimal, binary, strings
holding quotes/backslashes/control characters) fall back to ``json.dumps`` per value. Pure functions;
they run on a Spark Python worker's task thread.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from mq_common.constants import MessageConst, validate_topic
from mq_common.errors import InvalidParameterError

from mq_spark.options import ColumnMapping, resolve_columns

_SEPARATORS: Final = (",", ":")
_NEEDS_ESCAPE: Final = r'["\\\x00-\x1f]'


@dataclass(frozen=True, slots=True)
class EncodedRow:
    """One message to publish: ``body``, sharding key/KEYS ``key``, ``tag``, user ``properties`` and the row's
    ``topic`` (None when absent; the writer's topic option wins over ``topic``)."""

    body: bytes
    key: str | None
    tag: str | None
    properties: dict[str, str] | None = None
    topic: str | None = None


def _json_default(value: object) -> object:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_none(v) for v in value]
    return value


def dumps_value(value: Any) -> str:
    """One value as compact JSON (the per-value fallback; see the module docstring for the rules)."""
    try:
        return json.dumps(value, default=_json_default, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or infinity somewhere: rare, so clean only then
        clean = _finite_or_none(value)
        return json.dumps(clean, default=_json_default, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False)


def encode_json(row: dict[str, Any]) -> bytes:
    """One row (a dict in column order) as compact UTF-8 JSON."""
    return dumps_value(row).encode("utf-8")


def utf8_scalar(text: str) -> pa.Scalar:
    """``text`` as an Arrow string scalar, built from its offsets and data buffers.

    ``pa.scalar`` (which a plain ``str`` given to a compute function goes through) first asks pyarrow's
    pandas shim whether the value is a pandas object, and that imports pandas: ~0.35 s of CPU in every cold
    Spark Python worker, on the write's critical path, for nothing this module uses.
    """
    data = text.encode("utf-8")
    offsets = pa.py_buffer(struct.pack("<ii", 0, len(data)))
    return pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])[0]


_NULL: Final = utf8_scalar("null")
_QUOTE: Final = utf8_scalar('"')
_EMPTY: Final = utf8_scalar("")


def _quoted(strings: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(_QUOTE, strings, _QUOTE, _EMPTY)


def _format_timestamp(column: pa.Array) -> pa.Array:
    ts_type: pa.TimestampType = column.type
    suffix = "Z" if ts_type.tz is not None else ""
    values = column.cast(pa.timestamp(ts_type.unit, tz="UTC")) if ts_type.tz is not None else column
    whole_seconds = ts_type.unit == "s" or pc.all(
        pc.equal(pc.floor_temporal(values, unit="second"), values)
    ).as_py() in (
        True,
        None,
    )
    if whole_seconds:
        values = pc.cast(values, pa.timestamp("s", tz=values.type.tz), safe=False)
    return _quoted(pc.strftime(values, format=f"%Y-%m-%dT%H:%M:%S{suffix}"))


def _fallback(column: pa.Array) -> pa.Array:
    return pa.array([dumps_value(v) for v in column.to_pylist()], type=pa.string())


def json_fragments(column: pa.Array) -> pa.Array:
    """JSON text of every value of ``column`` (``null`` for nulls), as a non-null string array."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_floating(kind):
        finite = pc.if_else(pc.is_finite(column), column, pa.nulls(1, kind)[0])
        text = pc.cast(finite, pa.string())
    elif pa.types.is_timestamp(kind):
        text = _format_timestamp(column)
    elif pa.types.is_date(kind):
        text = _quoted(pc.cast(column, pa.string()))
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
            return _fallback(column)
        text = _quoted(column.cast(pa.string()))
    elif pa.types.is_null(kind):
        text = pa.nulls(len(column), pa.string())
    else:
        return _fallback(column)
    return pc.fill_null(text, _NULL)


def encode_bodies(batch: pa.RecordBatch) -> list[bytes]:
    """The JSON body of every row of ``batch``, in order."""
    if batch.num_rows == 0:
        return []
    if batch.num_columns == 0:
        return [b"{}"] * batch.num_rows
    parts: list[Any] = []
    for i, name in enumerate(batch.schema.names):
        parts.append(utf8_scalar(("{" if i == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":"))
        parts.append(json_fragments(batch.column(i)))
    parts.append(utf8_scalar("}"))
    joined = pc.binary_join_element_wise(*parts, _EMPTY)
    bodies: list[bytes] = joined.cast(pa.binary()).to_pylist()
    return bodies


def column_index(schema: pa.Schema, name: str | None) -> int | None:
    """Index of column ``name`` (None for no column). Raises InvalidParameterError (29) when it is missing."""
    if name is None:
        return None
    idx: int = schema.get_field_index(name)
    if idx < 0:
        raise InvalidParameterError(f"column {name!r} is not in the DataFrame (columns: {schema.names})")
    return idx


def _texts(batch: pa.RecordBatch, idx: int | None) -> list[str | None]:
    if idx is None:
        return [None] * batch.num_rows
    return [None if v is None or v == "" else str(v) for v in batch.column(idx).to_pylist()]


def _bodies_of(batch: pa.RecordBatch, name: str) -> list[bytes]:
    column = batch.column(batch.schema.get_field_index(name))
    kind = column.type
    if not (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    ):
        raise InvalidParameterError(f"column {name!r} (the message body) must be binary or string, not {kind}")
    values: list[bytes] = (column if pa.types.is_binary(kind) else column.cast(pa.binary())).to_pylist()
    if any(not v for v in values):
        raise InvalidParameterError(f"column {name!r}: a row has a null or empty body (RocketMQ needs a body)")
    return values


def _properties_of(batch: pa.RecordBatch, name: str | None) -> list[dict[str, str] | None]:
    if name is None:
        return [None] * batch.num_rows
    column = batch.column(batch.schema.get_field_index(name))
    kind = column.type
    if not (pa.types.is_map(kind) and pa.types.is_string(kind.key_type) and pa.types.is_string(kind.item_type)):
        raise InvalidParameterError(f"column {name!r} (the user properties) must be map<string,string>, not {kind}")
    found: list[dict[str, str] | None] = []
    for pairs in column.to_pylist():
        props = {k: v for k, v in pairs or () if v is not None}
        reserved = sorted(set(props) & MessageConst.RESERVED)
        if reserved:
            raise InvalidParameterError(f"column {name!r}: property names {reserved} are reserved by RocketMQ")
        found.append(props or None)
    return found


def _topics_of(batch: pa.RecordBatch, name: str | None) -> list[str | None]:
    topics = _texts(batch, None if name is None else batch.schema.get_field_index(name))
    for topic in {t for t in topics if t is not None}:
        problem = validate_topic(topic)
        if problem is not None:
            raise InvalidParameterError(f"column {name!r}: topic {topic!r}: {problem}")
    return topics


def encode_batch(
    batch: pa.RecordBatch, key_column: str | None, tag_column: str | None, *, topic_option_set: bool = True
) -> list[EncodedRow]:
    """Every row of ``batch`` as an EncodedRow, in order (columns mapped as the module docstring says).
    Raises InvalidParameterError (29) for a missing or competing column, a body column that is not binary/string or
    holds a null/empty value, properties that are not map<string,string> or use a reserved name, an illegal topic,
    or (``topic_option_set`` False) a row without a topic."""
    mapping: ColumnMapping = resolve_columns(
        batch.schema.names, key_column, tag_column, topic_option_set=topic_option_set
    )
    bodies = encode_bodies(batch) if mapping.body is None else _bodies_of(batch, mapping.body)
    keys = _texts(batch, column_index(batch.schema, mapping.keys))
    tags = _texts(batch, column_index(batch.schema, mapping.tag))
    props = _properties_of(batch, mapping.properties)
    topics = _topics_of(batch, mapping.topic)
    if not topic_option_set and None in topics:
        raise InvalidParameterError("column 'topic': a row has no topic and the option topic is not set")
    return [EncodedRow(b, k, t, p, tp) for b, k, t, p, tp in zip(bodies, keys, tags, props, topics, strict=True)]
