"""Query path of the broker: messages by key, by UNIQ_KEY and by offset msg id.

Mirrors org.apache.rocketmq.broker.processor.QueryMessageProcessor (#queryMessage, #viewMessageById) over
DefaultMessageStore#queryMessage / #selectOneMessageByOffset, with MessageDecoder#decodeMessageId done on the
broker for ViewMessageById. Requests and answers are mq_common.protocol's query headers (the admin client's
too). Runs on the event loop; reads are page-cache copies.

Codes: SUCCESS; QUERY_NOT_FOUND (22) when nothing matches ("can not find message, maybe time range not
correct", or "can not find message by the offset, <offset>"); INVALID_PARAMETER (29) for an empty or illegal
topic/key, a negative max_num or timestamp, an end before the begin, a malformed offset msg id, or an id whose
store host is another broker (the remark names both); SYSTEM_ERROR (1) when the record fails its CRC check.
"""

from __future__ import annotations

from typing import Final

from mq_common.codec import MessageDecodeError, bytes_to_host, decode_message
from mq_common.constants import validate_topic
from mq_common.message_id import decode_offset_msg_id
from mq_common.protocol import (
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    ViewMessageResponseHeader,
)
from mq_common.response_code import ResponseCode

from mq_broker.store.api import MessageStore
from mq_broker.store.index_service import MAX_TIMESTAMP_MS

QUERY_NOT_FOUND_REMARK: Final = "can not find message, maybe time range not correct"
MAX_QUERY_KEY_LENGTH: Final = 32_767


class QueryMessageProcessor:
    """Serves message queries from ``store``; ``store.store_host`` tells which ids are ours."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.store_host, self.store_port = bytes_to_host(store.store_host)

    def query_message(self, request: QueryMessageRequestHeader) -> QueryMessageResponseHeader:
        """QUERY_MESSAGE: see the module docstring for the codes."""
        refused = _refuse_query(request)
        if refused is not None:
            return QueryMessageResponseHeader(int(ResponseCode.INVALID_PARAMETER), refused)
        max_num = request.max_num or self.store.config.max_msgs_num_batch
        end = request.end_timestamp_ms or MAX_TIMESTAMP_MS
        result = self.store.query_message(request.topic, request.key, max_num, request.begin_timestamp_ms, end)
        if not result.messages:
            return QueryMessageResponseHeader(
                int(ResponseCode.QUERY_NOT_FOUND),
                QUERY_NOT_FOUND_REMARK,
                index_last_update_timestamp_ms=result.index_last_update_timestamp_ms,
                index_last_update_phy_offset=result.index_last_update_phy_offset,
            )
        return QueryMessageResponseHeader(
            int(ResponseCode.SUCCESS),
            message_bytes=b"".join(result.messages),
            message_count=result.message_count,
            index_last_update_timestamp_ms=result.index_last_update_timestamp_ms,
            index_last_update_phy_offset=result.index_last_update_phy_offset,
        )

    def query_message_by_unique_key(
        self, request: QueryMessageByUniqueKeyRequestHeader
    ) -> QueryMessageByUniqueKeyResponseHeader:
        """QUERY_MESSAGE with UNIQUE_MSG_QUERY_FLAG (max defaultQueryMaxNum, any time)."""
        refused = _refuse_topic_and_key(request.topic, request.uniq_key, "uniqKey")
        if refused is not None:
            return QueryMessageByUniqueKeyResponseHeader(int(ResponseCode.INVALID_PARAMETER), refused)
        result = self.store.query_message_by_unique_key(request.topic, request.uniq_key)
        if not result.messages:
            return QueryMessageByUniqueKeyResponseHeader(int(ResponseCode.QUERY_NOT_FOUND), QUERY_NOT_FOUND_REMARK)
        return QueryMessageByUniqueKeyResponseHeader(
            int(ResponseCode.SUCCESS), message_bytes=b"".join(result.messages), message_count=result.message_count
        )

    def view_message_by_id(self, request: ViewMessageRequestHeader) -> ViewMessageResponseHeader:
        """VIEW_MESSAGE_BY_ID: decode the id (MessageDecoder#decodeMessageId), check it names this broker's
        store host, return the record at its CommitLog offset (CRC checked).
        """
        msg_id = request.offset_msg_id.strip()
        try:
            host, port, offset = decode_offset_msg_id(msg_id)
        except (ValueError, MessageDecodeError) as exc:
            return ViewMessageResponseHeader(
                int(ResponseCode.INVALID_PARAMETER), f"illegal offset msg id [{msg_id}]: {exc}"
            )
        if (host, port) != (self.store_host, self.store_port):
            return ViewMessageResponseHeader(
                int(ResponseCode.INVALID_PARAMETER),
                f"offset msg id [{msg_id}] was stored by {_addr(host, port)}, "
                f"not by this broker ({_addr(self.store_host, self.store_port)})",
            )
        raw = self.store.select_one_message_by_offset(offset)
        if raw is None:
            return ViewMessageResponseHeader(
                int(ResponseCode.QUERY_NOT_FOUND), f"can not find message by the offset, {offset}"
            )
        try:
            decode_message(raw, check_crc=True, decompress=False)
        except MessageDecodeError as exc:
            return ViewMessageResponseHeader(
                int(ResponseCode.SYSTEM_ERROR), f"message at offset {offset} is damaged: {exc}"
            )
        return ViewMessageResponseHeader(int(ResponseCode.SUCCESS), message_bytes=raw)


def _refuse_query(request: QueryMessageRequestHeader) -> str | None:
    """The INVALID_PARAMETER remark for a bad QUERY_MESSAGE request, None when it is fine."""
    refused = _refuse_topic_and_key(request.topic, request.key, "key")
    if refused is not None:
        return refused
    if request.max_num < 0:
        return f"maxNum[{request.max_num}] must be >= 0"
    begin, end = request.begin_timestamp_ms, request.end_timestamp_ms or MAX_TIMESTAMP_MS
    if begin < 0 or end < begin:
        return f"illegal time range: beginTimestamp[{begin}] endTimestamp[{request.end_timestamp_ms}]"
    return None


def _refuse_topic_and_key(topic: str, key: str, key_name: str) -> str | None:
    """The INVALID_PARAMETER remark for a bad topic or key, None when both are fine."""
    remark = validate_topic(topic)
    if remark is not None:
        return remark
    if not key:
        return f"{key_name} is empty"
    if len(key) > MAX_QUERY_KEY_LENGTH:
        return f"{key_name} is longer than {MAX_QUERY_KEY_LENGTH} characters"
    return None


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
