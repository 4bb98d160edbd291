"""Store-side domain values: the message handed to the store, put/get results and their statuses.

Mirrors org.apache.rocketmq.store.{PutMessageStatus, PutMessageResult, AppendMessageResult, GetMessageStatus,
GetMessageResult} and org.apache.rocketmq.common.message.MessageExtBrokerInner. Frozen and slotted: safe to
hand between the event loop and the flusher thread.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from mq_common.codec import encode_properties
from mq_common.constants import MessageConst, MessageSysFlag
from mq_common.hashing import java_string_hash

_TAG_HASH_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=_TAG_HASH_CACHE_SIZE)
def tags_string_to_tags_code(tags: str | None) -> int:
    """The tag code of a TAGS value (Java String#hashCode, so the numbers match a Java broker's ConsumeQueue and
    SubscriptionData.codeSet); 0 when there is no tag. Cached: tag values repeat. Mirrors
    MessageExtBrokerInner#tagsString2tagsCode."""
    if not tags:
        return 0
    return java_string_hash(tags)


@dataclass(frozen=True, slots=True)
class MessageExtBrokerInner:
    """A message as the store receives it. Mirrors org.apache.rocketmq.common.message.MessageExtBrokerInner.

    ``born_host`` is 8 bytes (IPv4 + port) or 20 bytes (IPv6 + port) from mq_common.codec.host_to_bytes;
    ``properties_string`` is RocketMQ's ``key\\x01value\\x02`` text. QUEUEOFFSET, PHYSICALOFFSET,
    STORETIMESTAMP and STOREHOST are filled by the CommitLog at put time.
    """

    topic: str
    queue_id: int
    body: bytes
    properties_string: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
    reconsume_times: int = 0
    tags_code: int = 0
    wait_store_msg_ok: bool = True

    @classmethod
    def build(
        cls,
        *,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: Mapping[str, str],
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp_ms: int = 0,
        born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00",
        reconsume_times: int = 0,
    ) -> MessageExtBrokerInner:
        """Derive the tag code (TAGS) and the wait flag (WAIT != "false") from ``properties``."""
        return cls(
            topic=topic,
            queue_id=queue_id,
            body=body,
            properties_string=encode_properties(properties),
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp_ms=born_timestamp_ms,
            born_host=born_host,
            reconsume_times=reconsume_times,
            tags_code=tags_string_to_tags_code(properties.get(MessageConst.TAGS)),
            wait_store_msg_ok=properties.get(MessageConst.WAIT_STORE_MSG_OK, "true") != "false",
        )


@dataclass(frozen=True, slots=True)
class MessageExtBatch:
    """The messages of one batch for one topic-queue, still encoded. Mirrors MessageExtBatch.

    ``body`` is the MessageBatch body (mq_common.batch_codec: per message TOTALSIZE, MAGICCODE, BODYCRC, FLAG,
    BODYLEN, BODY, PROPERTIESLENGTH, PROPERTIES). ``properties_string`` (the batch's own ``key\\x01value\\x02``
    text, e.g. CLUSTER) is appended to every message's properties when stored (MessageExtEncoder#encodeBatch);
    ``sys_flag``, ``born_timestamp_ms`` and ``born_host`` (8 or 20 bytes) are every message's. The whole batch
    waits for the group commit unless ``wait_store_msg_ok`` is False.
    """

    topic: str
    queue_id: int
    body: bytes
    properties_string: str = ""
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
    wait_store_msg_ok: bool = True


def is_dispatchable(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction messages get no ConsumeQueue unit.

    Mirrors CommitLogDispatcherBuildConsumeQueue#dispatch.
    """
    tran = sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    return tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


class PutMessageStatus(Enum):
    """Outcome of one put. Mirrors org.apache.rocketmq.store.PutMessageStatus (the statuses used here)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # SYNC_MASTER: stored on the master, but in_sync_replicas copies did not confirm it within sync_flush_timeout_ms.
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    # SYNC_MASTER: stored on the master; too few slaves connected and within ha_max_gap_not_in_sync_bytes to wait.
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def is_stored(self) -> bool:
        """The record is in the master's CommitLog: PUT_OK, or stored with its durability or replication
        unconfirmed (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE: RocketMQ answers these with the
        message id and queue offset too)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """One put's status plus where it landed. Mirrors PutMessageResult + AppendMessageResult.

    ``msg_id`` is the offset message id (store host + port + ``wrote_offset``); offsets are -1 when the
    message was not stored. The result of a MessageExtBatch covers its ``msg_num`` messages: ``wrote_offset``
    and ``queue_offset`` are the first one's, ``wrote_bytes`` is the total, ``msg_id`` joins the offset ids
    with commas (AppendMessageResult of a batch).
    """

    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = -1
    store_timestamp_ms: int = 0
    remark: str = ""
    msg_num: int = 1

    @property
    def is_ok(self) -> bool:
        return self.status.is_stored


class GetMessageStatus(Enum):
    """Outcome of a get. Mirrors org.apache.rocketmq.store.GetMessageStatus."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(frozen=True, slots=True)
class GetMessageResult:
    """Messages of one queue from a logical offset. Mirrors org.apache.rocketmq.store.GetMessageResult.

    ``messages`` are whole v1 records (raw bytes, in queue order) and ``queue_offsets`` their logical
    offsets; ``next_begin_offset`` is where the next pull starts; ``min_offset``/``max_offset`` bound the
    queue (``max_offset`` is the next offset to be written).
    """

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[bytes, ...] = ()
    queue_offsets: tuple[int, ...] = ()

    @property
    def message_count(self) -> int:
        return len(self.messages)
