"""The query headers, one model for both ends: the admin client builds the requests and reads the responses, the
broker's QueryMessageProcessor reads the requests and builds the responses (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.header.QueryMessageRequestHeader / QueryMessageResponseHeader
(QUERY_MESSAGE, and with the UNIQUE_MSG_QUERY_FLAG ext field the query by UNIQ_KEY) and ViewMessageRequestHeader /
ViewMessageResponseHeader (VIEW_MESSAGE_BY_ID), each with the RemotingCommand's code, remark and body;
org.apache.rocketmq.client.QueryResult; and MQClientAPIImpl#queryMessage / #viewMessage's decoding
(:func:`query_result_of`, :func:`viewed_message_of`: response -> what the client returns). The proto converters
are in :mod:`mq_common.protocol.convert` (mq.broker.v1 QueryMessageRequest / QueryMessageResponse,
QueryMessageByUniqueKeyRequest / QueryMessageByUniqueKeyResponse, ViewMessageByIdRequest /
ViewMessageByIdResponse: one type per proto message). Frozen and slotted: safe to share between tasks and threads.

Response codes: SUCCESS (0); QUERY_NOT_FOUND (22) when nothing matches; INVALID_PARAMETER (29) for a bad
request; SYSTEM_ERROR (1) for a damaged record.
"""

from __future__ import annotations

from dataclasses import dataclass

from mq_common.codec import MessageExt
from mq_common.errors import MQClientError, error_for_code
from mq_common.protocol.pull import decoded_messages
from mq_common.response_code import ResponseCode


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageRequestHeader:
    """Messages of ``topic`` whose KEYS or UNIQ_KEY hold ``key``, stored within [``begin_timestamp_ms``,
    ``end_timestamp_ms``] (ms since the epoch, inclusive). ``max_num`` 0 means the broker's cap (maxMsgsNumBatch);
    ``end_timestamp_ms`` 0 means no upper bound (RocketMQ's client sends Long.MAX_VALUE).
    Mirrors QueryMessageRequestHeader (topic, key, maxNum, beginTimestamp, endTimestamp)."""

    topic: str
    key: str
    max_num: int = 0
    begin_timestamp_ms: int = 0
    end_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader:
    """The broker's answer to one QueryMessageRequestHeader: RemotingCommand code and remark,
    QueryMessageResponseHeader (indexLastUpdateTimestamp, indexLastUpdatePhyoffset) and the body.

    ``message_bytes``: the ``message_count`` matching records, newest first, concatenated in CommitLog format v1
    (decode with mq_common.codec). ``index_last_update_timestamp_ms`` / ``index_last_update_phy_offset``: store time
    (ms since the epoch) and CommitLog offset of the last message the IndexFile holds (also sent with
    QUERY_NOT_FOUND, 22).
    """

    code: int
    remark: str = ""
    message_bytes: bytes = b""
    message_count: int = 0
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageByUniqueKeyRequestHeader:
    """The messages of ``topic`` with UNIQ_KEY ``uniq_key`` (the producer's msgId), any store time, at most the
    broker's defaultQueryMaxNum. Mirrors QueryMessageRequestHeader with key = uniqKey and the ext field
    UNIQUE_MSG_QUERY_FLAG = true (MQClientAPIImpl#queryMessage as MQAdminImpl#queryMessageByUniqKey calls it)."""

    topic: str
    uniq_key: str


@dataclass(frozen=True, slots=True)
class QueryMessageByUniqueKeyResponseHeader:
    """The broker's answer to one QueryMessageByUniqueKeyRequestHeader: code, remark and the body (no index end).

    ``message_bytes``: the ``message_count`` records with that UNIQ_KEY (more than one when a send was retried),
    newest first, CommitLog format v1.
    """

    code: int
    remark: str = ""
    message_bytes: bytes = b""
    message_count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewMessageRequestHeader:
    """One message by its offset msg id: hex of (store ip 4|16, store port 4, CommitLog offset 8), 32 or 56 hex
    digits. Mirrors ViewMessageRequestHeader (offset), with MessageDecoder#decodeMessageId done by the broker."""

    offset_msg_id: str


@dataclass(frozen=True, slots=True)
class ViewMessageResponseHeader:
    """The broker's answer to one ViewMessageRequestHeader: code, remark and the body, ``message_bytes`` = the one
    record in CommitLog format v1 (empty unless SUCCESS). Mirrors the VIEW_MESSAGE_BY_ID response
    (ViewMessageResponseHeader has no field)."""

    code: int
    remark: str = ""
    message_bytes: bytes = b""


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Messages found by key, as the client sees them. Mirrors org.apache.rocketmq.client.QueryResult
    (indexLastUpdateTimestamp, messageList) plus the index's last CommitLog offset.

    ``messages``: decoded v1 records, newest first (compressed bodies inflated, CRC checked). Index end as in
    :class:`QueryMessageResponseHeader` (0 for a query by UNIQ_KEY: its answer carries none).
    """

    messages: tuple[MessageExt, ...]
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0


def query_result_of(
    response: QueryMessageResponseHeader | QueryMessageByUniqueKeyResponseHeader, broker_name: str = ""
) -> QueryResult:
    """The client's QueryResult of a broker's answer to a query by key or by UNIQ_KEY. Mirrors
    MQClientAPIImpl#queryMessage's response handling (MessageDecoder.decodes of the body).

    Raises error_for_code(code, remark, broker_name) for any code but SUCCESS (MQBrokerError QUERY_NOT_FOUND 22
    when nothing matches, INVALID_PARAMETER 29, ...), MQClientError (SYSTEM_ERROR, 1) when the message bytes do not
    decode (CRC checked).
    """
    messages = _decoded(response.code, response.remark, response.message_bytes, broker_name)
    if isinstance(response, QueryMessageByUniqueKeyResponseHeader):
        return QueryResult(messages)
    return QueryResult(messages, response.index_last_update_timestamp_ms, response.index_last_update_phy_offset)


def viewed_message_of(response: ViewMessageResponseHeader, broker_name: str = "") -> MessageExt:
    """The one message of a broker's answer to VIEW_MESSAGE_BY_ID. Mirrors MQClientAPIImpl#viewMessage
    (MessageDecoder.clientDecode of the body).

    Raises error_for_code(code, remark, broker_name) for any code but SUCCESS (QUERY_NOT_FOUND 22, INVALID_PARAMETER
    29, SYSTEM_ERROR 1 for a damaged record), MQClientError (SYSTEM_ERROR, 1) when the bytes do not decode to
    exactly one message.
    """
    messages = _decoded(response.code, response.remark, response.message_bytes, broker_name)
    if len(messages) != 1:
        raise MQClientError(f"ViewMessageById answered {len(messages)} messages", ResponseCode.SYSTEM_ERROR)
    return messages[0]


def _decoded(code: int, remark: str, message_bytes: bytes, broker_name: str) -> tuple[MessageExt, ...]:
    if code != ResponseCode.SUCCESS:
        raise error_for_code(code, remark, broker_name)
    return decoded_messages(message_bytes, "queried")
