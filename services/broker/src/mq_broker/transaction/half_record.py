"""A half message read from its raw CommitLog record, without decoding it whole.

A whole-transaction commit (mq_broker.transaction.transactional_message_service) turns each half message into its
real message: the body, born host and properties text are carried over as stored (sliced from the record, not
decoded into a MessageExt with a properties dict and encoded again), the topic and queue come from REAL_TOPIC /
REAL_QID, and TRAN_MSG, REAL_TOPIC, REAL_QID and TRAN_PREPARED_QUEUE_OFFSET are cut out of the properties text. The
records are the same as EndTransactionProcessor#endMessageTransaction's (the tests compare them with
mq_broker.transaction.half_message.committed_message). The index of whole transactions reads the same fields
(__transactionId__, PGROUP, the identity). :func:`parse_half_record` reads a record in one pass with the C twin
mq_broker.store._native.half_record when the extension is built (else in Python, the same fields: the tests compare
them). Layout: mq_common.record_layout (format v1). Pure; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, Final, NamedTuple, Protocol

from mq_common.codec import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageDecodeError, body_crc
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.extensions import extensions_disabled
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
_MAX_IDENTITY_DIGITS: Final = 18
"""A longer TRAN_PREPARED_QUEUE_OFFSET is not a queue offset (the C reader's bound too)."""


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


class HalfRecord(NamedTuple):
    """The fields of a stored half message a commit needs: ``born_host`` as stored (8 or 20 bytes), ``body`` as
    stored (compressed when ``sys_flag`` says so), ``properties`` the ``key\\x01value\\x02`` text, ``raw`` the
    whole record; read from the properties text: ``committed_properties`` (without REAL_TOPIC, REAL_QID, TRAN_MSG
    and TRAN_PREPARED_QUEUE_OFFSET), ``real_topic`` and ``real_queue_id`` ("" when absent), ``identity`` (the
    transaction's: TRAN_PREPARED_QUEUE_OFFSET of a check copy, else the queue offset), ``uniq_key`` ("" when
    absent), ``tags`` (None when absent), ``wait`` (WAIT is not "false"), ``transaction_id`` (__transactionId__) and
    ``producer_group`` (PGROUP, "" when absent); the first value of a repeated name."""

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
    committed_properties: str
    real_topic: str
    real_queue_id: str
    identity: int
    uniq_key: str
    tags: str | None
    wait: bool
    transaction_id: str
    producer_group: str

    def get(self, key: str) -> str:
        """The value of property ``key`` ("" when absent)."""
        return property_value(self.properties, key) or ""


class _HalfRecordReader(Protocol):
    def __call__(self, raw: bytes, check_crc: bool, /) -> tuple[Any, ...]: ...


def _load_native() -> _HalfRecordReader | None:
    if extensions_disabled():
        return None
    try:
        from mq_broker.store import _native  # type: ignore[attr-defined]  # optional C extension
    except ImportError:
        return None
    reader: _HalfRecordReader | None = getattr(_native, "half_record", None)
    return reader


_NATIVE_HALF_RECORD: Final = _load_native()
NATIVE: Final = _NATIVE_HALF_RECORD is not None
"""Whether :func:`parse_half_record` reads with the C twin (mq_broker.store._native.half_record)."""


def parse_half_record(
    raw: bytes | bytearray | memoryview, *, check_crc: bool = True, native: bool = NATIVE
) -> HalfRecord:
    """The fields of the v1 record ``raw`` (one whole record), with the C reader when built (``native``). Raises
    MessageDecodeError for a short, malformed or (``check_crc``) damaged record, or text that is not UTF-8."""
    record = raw if type(raw) is bytes else bytes(raw)  # a store may hand a bytearray or memoryview
    if native and _NATIVE_HALF_RECORD is not None:
        try:
            return HalfRecord._make(_NATIVE_HALF_RECORD(record, check_crc))
        except ValueError as exc:  # UnicodeDecodeError too
            raise MessageDecodeError(f"malformed half record: {exc}") from exc
    return _parse_python(record, check_crc)


def _parse_python(raw: bytes, check_crc: bool) -> HalfRecord:
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
        if body_len < 0:
            raise MessageDecodeError(f"bad body length {body_len}")
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
    if p + props_len != total:
        raise MessageDecodeError(f"record fields take {p + props_len} bytes, TOTALSIZE says {total}")
    if check_crc and body_crc(body) != crc:
        raise MessageDecodeError(f"body CRC mismatch at physical offset {phys}")
    kept = PROPERTY_SEPARATOR.join(
        [item for item in properties.split(PROPERTY_SEPARATOR) if not item.startswith(_NOT_COMMITTED_PREFIXES)]
    )
    identity_text = property_value(properties, PREPARED_QUEUE_OFFSET) or ""
    digits = identity_text.isascii() and identity_text.isdigit() and len(identity_text) <= _MAX_IDENTITY_DIGITS
    identity = int(identity_text) if digits else -1
    return HalfRecord(
        topic,
        queue_offset,
        phys,
        sys_flag,
        flag,
        born_ts,
        born_host,
        reconsume,
        body,
        properties,
        raw,
        kept,
        property_value(properties, MessageConst.REAL_TOPIC) or "",
        property_value(properties, MessageConst.REAL_QUEUE_ID) or "",
        queue_offset if identity < 0 else identity,
        property_value(properties, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "",
        property_value(properties, MessageConst.TAGS),
        property_value(properties, MessageConst.WAIT_STORE_MSG_OK) != "false",
        property_value(properties, MessageConst.TRANSACTION_ID) or "",
        property_value(properties, MessageConst.PRODUCER_GROUP) or "",
    )


def committed_record(half: HalfRecord) -> MessageExtBrokerInner:
    """The real message a commit stores for ``half`` (half_message.committed_message, from the raw fields): topic
    REAL_TOPIC, queue REAL_QID, body, flag, born host/time and reconsume times as stored; the properties text
    without TRAN_MSG, REAL_TOPIC, REAL_QID and TRAN_PREPARED_QUEUE_OFFSET; transaction type COMMIT. The caller
    handles a compressed body (COMPRESSED_FLAG) through committed_message. Raises HalfMessageError when REAL_TOPIC or
    REAL_QID is missing or bad."""
    queue_text = half.real_queue_id
    if not half.real_topic or not queue_text.isdigit():
        raise HalfMessageError(f"half message at {half.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    return MessageExtBrokerInner(
        topic=half.real_topic,
        queue_id=int(queue_text),
        body=half.body,
        properties_string=half.committed_properties,
        flag=half.flag,
        sys_flag=(half.sys_flag & ~_TYPE_MASK) | MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        tags_code=tags_string_to_tags_code(half.tags),
        wait_store_msg_ok=half.wait,
    )
