"""The CommitLog message format v1, on disk and on the pull wire.

Mirrors org.apache.rocketmq.common.message.MessageDecoder and CommitLog#calMsgLength. Big-endian layout:

    offset  size      field
    0       4         TOTALSIZE (whole record, bytes)
    4       4         MAGICCODE 0xDAA320A7 (0xCBD43194 marks the END_OF_FILE blank)
    8       4         BODYCRC (zlib crc32 of the stored body & 0x7FFFFFFF)
    12      4         QUEUEID
    16      4         FLAG
    20      8         QUEUEOFFSET (logical offset in the ConsumeQueue)
    28      8         PHYSICALOFFSET (offset of this record in the CommitLog)
    36      4         SYSFLAG (MessageSysFlag bits)
    40      8         BORNTIMESTAMP (ms since the epoch)
    48      8 | 20    BORNHOST (IPv4 4 + port 4, or IPv6 16 + port 4 when SYSFLAG has BORNHOST_V6_FLAG)
    ..      8         STORETIMESTAMP (ms)
    ..      8 | 20    STOREHOST (likewise with STOREHOSTADDRESS_V6_FLAG)
    ..      4         RECONSUMETIMES
    ..      8         PREPAREDTRANSACTIONOFFSET
    ..      4 + n     BODYLEN + BODY
    ..      1 + n     TOPICLEN + TOPIC (UTF-8)
    ..      2 + n     PROPERTIESLEN + PROPERTIES ("key\\x01value\\x02" ..., UTF-8)

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

MESSAGE_MAGIC_CODE: Final = 0xDAA320A7
BLANK_MAGIC_CODE: Final = 0xCBD43194
NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
BORN_HOST_POS: Final = 48
# Bytes before BODYLEN not counting the two host fields.
_FIXED_BYTES: Final = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8
BLANK_RECORD_MIN_BYTES: Final = 8

_HEAD: Final = struct.Struct(">iIiiiqqiq")  # TOTALSIZE..BORNTIMESTAMP (48 bytes)
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
MAX_CACHED_HOSTS: Final = 1_024
"""Packed addresses whose text :func:`bytes_to_host` keeps (least recently used dropped)."""
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")
_TAIL: Final = struct.Struct(">iq")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET


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
    return ip.packed + _U32.pack(port)


def bytes_to_host(raw: bytes | bytearray | memoryview) -> tuple[str, int]:
    """Inverse of :func:`host_to_bytes` (8 bytes: IPv4, 20 bytes: IPv6)."""
    if len(raw) not in (8, 20):
        raise MessageDecodeError(f"host field must be 8 or 20 bytes, got {len(raw)}")
    return _ip_text(bytes(raw[:-4])), _U32.unpack_from(raw, len(raw) - 4)[0]


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


def host_sysflag_bits(born_host: bytes, store_host: bytes) -> int:
    """The SYSFLAG bits that say which host fields are IPv6."""
    bits = 0
    if len(born_host) == 20:
        bits |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(store_host) == 20:
        bits |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return bits


def calc_msg_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int) -> int:
    """CommitLog#calMsgLength: the record size in bytes for the given field lengths."""
    born = 20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
    return _FIXED_BYTES + born + store + 4 + body_len + 1 + topic_len + 2 + properties_len


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
    if len(topic) > 255:
        raise ValueError("topic longer than 255 bytes")
    if len(properties) > MAX_PROPERTIES_SIZE_BYTES:
        raise ValueError("properties longer than 32767 bytes")
    sys_flag = (sys_flag & ~(MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)) | (
        host_sysflag_bits(born_host, store_host)
    )
    total = calc_msg_length(sys_flag, len(body), len(topic), len(properties))
    parts = [
        _HEAD.pack(
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
        _I64.pack(store_timestamp_ms),
        store_host,
        _TAIL.pack(reconsume_times, prepared_transaction_offset),
        _I32.pack(len(body)),
        body,
        bytes((len(topic),)),
        topic,
        _U16.pack(len(properties)),
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
        return (host_to_bytes(host, port) + _I64.pack(self.commit_log_offset)).hex().upper()


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
    if pos + _HEAD.size > end:
        raise MessageDecodeError(f"truncated record header at {pos}")
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = _HEAD.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise MessageDecodeError(f"bad magic {magic:#x} at {pos}")
    if total <= 0 or pos + total > end:
        raise MessageDecodeError(f"record at {pos} claims {total} bytes, {end - pos} available")
    p = pos + _HEAD.size
    born_len = 20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8
    store_len = 20 if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
    try:
        born_host = bytes_to_host(buf[p : p + born_len])
        p += born_len
        store_ts = _I64.unpack_from(buf, p)[0]
        p += 8
        store_host = bytes_to_host(buf[p : p + store_len])
        p += store_len
        reconsume, prepared = _TAIL.unpack_from(buf, p)
        p += _TAIL.size
        body_len = _I32.unpack_from(buf, p)[0]
        p += 4
        if body_len < 0 or p + body_len > pos + total:
            raise MessageDecodeError(f"bad body length {body_len} at {pos}")
        body = bytes(buf[p : p + body_len])
        p += body_len
        topic_len = buf[p]
        p += 1
        topic = bytes(buf[p : p + topic_len]).decode("utf-8")
        p += topic_len
        props_len = _U16.unpack_from(buf, p)[0]
        p += 2
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
