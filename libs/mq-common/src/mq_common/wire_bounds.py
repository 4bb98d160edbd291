"""Element-count bounds checked on a request's protobuf wire bytes BEFORE it is parsed.

Parsing allocates per element: a 63 MiB SendBatch of 33 million empty requests (2 bytes each: tag 0x0a, length 0)
costs the upb parser about 3 s and 3.5 GB before any handler could count them. :func:`check_bounds` walks only
the top-level fields of the raw bytes (and the nested messages a :class:`FieldBound` path names), counts the
elements of the bounded repeated and map fields and stops at the first bound exceeded, so a refusal costs at most
``max_count + MAX_OTHER_FIELDS`` field headers, never one allocation per element.

Wire format (protobuf encoding): a field is a varint key ``(field_number << 3) | wire_type`` then, by wire type,
0 a varint, 1 eight bytes, 2 a varint length and that many bytes, 5 four bytes; 3/4 (groups) are not used by
proto3 and count as malformed here. A map field is a repeated length-delimited entry; a packed repeated scalar is
one length-delimited field (its bytes are bounded by the gRPC message size, its count is not checked).
Pure functions; run on the caller's thread (the gRPC deserializer's: the service's loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

MAX_OTHER_FIELDS: Final = 4096
"""Fields other than the bounded ones one scanned message may hold (proto3 requests have a handful)."""
DEFAULT_MAX_ELEMENTS: Final = 10_000
"""Elements of a top-level repeated or map field of a request no bound names (UpdateConsumerOffsets' offsets,
a v2 SendMessage's messages before the gateway's own setting, ...)."""

_WIRE_VARINT: Final = 0
_WIRE_FIXED64: Final = 1
_WIRE_LEN: Final = 2
_WIRE_FIXED32: Final = 5
_MAX_VARINT_BYTES: Final = 10


class Malformed(ValueError):
    """The bytes are not a protobuf message (truncated, a bad varint, a length past the end, a group)."""


class BoundExceeded(ValueError):
    """A bounded field holds more elements or bytes than its :class:`FieldBound` allows; the message says which."""


@dataclass(frozen=True, slots=True)
class FieldBound:
    """At most ``max_count`` elements (and ``max_bytes`` encoded bytes, when set) of the field at ``path``.

    ``path`` is field numbers: every number but the last names a singular message field to descend into (each
    occurrence is scanned), the last the repeated, map or bytes field counted. ``name`` says in the refusal
    which limit it was (the setting's name, e.g. ``max_send_batch_requests``).
    """

    path: tuple[int, ...]
    max_count: int
    name: str
    max_bytes: int | None = None


# A scan plan: field number -> (its bound or None, the plan of its nested message or None).
_Plan = dict[int, tuple[FieldBound | None, "_Plan | None"]]


def build_plan(bounds: Iterable[FieldBound], descriptor: Descriptor | None = None) -> _Plan:
    """The scan plan of ``bounds`` plus, when ``descriptor`` is given, DEFAULT_MAX_ELEMENTS on each of its
    top-level repeated fields no bound names. Raises ValueError on an empty path."""
    plan: _Plan = {}
    for bound in bounds:
        if not bound.path:
            raise ValueError(f"{bound.name}: a FieldBound needs a path")
        level = plan
        for number in bound.path[:-1]:
            own, child = level.get(number, (None, None))
            child = child if child is not None else {}
            level[number] = (own, child)
            level = child
        last = bound.path[-1]
        level[last] = (bound, level.get(last, (None, None))[1])
    if descriptor is not None:
        for field in descriptor.fields:
            if _is_repeated(field) and field.number not in plan:
                plan[field.number] = (FieldBound((field.number,), DEFAULT_MAX_ELEMENTS, field.name), None)
    return plan


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``; Malformed past ``end`` or over 10 bytes."""
    value = 0
    shift = 0
    for index in range(pos, min(end, pos + _MAX_VARINT_BYTES)):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    raise Malformed("truncated or overlong varint")


def _skip(data: bytes, wire_type: int, pos: int, end: int) -> tuple[int, int]:
    """(payload start, payload end) of a field whose key ended at ``pos``."""
    if wire_type == _WIRE_VARINT:
        _, after = _varint(data, pos, end)
        return pos, after
    if wire_type == _WIRE_LEN:
        length, start = _varint(data, pos, end)
        after = start + length
    elif wire_type == _WIRE_FIXED64:
        start, after = pos, pos + 8
    elif wire_type == _WIRE_FIXED32:
        start, after = pos, pos + 4
    else:
        raise Malformed(f"wire type {wire_type} is not used by proto3")
    if after > end:
        raise Malformed("a field runs past the end of its message")
    return start, after


def check_bounds(data: bytes, plan: Mapping[int, tuple[FieldBound | None, _Plan | None]]) -> None:
    """Raise BoundExceeded when a bounded field of ``data`` is over its bound, Malformed when a scanned level is
    not protobuf (a level no plan descends into is left to the parser). Costs O(fields scanned), at most
    ``sum(max_count) + MAX_OTHER_FIELDS`` per level."""
    if plan:
        _check_level(data, 0, len(data), plan)


def _check_level(data: bytes, pos: int, end: int, plan: Mapping[int, tuple[FieldBound | None, _Plan | None]]) -> None:
    counts: dict[int, int] = {}
    sizes: dict[int, int] = {}
    others = 0
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire_type = key >> 3, key & 0x7
        start, pos = _skip(data, wire_type, pos, end)
        bound, child = plan.get(number, (None, None))
        if bound is None:
            others += 1
            if others > MAX_OTHER_FIELDS:
                raise BoundExceeded(f"more than {MAX_OTHER_FIELDS} fields outside the known repeated ones")
        else:
            counts[number] = count = counts.get(number, 0) + 1
            sizes[number] = size = sizes.get(number, 0) + (pos - start)
            _enforce(bound, count, size)
        if child is not None and wire_type == _WIRE_LEN:
            _check_level(data, start, pos, child)


def _enforce(bound: FieldBound, count: int, size: int) -> None:
    if count > bound.max_count:
        raise BoundExceeded(f"more than {bound.max_count} elements in one request ({bound.name})")
    if bound.max_bytes is not None and size > bound.max_bytes:
        raise BoundExceeded(f"more than {bound.max_bytes} bytes in one request ({bound.name})")


def field_path(descriptor: Descriptor, dotted: str) -> tuple[int, ...]:
    """Field numbers of ``dotted`` field names from ``descriptor`` (``"batch.requests"`` -> ``(4, 1)``).
    Raises KeyError on an unknown name, ValueError when a name before the last is not a message field."""
    numbers: list[int] = []
    current: Descriptor | None = descriptor
    for name in dotted.split("."):
        if current is None:
            raise ValueError(f"{dotted}: {numbers[-1]} is not a message field")
        field = current.fields_by_name[name]
        numbers.append(field.number)
        current = field.message_type if field.type == FieldDescriptor.TYPE_MESSAGE and not _is_repeated(field) else None
    return tuple(numbers)


def method_bounds(
    service: ServiceDescriptor, method: str, *bounds: tuple[str, int, str, int | None]
) -> tuple[str, tuple[FieldBound, ...]]:
    """``("/<service>/<method>", FieldBounds)`` from ``(dotted field, max_count, setting name, max_bytes)`` rows,
    for mq_common.grpc_guard.RequestLimits.bounds. Raises KeyError on an unknown method or field."""
    request = service.methods_by_name[method].input_type
    return (
        f"/{service.full_name}/{method}",
        tuple(FieldBound(field_path(request, dotted), count, name, size) for dotted, count, name, size in bounds),
    )
