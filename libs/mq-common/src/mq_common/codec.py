"""The CommitLog message format v1, on disk and on the pull wire.

Mirrors org.apache.rocketmq.common.message.MessageDecoder (decode, messageProperties2String) and
MessageExtEncoder#encode. The byte layout (offsets, sizes, SYSFLAG host bits) is mq_common.record_layout's; this
module encodes and decodes whole records with it.

Pure functions; safe from any thread. Decoding errors raise :class:`MessageDecodeError`.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from mq_common.constants import MAX_PROPERTIES_SIZE_BYTES, MessageConst, MessageSysFlag
from mq_common.record_layout import (
    BODY_LENGTH,
    BODY_LENGTH_BYTES,
    BODY_LENGTH_OFFSETS,
    BORN_HOST_OFFSET,
    HEAD,
    HOST_PORT,
    HOST_PORT_BYTES,
    HOST_V6_FLAGS,
    HOST_V6_SHIFT,
    IPV4_HOST_BYTES,
    IPV6_HOST_BYTES,
    MESSAGE_MAGIC_CODE,
    PHYSICAL_OFFSET,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_BYTES,
    RECONSUME_AND_PREPARED,
    RECONSUME_TIMES_OFFSETS,
    STORE_HOST_OFFSETS,
    STORE_TIMESTAMP,
    STORE_TIMESTAMP_OFFSETS,
    TOPIC_LENGTH_BYTES,
    TOPIC_LENGTH_MAX,
    calc_msg_length,
    host_sysflag_bits,
)

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
_HOST_FIELD_BYTES: Final = (IPV4_HOST_BYTES, IPV6_HOST_BYTES)
MAX_CACHED_HOSTS: Final = 1_024
"""Packed addresses whose text :func:`bytes_to_host` keeps (least recently used dropped)."""


class MessageDecodeError(ValueError):
    """The bytes at a position are not a whole, valid v1 record."""


class CrcMismatchError(MessageDecodeError):
    """BODYCRC does not match the stored body: the record was damaged after it was written."""


def encode_properties(properties: Mapping[str, str]) -> str:
    """MessageDecoder#messageProperties2String: ``key\\x01value\\x02`` for each pair."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items())


def decode_properties(text: str) -> dict[str, str]:
    """MessageDecoder#string2messageProperties; items without a separator are skipped."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        key, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            out[key] = value
    return out


def body_crc(body: bytes | memoryview) -> int:
    """UtilAll#crc32: zlib crc32 with the sign bit cleared (stored in BODYCRC)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def host_to_bytes(host: str, port: int) -> bytes:
    """``host`` (IPv4 or IPv6 literal) and ``port`` as 8 or 20 bytes. Raises ValueError on a bad literal."""
    ip = ipaddress.ip_address(host)
    return ip.packed + HOST_PORT.pack(port)


def bytes_to_host(raw: bytes | bytearray | memoryview) -> tuple[str, int]:
    """Inverse of :func:`host_to_bytes` (8 bytes: IPv4, 20 bytes: IPv6)."""
    if len(raw) not in _HOST_FIELD_BYTES:
        raise MessageDecodeError(f"host field must be 8 or 20 bytes, got {len(raw)}")
    return _ip_text(bytes(raw[:-HOST_PORT_BYTES])), HOST_PORT.unpack_from(raw, len(raw) - HOST_PORT_BYTES)[0]


@functools.lru_cache(maxsize=MAX_CACHED_HOSTS)
def _ip_text(packed: bytes) -> str:
    """The text of a packed IPv4/IPv6 address; cached: a stream of decoded records names a few hosts over and
    over (ipaddress costs microseconds per call)."""
    return str(ipaddress.ip_address(packed))


def split_host_port(addr: str) -> tuple[str, int]:
    """Parse ``"1.2.3.4:10911"`` or ``"[::1]:10911"``. Raises ValueError when malformed."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address must be host:port, got {addr!r}")
    return host.strip("[]"), int(port)


def encode_message(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: bytes,
    store_timestamp_ms: int,
    store_host: bytes,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """One v1 record. ``topic``/``properties`` are UTF-8 bytes, hosts from :func:`host_to_bytes`.

    The host sysflag bits are set from the host lengths. Raises ValueError when topic > 255 bytes or
    properties > 32,767 bytes (the callers map this to MESSAGE_ILLEGAL first).
    """
    if len(topic) > TOPIC_LENGTH_MAX:
        raise ValueError("topic longer than 255 bytes")
    if len(properties) > MAX_PROPERTIES_SIZE_BYTES:
        raise ValueError("properties longer than 32767 bytes")
    sys_flag = (sys_flag & ~HOST_V6_FLAGS) | host_sysflag_bits(born_host, store_host)
    total = calc_msg_length(sys_flag, len(body), len(topic), len(properties))
    parts = [
        HEAD.pack(
            total,
            MESSAGE_MAGIC_CODE,
            body_crc(body) if crc is None else crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp_ms,
        ),
        born_host,
        STORE_TIMESTAMP.pack(store_timestamp_ms),
        store_host,
        RECONSUME_AND_PREPARED.pack(reconsume_times, prepared_transaction_offset),
        BODY_LENGTH.pack(len(body)),
        body,
        bytes((len(topic),)),
        topic,
        PROPERTIES_LENGTH.pack(len(properties)),
        properties,
    ]
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class MessageExt:
    """A stored message as read back. Mirrors org.apache.rocketmq.common.message.MessageExt."""

    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: tuple[str, int]
    store_timestamp_ms: int
    store_host: tuple[str, int]
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(MessageConst.KEYS, "")
        return [k for k in raw.split(MessageConst.KEY_SEPARATOR) if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def offset_msg_id(self) -> str:
        """hex(store host 8|20 bytes + commit log offset 8), upper case (MessageDecoder#createMessageId)."""
        host, port = self.store_host
        return (host_to_bytes(host, port) + PHYSICAL_OFFSET.pack(self.commit_log_offset)).hex().upper()


def decode_message(
    buf: bytes | memoryview | bytearray,
    pos: int = 0,
    *,
    check_crc: bool = True,
    decompress: bool = True,
) -> MessageExt:
    """Decode the record at ``pos``.

    Raises MessageDecodeError for a short, blank or malformed record and CrcMismatchError when the
    body CRC does not match. With ``decompress`` a body stored with COMPRESSED_FLAG is inflated (the flag
    stays set, as in MessageDecoder#decode).
    """
    end = len(buf)
    if pos + HEAD.size > end:
        raise MessageDecodeError(f"truncated record header at {pos}")
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = HEAD.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise MessageDecodeError(f"bad magic {magic:#x} at {pos}")
    if total <= 0 or pos + total > end:
        raise MessageDecodeError(f"record at {pos} claims {total} bytes, {end - pos} available")
    hosts = (sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT
    store_ts_at, store_host_at = pos + STORE_TIMESTAMP_OFFSETS[hosts], pos + STORE_HOST_OFFSETS[hosts]
    reconsume_at = pos + RECONSUME_TIMES_OFFSETS[hosts]
    try:
        born_host = bytes_to_host(buf[pos + BORN_HOST_OFFSET : store_ts_at])
        store_ts = STORE_TIMESTAMP.unpack_from(buf, store_ts_at)[0]
        store_host = bytes_to_host(buf[store_host_at:reconsume_at])
        reconsume, prepared = RECONSUME_AND_PREPARED.unpack_from(buf, reconsume_at)
        p = pos + BODY_LENGTH_OFFSETS[hosts]
        body_len = BODY_LENGTH.unpack_from(buf, p)[0]
        p += BODY_LENGTH_BYTES
        if body_len < 0 or p + body_len > pos + total:
            raise MessageDecodeError(f"bad body length {body_len} at {pos}")
        body = bytes(buf[p : p + body_len])
        p += body_len
        topic_len = buf[p]
        p += TOPIC_LENGTH_BYTES
        topic = bytes(buf[p : p + topic_len]).decode("utf-8")
        p += topic_len
        props_len = PROPERTIES_LENGTH.unpack_from(buf, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        props = bytes(buf[p : p + props_len]).decode("utf-8")
        p += props_len
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, MessageDecodeError):
            raise
        raise MessageDecodeError(f"malformed record at {pos}: {exc}") from exc
    if p - pos != total:
        raise MessageDecodeError(f"record at {pos}: fields take {p - pos} bytes, TOTALSIZE says {total}")
    if check_crc and body_crc(body) != crc:
        raise CrcMismatchError(f"body CRC mismatch at physical offset {phys} (record at {pos})")
    if decompress and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise MessageDecodeError(f"compressed body at {pos} does not inflate: {exc}") from exc
    return MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=decode_properties(props),
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=phys,
        store_size=total,
        sys_flag=sys_flag,
        born_timestamp_ms=born_ts,
        born_host=born_host,
        store_timestamp_ms=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body_crc=crc,
    )


def iter_messages(blob: bytes | memoryview, *, check_crc: bool = True) -> Iterator[MessageExt]:
    """Decode concatenated records (the PullMessage ``message_bytes`` field)."""
    pos = 0
    while pos < len(blob):
        msg = decode_message(blob, pos, check_crc=check_crc)
        pos += msg.store_size
        yield msg
