"""Tag filtering of pulls: a hash match on the ConsumeQueue unit, then an exact TAGS check on the record.

Mirrors org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData, FilterAPI#buildSubscriptionData
and org.apache.rocketmq.broker.filter.ExpressionMessageFilter (TAG type). Pure values; any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final, Protocol

from mq_common.codec import decode_properties
from mq_common.constants import MessageConst
from mq_common.hashing import java_string_hash
from mq_common.record_layout import (
    BODY_LENGTH,
    BODY_LENGTH_OFFSETS,
    BODY_OFFSETS,
    HOST_V6_FLAGS,
    HOST_V6_SHIFT,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_BYTES,
    SYS_FLAG,
    SYS_FLAG_OFFSET,
    TOPIC_LENGTH_BYTES,
)

SUB_ALL: Final = "*"


class MessageFilter(Protocol):
    """What DefaultMessageStore#getMessage asks while scanning a queue."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: bytes) -> bool: ...


class SubscriptionParseError(ValueError):
    """The tag expression has no tag (SUBSCRIPTION_PARSE_FAILED, 23)."""


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A parsed tag expression: ``"*"`` (everything) or ``"TagA || TagB"``."""

    sub_string: str
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()

    @classmethod
    def build(cls, sub_string: str) -> SubscriptionData:
        """FilterAPI#buildSubscriptionData. Raises SubscriptionParseError when no tag remains after trimming."""
        if not sub_string or sub_string.strip() == SUB_ALL:
            return cls(SUB_ALL)
        tags = frozenset(t.strip() for t in sub_string.split("||") if t.strip())
        if not tags:
            raise SubscriptionParseError(f"subString split error: {sub_string!r}")
        return cls(sub_string, tags, frozenset(java_string_hash(t) for t in tags))

    @property
    def is_sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """ExpressionMessageFilter#isMatchedByConsumeQueue (TAG): the unit's hash is one of ours."""
        return self.is_sub_all or tags_code in self.code_set

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        """The exact check after a hash match (hashes collide): the record's TAGS is one of ours."""
        if self.is_sub_all:
            return True
        return record_tags(record) in self.tags_set


def record_tags(record: bytes) -> str | None:
    """TAGS of a whole v1 record (None without tags or when the record does not parse)."""
    try:
        hosts = (SYS_FLAG.unpack_from(record, SYS_FLAG_OFFSET)[0] & HOST_V6_FLAGS) >> HOST_V6_SHIFT
        p = BODY_OFFSETS[hosts] + BODY_LENGTH.unpack_from(record, BODY_LENGTH_OFFSETS[hosts])[0]
        p += TOPIC_LENGTH_BYTES + record[p]
        props_len = PROPERTIES_LENGTH.unpack_from(record, p)[0]
        p += PROPERTIES_LENGTH_BYTES
        text = record[p : p + props_len].decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return decode_properties(text).get(MessageConst.TAGS)
