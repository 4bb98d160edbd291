"""A grammar of the services' requests built from their proto descriptors: random valid-shaped messages of any
request type, and the hostile byte strings made from them (random bytes, truncations, oversized tails, another
RPC's request, extreme numbers, huge repeated fields). Everything comes from one seeded random.Random, so a run is
the same run every time (derandomized)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

MAX_DEPTH: Final = 4
INT32_EXTREMES: Final = (0, 1, -1, 2**31 - 1, -(2**31))
INT64_EXTREMES: Final = (0, 1, -1, 2**63 - 1, -(2**63))
UINT_EXTREMES: Final = (0, 1, 2**32 - 1)
UINT64_EXTREMES: Final = (0, 1, 2**64 - 1)
WORDS: Final = (
    "",
    "FuzzTopic",
    "TBW102",
    "%RETRY%FuzzGroup",
    "%DLQ%FuzzGroup",
    "SCHEDULE_TOPIC_XXXX",
    "FuzzGroup",
    "broker-a",
    "DefaultCluster",
    "127.0.0.1:1",
    "a" * 300,
    "\u0000\u00ff\ufffd",
    "topic with spaces",
    "../../etc",
)

# Hostile cases: what a request's bytes are made of.
SHAPED: Final = "shaped"
RANDOM_BYTES: Final = "random_bytes"
TRUNCATED: Final = "truncated"
OVERSIZED: Final = "oversized"
WRONG_TYPE: Final = "wrong_type"
HUGE_REPEATED: Final = "huge_repeated"
HOSTILE_CASES: Final = (RANDOM_BYTES, TRUNCATED, OVERSIZED, WRONG_TYPE, HUGE_REPEATED)


@dataclass(frozen=True, slots=True)
class FuzzRequest:
    """One request's bytes for ``method`` and the case that made them."""

    method: MethodDescriptor
    case: str
    data: bytes


def message_class(descriptor: Descriptor) -> type[Message]:
    cls: type[Message] = GetMessageClass(descriptor)
    return cls


class Grammar:
    """Random messages of any type from ``rng``; bodies at most ``max_body_bytes``."""

    def __init__(self, rng: random.Random, max_body_bytes: int = 8192) -> None:
        self.rng = rng
        self.max_body_bytes = max_body_bytes

    def message(self, descriptor: Descriptor, depth: int = 0) -> Message:
        """A message of ``descriptor`` with a random subset of its fields set to random values."""
        msg = message_class(descriptor)()
        for field in descriptor.fields:
            if self.rng.random() < 0.35 or (depth >= MAX_DEPTH and field.type == FieldDescriptor.TYPE_MESSAGE):
                continue
            self._set(msg, field, depth)
        return msg

    def _set(self, msg: Message, field: FieldDescriptor, depth: int) -> None:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            container: Any = getattr(msg, field.name)
            value_field = field.message_type.fields_by_name["value"]
            for _ in range(self.rng.randint(0, 3)):
                key = self._scalar(field.message_type.fields_by_name["key"])
                if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                    container[key].CopyFrom(self.message(value_field.message_type, depth + 1))
                else:
                    container[key] = self._scalar(value_field)
            return
        if field.is_repeated:
            repeated: Any = getattr(msg, field.name)
            for _ in range(self.rng.randint(0, 3)):
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    repeated.add().CopyFrom(self.message(field.message_type, depth + 1))
                else:
                    repeated.append(self._scalar(field))
            return
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(msg, field.name).CopyFrom(self.message(field.message_type, depth + 1))
            return
        setattr(msg, field.name, self._scalar(field))

    def _scalar(self, field: FieldDescriptor) -> Any:
        pick: Callable[[], Any] | None = _SCALARS.get(field.type)
        if pick is not None:
            return pick(self)
        if field.type == FieldDescriptor.TYPE_ENUM:
            values = [v.number for v in field.enum_type.values]
            return self.rng.choice(values)
        if field.type == FieldDescriptor.TYPE_BYTES:
            size = self.rng.choice((0, 1, 16, self.max_body_bytes))
            return self.rng.randbytes(size)
        if field.type == FieldDescriptor.TYPE_STRING:
            return self.rng.choice(WORDS)
        if field.type == FieldDescriptor.TYPE_BOOL:
            return self.rng.random() < 0.5
        return self.rng.choice((0.0, -1.0, 1e308))

    def hostile(self, method: MethodDescriptor, case: str, others: list[Descriptor]) -> FuzzRequest:
        """The bytes of ``case`` for ``method`` (``others``: request types of the other RPCs, for WRONG_TYPE)."""
        rng = self.rng
        shaped = self.message(method.input_type).SerializeToString()
        if case == SHAPED:
            return FuzzRequest(method, case, shaped)
        if case == RANDOM_BYTES:
            return FuzzRequest(method, case, rng.randbytes(rng.choice((1, 7, 64, 4096))))
        if case == TRUNCATED:
            return FuzzRequest(method, case, shaped[: rng.randint(0, max(0, len(shaped) - 1))] + b"\x0a\xff")
        if case == OVERSIZED:
            # A length prefix far past the end, then a long tail of junk.
            return FuzzRequest(method, case, shaped + b"\x12\xff\xff\xff\x7f" + rng.randbytes(65_536))
        if case == WRONG_TYPE:
            return FuzzRequest(method, case, self.message(rng.choice(others)).SerializeToString())
        if case == HUGE_REPEATED:
            return FuzzRequest(method, case, huge_repeated(method.input_type, rng))
        raise ValueError(f"unknown case {case}")


def huge_repeated(descriptor: Descriptor, rng: random.Random, count: int = 200_000) -> bytes:
    """``count`` empty elements of a repeated field of ``descriptor`` (its first one; field 1 when it has none):
    each element 2 bytes (key, length 0 for a message, value 0 for a scalar)."""
    repeated = [f for f in descriptor.fields if f.is_repeated]
    field = rng.choice(repeated) if repeated else None
    number = field.number if field is not None else 1
    wire_type = 2 if field is None or field.type in _LENGTH_DELIMITED else 0
    key = varint((number << 3) | wire_type)
    return (key + b"\x00") * count


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_LENGTH_DELIMITED: Final = frozenset(
    {FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES}
)
_SCALARS: Final[dict[int, Callable[[Grammar], Any]]] = {
    FieldDescriptor.TYPE_INT32: lambda g: g.rng.choice((*INT32_EXTREMES, g.rng.randint(-1000, 100_000))),
    FieldDescriptor.TYPE_SINT32: lambda g: g.rng.choice(INT32_EXTREMES),
    FieldDescriptor.TYPE_SFIXED32: lambda g: g.rng.choice(INT32_EXTREMES),
    FieldDescriptor.TYPE_INT64: lambda g: g.rng.choice((*INT64_EXTREMES, g.rng.randint(-1000, 10**13))),
    FieldDescriptor.TYPE_SINT64: lambda g: g.rng.choice(INT64_EXTREMES),
    FieldDescriptor.TYPE_SFIXED64: lambda g: g.rng.choice(INT64_EXTREMES),
    FieldDescriptor.TYPE_UINT32: lambda g: g.rng.choice(UINT_EXTREMES),
    FieldDescriptor.TYPE_FIXED32: lambda g: g.rng.choice(UINT_EXTREMES),
    FieldDescriptor.TYPE_UINT64: lambda g: g.rng.choice(UINT64_EXTREMES),
    FieldDescriptor.TYPE_FIXED64: lambda g: g.rng.choice(UINT64_EXTREMES),
}
