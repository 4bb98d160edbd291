"""Query path of the broker: messages by key, by UNIQ_KEY and by offset msg id.

Mirrors org.apache.rocketmq.broker.processor.QueryMessageProcessor (#queryMessage, #viewMessageById) over
DefaultMessageStore#queryMessage / #selectOneMessageByOffset, with MessageDecoder#decodeMessageId done on the
broker for ViewMessageById. Runs on the event loop; reads are page-cache copies.

Codes: SUCCESS; QUERY_NOT_FOUND (22) when nothing matches ("can not find message, maybe time range not
correct", or "can not find message by the offset, <offset>"); INVALID_PARAMETER (29) for an empty or illegal
topic/key, a negative max_num or timestamp, an end before the begin, a malformed offset msg id, or an id whose
store host is another broker (the remark names both); SYSTEM_ERROR (1) when the record fails its CRC check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageDecodeError, bytes_to_host, decode_message
from mq_common.constants import validate_topic
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode

from mq_broker.store.api import MessageStore
from mq_broker.store.index_service import MAX_TIMESTAMP_MS

QUERY_NOT_FOUND_REMARK: Final = "can not find message, maybe time range not correct"
MAX_QUERY_KEY_LENGTH: Final = 32_767


@dataclass(frozen=True, slots=True)
class QueryMessageCommand:
    """Mirrors QueryMessageRequestHeader. ``max_num`` 0 means the broker's cap; ``end_timestamp_ms`` 0 means
    no upper bound (RocketMQ's client sends Long.MAX_VALUE).
    """

    topic: str
    key: str
    max_num: int = 0
    begin_timestamp_ms: int = 0
    end_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class QueryMessageReply:
    """``message_bytes``: the matching v1 records, newest first, concatenated (mq_common.codec)."""

    code: int
    remark: str = ""
    message_bytes: bytes = b""
    message_count: int = 0
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0


def _invalid(remark: str) -> QueryMessageReply:
    return QueryMessageReply(int(ResponseCode.INVALID_PARAMETER), remark)


class QueryMessageProcessor:
    """Serves message queries from ``store``; ``store.store_host`` tells which ids are ours."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.store_host, self.store_port = bytes_to_host(store.store_host)

    def query_message(self, command: QueryMessageCommand) -> QueryMessageReply:
        """QUERY_MESSAGE: see the module docstring for the codes."""
        refused = _check_topic_and_key(command.topic, command.key, "key")
        if refused is not None:
            return refused
        if command.max_num < 0:
            return _invalid(f"maxNum[{command.max_num}] must be >= 0")
        begin, end = command.begin_timestamp_ms, command.end_timestamp_ms or MAX_TIMESTAMP_MS
        if begin < 0 or end < begin:
            return _invalid(f"illegal time range: beginTimestamp[{begin}] endTimestamp[{command.end_timestamp_ms}]")
        max_num = command.max_num or self.store.config.max_msgs_num_batch
        result = self.store.query_message(command.topic, command.key, max_num, begin, end)
        if not result.messages:
            return QueryMessageReply(
                int(ResponseCode.QUERY_NOT_FOUND),
                QUERY_NOT_FOUND_REMARK,
                index_last_update_timestamp_ms=result.index_last_update_timestamp_ms,
                index_last_update_phy_offset=result.index_last_update_phy_offset,
            )
        return QueryMessageReply(
            int(ResponseCode.SUCCESS),
            message_bytes=b"".join(result.messages),
            message_count=result.message_count,
            index_last_update_timestamp_ms=result.index_last_update_timestamp_ms,
            index_last_update_phy_offset=result.index_last_update_phy_offset,
        )

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> QueryMessageReply:
        """QUERY_MESSAGE with UNIQUE_MSG_QUERY_FLAG (max defaultQueryMaxNum, any time)."""
        refused = _check_topic_and_key(topic, uniq_key, "uniqKey")
        if refused is not None:
            return refused
        result = self.store.query_message_by_unique_key(topic, uniq_key)
        if not result.messages:
            return QueryMessageReply(int(ResponseCode.QUERY_NOT_FOUND), QUERY_NOT_FOUND_REMARK)
        return QueryMessageReply(
            int(ResponseCode.SUCCESS), message_bytes=b"".join(result.messages), message_count=result.message_count
        )

    def view_message_by_id(self, offset_msg_id: str) -> QueryMessageReply:
        """VIEW_MESSAGE_BY_ID: decode the id (MessageDecoder#decodeMessageId), check it names this broker's
        store host, return the record at its CommitLog offset (CRC checked).
        """
        msg_id = offset_msg_id.strip()
        try:
            host, port, offset = decode_offset_msg_id(msg_id)
        except (ValueError, MessageDecodeError) as exc:
            return _invalid(f"illegal offset msg id [{msg_id}]: {exc}")
        if (host, port) != (self.store_host, self.store_port):
            return _invalid(
                f"offset msg id [{msg_id}] was stored by {_addr(host, port)}, "
                f"not by this broker ({_addr(self.store_host, self.store_port)})"
            )
        raw = self.store.select_one_message_by_offset(offset)
        if raw is None:
            return QueryMessageReply(int(ResponseCode.QUERY_NOT_FOUND), f"can not find message by the offset, {offset}")
        try:
            decode_message(raw, check_crc=True, decompress=False)
        except MessageDecodeError as exc:
            return QueryMessageReply(int(ResponseCode.SYSTEM_ERROR), f"message at offset {offset} is damaged: {exc}")
        return QueryMessageReply(int(ResponseCode.SUCCESS), message_bytes=raw, message_count=1)


def _check_topic_and_key(topic: str, key: str, key_name: str) -> QueryMessageReply | None:
    remark = validate_topic(topic)
    if remark is not None:
        return _invalid(remark)
    if not key:
        return _invalid(f"{key_name} is empty")
    if len(key) > MAX_QUERY_KEY_LENGTH:
        return _invalid(f"{key_name} is longer than {MAX_QUERY_KEY_LENGTH} characters")
    return None


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
