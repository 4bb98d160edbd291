"""A half message read from its raw CommitLog record, without decoding it whole.

A whole-transaction commit (mq_broker.transaction.transactional_message_service) turns each half message into its
real message: the body, born host and properties text are carried over as stored (sliced from the record, not
decoded into a MessageExt with a properties dict and encoded again), the topic and queue come from REAL_TOPIC /
REAL_QID, and TRAN_MSG, REAL_TOPIC, REAL_QID and TRAN_PREPARED_QUEUE_OFFSET are cut out of the properties text. The
records are the same as EndTransactionProcessor#endMessageTransaction's (the tests compare them with
mq_broker.transaction.half_message.committed_message). The index of whole transactions reads only the properties
text (:func:`record_properties`). Layout: mq_common.record_layout (format v1). Pure; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mq_common.codec import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageDecodeError, body_crc
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.record_layout import (
    BODY_LENGTH,
    BODY_LENGTH_BYTES,
    BODY_LENGTH_OFFSETS,
    BORN_HOST_OFFSET,
    HEAD,
    HOST_V6_FLAGS,
    HOST_V6_SHIFT,
    MESSAGE_MAGIC_CODE,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_BYTES,
    RECONSUME_AND_PREPARED,
    RECONSUME_TIMES_OFFSETS,
    STORE_TIMESTAMP_OFFSETS,
    TOPIC_LENGTH_BYTES,
)

from mq_broker.store.message import MessageExtBrokerInner, tags_string_to_tags_code
from mq_broker.transaction.half_message import PREPARED_QUEUE_OFFSET, HalfMessageError

_TYPE_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_NOT_COMMITTED: Final = (
    MessageConst.REAL_TOPIC,
    MessageConst.REAL_QUEUE_ID,
    MessageConst.TRANSACTION_PREPARED,
    PREPARED_QUEUE_OFFSET,
)
"""The properties a committed message does not carry over from its half message."""
_NOT_COMMITTED_PREFIXES: Final = tuple(key + NAME_VALUE_SEPARATOR for key in _NOT_COMMITTED)


def property_value(properties: str, key: str) -> str | None:
    """The value of ``key`` in a ``key\\x01value\\x02`` properties text (the first one), None when absent."""
    needle = key + NAME_VALUE_SEPARATOR
    if properties.startswith(needle):
        start = len(needle)
    else:
        at = properties.find(PROPERTY_SEPARATOR + needle)
        if at < 0:
            return None
        start = at + 1 + len(needle)
    end = properties.find(PROPERTY_SEPARATOR, start)
    return properties[start:] if end < 0 else properties[start:end]


def without_properties(properties: str, keys: Iterable[str]) -> str:
    """``properties`` (a ``key\\x01value\\x02`` text) without the pairs of ``keys`` (every occurrence), the others
    in their order."""
    prefixes = tuple(key + NAME_VALUE_SEPARATOR for key in keys)
    return PROPERTY_SEPARATOR.join(
        [item for item in properties.split(PROPERTY_SEPARATOR) if not item.startswith(prefixes)]
    )


@dataclass(frozen=True, slots=True)
class HalfRecord:
    """The fields of a stored half message a commit needs: ``born_host`` as stored (8 or 20 bytes),
    ``properties`` the ``key\\x01value\\x02`` text, ``body`` as stored (compressed when ``sys_flag`` says so),
    ``raw`` the whole record."""

    topic: str
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    flag: int
    born_timestamp_ms: int
    born_host: bytes
    reconsume_times: int
    body: bytes
    properties: str
    raw: bytes

    def get(self, key: str) -> str:
        """The value of property ``key`` ("" when absent)."""
        return property_value(self.properties, key) or ""

    @property
    def identity(self) -> int:
        """The transaction identity (mq_broker.transaction.transaction_state.identity_of): TRAN_PREPARED_QUEUE_OFFSET
        of a check copy, else the record's own queue offset."""
        text = property_value(self.properties, PREPARED_QUEUE_OFFSET) or ""
        return int(text) if text.isdigit() else self.queue_offset


def parse_half_record(raw: bytes, *, check_crc: bool = True) -> HalfRecord:
    """The fields of the v1 record ``raw`` (one whole record). Raises MessageDecodeError for a short, malformed or
    (``check_crc``) damaged record."""
    try:
        total, magic, crc, _queue_id, flag, queue_offset, phys, sys_flag, born_ts = HEAD.unpack_from(raw, 0)
        if magic != MESSAGE_MAGIC_CODE or total != len(raw):
            raise MessageDecodeError(f"not a whole record (magic {magic:#x}, {total} of {len(raw)} bytes)")
        hosts = (sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT
        born_host = raw[BORN_HOST_OFFSET : STORE_TIMESTAMP_OFFSETS[hosts]]
        reconsume = RECONSUME_AND_PREPARED.unpack_from(raw, RECONSUME_TIMES_OFFSETS[hosts])[0]
        p = BODY_LENGTH_OFFSETS[hosts]
        body_len = BODY_LENGTH.unpack_from(raw, p)[0]
        p += BODY_LENGTH_BYTES
        body = raw[p : p + body_len]
        p += body_len
        topic_len = raw[p]
        p += TOPIC_LENGTH_BYTES
        topic = raw[p : p + topic_len].decode("utf-8")
        p += topic_len
        props_len = PROPERTIES_LENGTH.unpack_from(raw, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        properties = raw[p : p + props_len].decode("utf-8")
    except (IndexError, UnicodeDecodeError, ValueError, struct.error) as exc:
        if isinstance(exc, MessageDecodeError):
            raise
        raise MessageDecodeError(f"malformed record: {exc}") from exc
    if body_len < 0 or p + props_len != total:
        raise MessageDecodeError(f"record fields take {p + props_len} bytes, TOTALSIZE says {total}")
    if check_crc and body_crc(body) != crc:
        raise MessageDecodeError(f"body CRC mismatch at physical offset {phys}")
    return HalfRecord(topic, queue_offset, phys, sys_flag, flag, born_ts, born_host, reconsume, body, properties, raw)


def record_properties(raw: bytes) -> tuple[int, int, str]:
    """(queue offset, CommitLog offset, properties text) of the v1 record ``raw``, the body not read. Raises
    MessageDecodeError for a malformed record."""
    try:
        total, magic, _crc, _queue_id, _flag, queue_offset, phys, sys_flag, _born = HEAD.unpack_from(raw, 0)
        if magic != MESSAGE_MAGIC_CODE or total != len(raw):
            raise MessageDecodeError(f"not a whole record (magic {magic:#x}, {total} of {len(raw)} bytes)")
        p = BODY_LENGTH_OFFSETS[(sys_flag & HOST_V6_FLAGS) >> HOST_V6_SHIFT]
        p += BODY_LENGTH_BYTES + BODY_LENGTH.unpack_from(raw, p)[0]
        p += TOPIC_LENGTH_BYTES + raw[p]
        props_len = PROPERTIES_LENGTH.unpack_from(raw, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        if p + props_len != total:
            raise MessageDecodeError(f"record fields take {p + props_len} bytes, TOTALSIZE says {total}")
        return queue_offset, phys, raw[p : p + props_len].decode("utf-8")
    except (IndexError, UnicodeDecodeError, ValueError, struct.error) as exc:
        if isinstance(exc, MessageDecodeError):
            raise
        raise MessageDecodeError(f"malformed record: {exc}") from exc


def committed_record(half: HalfRecord) -> MessageExtBrokerInner:
    """The real message a commit stores for ``half`` (half_message.committed_message, from the raw fields): topic
    REAL_TOPIC, queue REAL_QID, body, flag, born host/time and reconsume times as stored; the properties text
    without TRAN_MSG, REAL_TOPIC, REAL_QID and TRAN_PREPARED_QUEUE_OFFSET; transaction type COMMIT. The caller
    handles a compressed body (COMPRESSED_FLAG) through committed_message. Raises HalfMessageError when REAL_TOPIC or
    REAL_QID is missing or bad."""
    text = half.properties
    topic = property_value(text, MessageConst.REAL_TOPIC)
    queue_text = property_value(text, MessageConst.REAL_QUEUE_ID) or ""
    if not topic or not queue_text.isdigit():
        raise HalfMessageError(f"half message at {half.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    text = PROPERTY_SEPARATOR.join(
        [item for item in text.split(PROPERTY_SEPARATOR) if not item.startswith(_NOT_COMMITTED_PREFIXES)]
    )
    return MessageExtBrokerInner(
        topic=topic,
        queue_id=int(queue_text),
        body=half.body,
        properties_string=text,
        flag=half.flag,
        sys_flag=(half.sys_flag & ~_TYPE_MASK) | MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        tags_code=tags_string_to_tags_code(property_value(text, MessageConst.TAGS)),
        wait_store_msg_ok=property_value(text, MessageConst.WAIT_STORE_MSG_OK) != "false",
    )
