"""The CommitLog message record (format v1), written once: every field's offset and size, the Structs that read them.

Mirrors org.apache.rocketmq.store.CommitLog#calMsgLength, org.apache.rocketmq.common.message.MessageDecoder#decode
and org.apache.rocketmq.store.MessageExtEncoder#encode. Big-endian; ``b`` and ``s`` are the born and store host
lengths (IPV4_HOST_BYTES 8: address 4 + port 4, or IPV6_HOST_BYTES 20: address 16 + port 4, chosen by the SYSFLAG
bits BORN_HOST_V6_FLAG and STORE_HOST_V6_FLAG), ``n``, ``t``, ``p`` the body, topic and properties lengths:

    offset           size    field                          name here
    0                4       TOTALSIZE (i32, whole record)  TOTAL_SIZE_OFFSET
    4                4       MAGICCODE (u32)                MAGIC_CODE_OFFSET  (MESSAGE_MAGIC_CODE)
    8                4       BODYCRC (i32)                  BODY_CRC_OFFSET    (zlib crc32 & 0x7FFFFFFF)
    12               4       QUEUEID (i32)                  QUEUE_ID_OFFSET
    16               4       FLAG (i32)                     FLAG_OFFSET
    20               8       QUEUEOFFSET (i64)              QUEUE_OFFSET_OFFSET (logical, in the ConsumeQueue)
    28               8       PHYSICALOFFSET (i64)           PHYSICAL_OFFSET_OFFSET (of this record in the CommitLog)
    36               4       SYSFLAG (i32)                  SYS_FLAG_OFFSET    (MessageSysFlag bits)
    40               8       BORNTIMESTAMP (i64, ms)        BORN_TIMESTAMP_OFFSET
    48               b       BORNHOST                       BORN_HOST_OFFSET
    48+b             8       STORETIMESTAMP (i64, ms)       STORE_TIMESTAMP_OFFSETS[v]
    56+b             s       STOREHOST                      STORE_HOST_OFFSETS[v]
    56+b+s           4       RECONSUMETIMES (i32)           RECONSUME_TIMES_OFFSETS[v]
    60+b+s           8       PREPAREDTRANSACTIONOFFSET      PREPARED_TRANSACTION_OFFSET_OFFSETS[v]
    68+b+s           4       BODYLEN n (i32)                BODY_LENGTH_OFFSETS[v]
    72+b+s           n       BODY                           BODY_OFFSETS[v]
    72+b+s+n         1       TOPICLEN t (u8)
    73+b+s+n         t       TOPIC (UTF-8)
    73+b+s+n+t       2       PROPERTIESLEN p (u16)
    75+b+s+n+t       p       PROPERTIES ("key\\x01value\\x02" ..., UTF-8)

TOTALSIZE = RECORD_FIXED_BYTES (75) + b + s + n + t + p. ``v`` is :func:`host_variant` of SYSFLAG (0: both hosts
IPv4, 1: born IPv6, 2: store IPv6, 3: both); the ``*_OFFSETS`` tuples hold the offset for each, so a hot loop pays
one index, no branch. The END_OF_FILE filler that ends a CommitLog file is ``[remaining bytes i32][BLANK_MAGIC_CODE
u32]`` (END_FILE_MIN_BLANK_LENGTH bytes; the rest of the file is left as it is).

The broker's C loops read the same names from ``mq_broker/store/_record_layout.h``, generated from this module by
``python -m mq_broker.store.record_layout_header``; tests/broker/test_broker_record_layout_header.py fails when the
two differ.
Constants and precomputed Structs only; safe from any thread.
"""

from __future__ import annotations

import struct
from typing import Final

from mq_common.constants import MessageSysFlag

MESSAGE_MAGIC_CODE: Final = 0xDAA320A7
"""MAGICCODE of a message record (MessageDecoder#MESSAGE_MAGIC_CODE, v1)."""
BLANK_MAGIC_CODE: Final = 0xCBD43194
"""MAGICCODE of the END_OF_FILE filler that ends a CommitLog file (CommitLog#BLANK_MAGIC_CODE)."""

# --- the fixed fields: sizes in bytes, offsets derived -----------------------------------------------------------
TOTAL_SIZE_BYTES: Final = 4
MAGIC_CODE_BYTES: Final = 4
BODY_CRC_BYTES: Final = 4
QUEUE_ID_BYTES: Final = 4
FLAG_BYTES: Final = 4
QUEUE_OFFSET_BYTES: Final = 8
PHYSICAL_OFFSET_BYTES: Final = 8
SYS_FLAG_BYTES: Final = 4
BORN_TIMESTAMP_BYTES: Final = 8
STORE_TIMESTAMP_BYTES: Final = 8
RECONSUME_TIMES_BYTES: Final = 4
PREPARED_TRANSACTION_OFFSET_BYTES: Final = 8
BODY_LENGTH_BYTES: Final = 4
TOPIC_LENGTH_BYTES: Final = 1
PROPERTIES_LENGTH_BYTES: Final = 2
TOPIC_LENGTH_MAX: Final = (1 << (8 * TOPIC_LENGTH_BYTES)) - 1
"""The longest topic (UTF-8 bytes) the one-byte TOPICLEN can say; the broker's TopicValidator limit (127) is lower."""

TOTAL_SIZE_OFFSET: Final = 0
MAGIC_CODE_OFFSET: Final = TOTAL_SIZE_OFFSET + TOTAL_SIZE_BYTES
BODY_CRC_OFFSET: Final = MAGIC_CODE_OFFSET + MAGIC_CODE_BYTES
QUEUE_ID_OFFSET: Final = BODY_CRC_OFFSET + BODY_CRC_BYTES
FLAG_OFFSET: Final = QUEUE_ID_OFFSET + QUEUE_ID_BYTES
QUEUE_OFFSET_OFFSET: Final = FLAG_OFFSET + FLAG_BYTES
PHYSICAL_OFFSET_OFFSET: Final = QUEUE_OFFSET_OFFSET + QUEUE_OFFSET_BYTES
SYS_FLAG_OFFSET: Final = PHYSICAL_OFFSET_OFFSET + PHYSICAL_OFFSET_BYTES
BORN_TIMESTAMP_OFFSET: Final = SYS_FLAG_OFFSET + SYS_FLAG_BYTES
BORN_HOST_OFFSET: Final = BORN_TIMESTAMP_OFFSET + BORN_TIMESTAMP_BYTES
"""The first field whose offset is the same in every record; the later ones move with the host lengths."""

# --- the host fields ---------------------------------------------------------------------------------------------
HOST_PORT_BYTES: Final = 4
IPV4_HOST_BYTES: Final = 4 + HOST_PORT_BYTES
IPV6_HOST_BYTES: Final = 16 + HOST_PORT_BYTES
BORN_HOST_V6_FLAG: Final = MessageSysFlag.BORNHOST_V6_FLAG
"""SYSFLAG bit: BORNHOST is IPV6_HOST_BYTES long (else IPV4_HOST_BYTES)."""
STORE_HOST_V6_FLAG: Final = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
"""SYSFLAG bit: STOREHOST is IPV6_HOST_BYTES long (else IPV4_HOST_BYTES)."""
HOST_V6_FLAGS: Final = BORN_HOST_V6_FLAG | STORE_HOST_V6_FLAG
HOST_V6_SHIFT: Final = 4
"""``(sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT`` is the host variant 0..3 (see :func:`host_variant`)."""
assert BORN_HOST_V6_FLAG == 1 << HOST_V6_SHIFT
assert STORE_HOST_V6_FLAG == 2 << HOST_V6_SHIFT

# --- sizes of whole records --------------------------------------------------------------------------------------
RECORD_FIXED_BYTES: Final = (
    BORN_HOST_OFFSET
    + STORE_TIMESTAMP_BYTES
    + RECONSUME_TIMES_BYTES
    + PREPARED_TRANSACTION_OFFSET_BYTES
    + BODY_LENGTH_BYTES
    + TOPIC_LENGTH_BYTES
    + PROPERTIES_LENGTH_BYTES
)
"""Every fixed-size field: a record is this + both host lengths + body, topic and properties lengths."""
MIN_RECORD_BYTES: Final = RECORD_FIXED_BYTES + 2 * IPV4_HOST_BYTES
"""The smallest record: IPv4 hosts, empty body, topic and properties."""
END_FILE_MIN_BLANK_LENGTH: Final = TOTAL_SIZE_BYTES + MAGIC_CODE_BYTES
"""The END_OF_FILE filler's TOTALSIZE + BLANK_MAGIC_CODE; a file always keeps room for it (CommitLog's name)."""

# --- offsets that move with the hosts, one per host variant ------------------------------------------------------
BORN_HOST_LENGTHS: Final = (IPV4_HOST_BYTES, IPV6_HOST_BYTES, IPV4_HOST_BYTES, IPV6_HOST_BYTES)
STORE_HOST_LENGTHS: Final = (IPV4_HOST_BYTES, IPV4_HOST_BYTES, IPV6_HOST_BYTES, IPV6_HOST_BYTES)
STORE_TIMESTAMP_OFFSETS: Final = tuple(BORN_HOST_OFFSET + born for born in BORN_HOST_LENGTHS)
STORE_HOST_OFFSETS: Final = tuple(at + STORE_TIMESTAMP_BYTES for at in STORE_TIMESTAMP_OFFSETS)
RECONSUME_TIMES_OFFSETS: Final = tuple(
    at + store for at, store in zip(STORE_HOST_OFFSETS, STORE_HOST_LENGTHS, strict=True)
)
PREPARED_TRANSACTION_OFFSET_OFFSETS: Final = tuple(at + RECONSUME_TIMES_BYTES for at in RECONSUME_TIMES_OFFSETS)
BODY_LENGTH_OFFSETS: Final = tuple(at + PREPARED_TRANSACTION_OFFSET_BYTES for at in PREPARED_TRANSACTION_OFFSET_OFFSETS)
BODY_OFFSETS: Final = tuple(at + BODY_LENGTH_BYTES for at in BODY_LENGTH_OFFSETS)
EMPTY_RECORD_BYTES: Final = tuple(
    RECORD_FIXED_BYTES + born + store for born, store in zip(BORN_HOST_LENGTHS, STORE_HOST_LENGTHS, strict=True)
)
"""The record size with empty body, topic and properties, per host variant."""

# --- Structs -----------------------------------------------------------------------------------------------------
HEAD: Final = struct.Struct(">iIiiiqqiq")
"""TOTALSIZE, MAGICCODE (unsigned), BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP."""
TOTAL_AND_MAGIC: Final = struct.Struct(">iI")
"""TOTALSIZE and MAGICCODE: the start of every record, and the whole END_OF_FILE filler."""
SYS_FLAG: Final = struct.Struct(">i")
PHYSICAL_OFFSET: Final = struct.Struct(">q")
STORE_TIMESTAMP: Final = struct.Struct(">q")
HOST_PORT: Final = struct.Struct(">I")
RECONSUME_AND_PREPARED: Final = struct.Struct(">iq")
"""RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET."""
BODY_LENGTH: Final = struct.Struct(">i")
PROPERTIES_LENGTH: Final = struct.Struct(">H")

assert HEAD.size == BORN_HOST_OFFSET
assert TOTAL_AND_MAGIC.size == END_FILE_MIN_BLANK_LENGTH
assert SYS_FLAG.size == SYS_FLAG_BYTES
assert PHYSICAL_OFFSET.size == PHYSICAL_OFFSET_BYTES
assert STORE_TIMESTAMP.size == STORE_TIMESTAMP_BYTES
assert HOST_PORT.size == HOST_PORT_BYTES
assert RECONSUME_AND_PREPARED.size == RECONSUME_TIMES_BYTES + PREPARED_TRANSACTION_OFFSET_BYTES
assert BODY_LENGTH.size == BODY_LENGTH_BYTES
assert PROPERTIES_LENGTH.size == PROPERTIES_LENGTH_BYTES


def host_variant(sys_flag: int) -> int:
    """0..3, the index of the ``*_OFFSETS`` tuples: bit 0 set when BORNHOST is IPv6, bit 1 when STOREHOST is."""
    return (sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT


def host_sysflag_bits(born_host: bytes, store_host: bytes) -> int:
    """The SYSFLAG bits that say which of the packed host fields (8 or 20 bytes) are IPv6."""
    bits = 0
    if len(born_host) == IPV6_HOST_BYTES:
        bits |= BORN_HOST_V6_FLAG
    if len(store_host) == IPV6_HOST_BYTES:
        bits |= STORE_HOST_V6_FLAG
    return bits


def calc_msg_length(sys_flag: int, body_len: int, topic_len: int, properties_len: int) -> int:
    """CommitLog#calMsgLength: the record size in bytes for the given SYSFLAG (its host bits) and field lengths."""
    return EMPTY_RECORD_BYTES[(sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT] + body_len + topic_len + properties_len
