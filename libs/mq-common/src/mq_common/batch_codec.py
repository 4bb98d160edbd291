"""The MessageBatch body: the messages of one SEND_BATCH_MESSAGE request (one topic, one queue).

Mirrors org.apache.rocketmq.common.message.MessageDecoder#encodeMessage / #encodeMessages / #decodeMessages.
Big-endian, one item per message, items back to back:

    offset  size  field
    0       4     TOTALSIZE (this item, bytes)
    4       4     MAGICCODE (0)
    8       4     BODYCRC (0: the broker computes it when it stores the message)
    12      4     FLAG
    16      4     BODYLEN
    20      n     BODY
    ..      2     PROPERTIESLENGTH (unsigned, at most 32,767)
    ..      n     PROPERTIES ("key\\x01value\\x02" ..., UTF-8)

Pure functions; safe from any thread. A malformed body raises :class:`mq_common.codec.MessageDecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageDecodeError
from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES

_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_PROPS_LEN: Final = struct.Struct(">H")
BATCH_ITEM_OVERHEAD_BYTES: Final = _HEAD.size + _PROPS_LEN.size  # 22


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One decoded message of a batch body: FLAG, BODY and the PROPERTIES text."""

    flag: int
    body: bytes
    properties: str


def encode_batch_item(body: bytes, properties: str, flag: int = 0) -> bytes:
    """One item (MessageDecoder#encodeMessage). Raises ValueError when the properties pass 32,767 bytes."""
    props = properties.encode("utf-8")
    if len(props) > MAX_PROPERTIES_SIZE_BYTES:
        raise ValueError(f"properties are {len(props)} bytes, at most {MAX_PROPERTIES_SIZE_BYTES}")
    total = BATCH_ITEM_OVERHEAD_BYTES + len(body) + len(props)
    return b"".join((_HEAD.pack(total, 0, 0, flag, len(body)), body, _PROPS_LEN.pack(len(props)), props))


def encode_batch(items: Iterable[tuple[bytes, str, int]]) -> bytes:
    """The body of a batch from (body, properties text, flag) per message (MessageDecoder#encodeMessages).
    Raises ValueError when a message's properties pass 32,767 bytes. One join for the whole body."""
    parts: list[bytes] = []
    append = parts.append
    head, props_len = _HEAD.pack, _PROPS_LEN.pack
    for body, properties, flag in items:
        props = properties.encode("utf-8")
        if len(props) > MAX_PROPERTIES_SIZE_BYTES:
            raise ValueError(f"properties are {len(props)} bytes, at most {MAX_PROPERTIES_SIZE_BYTES}")
        append(head(BATCH_ITEM_OVERHEAD_BYTES + len(body) + len(props), 0, 0, flag, len(body)))
        append(body)
        append(props_len(len(props)))
        append(props)
    return b"".join(parts)


def decode_batch(body: bytes | memoryview) -> list[BatchItem]:
    """Every item of a batch body, in order (MessageDecoder#decodeMessages).

    Raises MessageDecodeError when an item's TOTALSIZE does not match its lengths or runs past the body.
    """
    view = memoryview(body)
    out: list[BatchItem] = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < BATCH_ITEM_OVERHEAD_BYTES:
            raise MessageDecodeError(f"batch item at {pos}: {end - pos} bytes left, a header needs 22")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(view, pos)
        body_at = pos + _HEAD.size
        if body_len < 0 or total > end - pos or body_at + body_len + _PROPS_LEN.size > pos + total:
            raise MessageDecodeError(f"batch item at {pos}: TOTALSIZE {total} and BODYLEN {body_len} do not fit")
        (props_len,) = _PROPS_LEN.unpack_from(view, body_at + body_len)
        if BATCH_ITEM_OVERHEAD_BYTES + body_len + props_len != total:
            raise MessageDecodeError(f"batch item at {pos}: TOTALSIZE {total} does not match its lengths")
        props_at = body_at + body_len + _PROPS_LEN.size
        try:
            properties = bytes(view[props_at : props_at + props_len]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageDecodeError(f"batch item at {pos}: properties are not UTF-8") from exc
        out.append(BatchItem(flag, bytes(view[body_at : body_at + body_len]), properties))
        pos += total
    return out
