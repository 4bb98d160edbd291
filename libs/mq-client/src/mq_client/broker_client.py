"""The broker client adapter: calls to brokers by address, proto <-> value translation.

Its request/result values are mq_common.protocol's send, pull and query headers, PullResult and QueryResult (with
their converters in mq_common.protocol.convert, shared with the broker); channels, the name server client and the
gRPC error mapping in mq_common (channels, namesrv_client, grpc_errors); the gateway client in
mq_client.gateway_client. With mq_client.send_stream and mq_client.gateway_client, the only mq_client modules
that touch generated protobuf types. Everything here runs on the caller's asyncio loop (channels belong to the
loop that created them).

Error mapping (Mirrors NettyRemotingClient#invokeSync + MQClientAPIImpl's response handling):
- a gRPC status -> mq_common.grpc_errors.transport_error (RemotingTimeoutError, InvalidParameterError,
  RemotingError);
- a non-zero business ``code`` -> mq_common.errors.error_for_code(code, remark, broker_name), raised, except
  for sends, whose per-message codes are returned in SendMessageResponseHeader.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool, StubCache
from mq_common.channels import seconds as _seconds
from mq_common.codec import MessageExt
from mq_common.constants import MixAll
from mq_common.errors import RemotingError
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check
from mq_common.protocol import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullResult,
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageRequestHeader,
    QueryResult,
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicConfig,
    TopicQueueOffset,
    ViewMessageRequestHeader,
    pull_result_of,
    query_result_of,
    viewed_message_of,
)
from mq_common.protocol.convert import (
    batch_request_to_proto,
    batch_response_from_proto,
    pull_request_to_proto,
    pull_response_from_proto,
    query_request_to_proto,
    query_response_from_proto,
    send_batch_to_proto,
    send_msg_back_request_to_proto,
    send_response_from_proto,
    topic_config_to_proto,
    topic_queue_offset_from_proto,
    uniq_key_request_to_proto,
    uniq_key_response_from_proto,
    view_request_to_proto,
    view_response_from_proto,
)
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_common.protocol.transaction_convert import end_transaction_request_to_proto
from mq_common.response_code import ResponseCode

from mq_client.send_stream import BrokerSendStream

__all__ = ["BrokerClient"]


class BrokerClient:
    """Calls to brokers by address. Mirrors MQClientAPIImpl's broker calls. Runs on the caller's loop.

    The three send calls go as frames of one SendStream per broker address (mq_client.send_stream: about half
    the broker's gRPC cost of a unary call; the broker serves no unary send); a frame-level refusal comes back
    as every message's code, like a business code. Call :meth:`close` to end the streams before closing the
    pool. Transport failures raise RemotingError / RemotingTimeoutError (see the module docstring).
    """

    def __init__(self, pool: ChannelPool) -> None:
        self._pool = pool
        self._stubs: StubCache[broker_pb2_grpc.BrokerAsyncStub] = StubCache(pool, broker_pb2_grpc.BrokerStub)
        self._send_streams: dict[str, BrokerSendStream] = {}

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        """The stub of ``addr``'s current channel (one per channel: a stub builds a callable per method)."""
        return self._stubs.get(addr)

    def _send_stream(self, addr: str) -> BrokerSendStream:
        stream = self._send_streams.get(addr)
        if stream is None:
            # opened with the pool's stream metadata (signed headers when the pool signs: signing_pool)
            stream = self._send_streams[addr] = BrokerSendStream(
                lambda: self._stub(addr).SendStream(metadata=self._pool.stream_metadata()), addr
            )
        return stream

    async def send_message(
        self, addr: str, request: SendMessageRequestHeader, timeout_ms: int
    ) -> SendMessageResponseHeader:
        """SEND_MESSAGE: one message, as a one-request batch frame; the business code is returned, not raised."""
        return (await self.send_batch(addr, (request,), timeout_ms))[0]

    async def send_batch(
        self, addr: str, requests: Sequence[SendMessageRequestHeader], timeout_ms: int
    ) -> list[SendMessageResponseHeader]:
        """Independent sends in one frame; one response per request, in request order; business codes returned.

        Raises RemotingError when the broker answers with a different number of responses."""
        frame = broker_pb2.SendStreamRequest()
        send_batch_to_proto(requests, frame.batch)  # built inside the frame: the requests are not copied again
        answer = await self._send_stream(addr).send(frame, timeout_ms)
        if answer.code != ResponseCode.SUCCESS:
            return [SendMessageResponseHeader(answer.code, answer.remark)] * len(requests)
        resp = answer.batch
        if len(resp.responses) != len(requests):
            raise RemotingError(f"{addr}: {len(resp.responses)} responses for {len(requests)} sends")
        return [send_response_from_proto(r) for r in resp.responses]

    async def send_message_batch(
        self, addr: str, request: SendMessageBatchRequestHeader, timeout_ms: int
    ) -> SendMessageBatchResponseHeader:
        """SEND_BATCH_MESSAGE: one MessageBatch, one queue, one frame; the business code is returned."""
        # filled inside the frame: the body is copied once into it, not into a request and again into the frame
        frame = broker_pb2.SendStreamRequest()
        batch_request_to_proto(request, frame.message_batch)
        answer = await self._send_stream(addr).send(frame, timeout_ms)
        if answer.code != ResponseCode.SUCCESS:
            return SendMessageBatchResponseHeader(answer.code, answer.remark)
        return batch_response_from_proto(answer.message_batch)

    async def close(self) -> None:
        """End every send stream (waiting sends get RemotingError). Channels belong to the pool."""
        streams = list(self._send_streams.values())
        self._send_streams.clear()
        for stream in streams:
            await stream.close()

    async def pull_message(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        subscription: str = "*",
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        consumer_group: str = MixAll.DEFAULT_CONSUMER_GROUP,
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
    ) -> PullResult:
        """PULL_MESSAGE from one queue at ``queue_offset``, at most ``max_msg_nums`` messages, for
        ``consumer_group`` (the broker checks it: SUBSCRIPTION_GROUP_NOT_EXIST 26, NO_PERMISSION 16).

        ``commit_offset``: also commit this offset of the queue for the group. ``suspend_timeout_ms`` > 0: when
        nothing is there the broker holds the call until a message arrives or that time passes (long polling);
        the call's deadline is then ``suspend_timeout_ms + timeout_ms``. Mirrors MQClientAPIImpl#pullMessage.

        Raises like :func:`mq_common.protocol.pull_result_of` (error_for_code(...) for a code that is no pull
        status, e.g. POLLING_FULL 209 when the broker holds too many pulls; MQClientError SYSTEM_ERROR for
        undecodable bytes) plus transport errors."""
        header = PullMessageRequestHeader(
            topic=topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            max_msg_nums=max_msg_nums,
            consumer_group=consumer_group,
            subscription=subscription,
            commit_offset=commit_offset,
            suspend_timeout_ms=suspend_timeout_ms,
        )
        deadline_s = _seconds(max(0, suspend_timeout_ms) + timeout_ms)
        call = self._stub(addr).PullMessage(pull_request_to_proto(header), timeout=deadline_s)
        return pull_result_of(pull_response_from_proto(await _invoke(call, addr)))

    async def consumer_send_msg_back(
        self, addr: str, header: ConsumerSendMsgBackRequestHeader, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to the broker that stored the message (``header.offset`` is its CommitLog
        offset): the broker stores it again on %RETRY%<group>, or %DLQ%<group> past the group's retry limit.
        Mirrors MQClientAPIImpl#consumerSendMessageBack.

        Raises error_for_code(...) on a non-zero code (SUBSCRIPTION_GROUP_NOT_EXIST 26, NO_PERMISSION 16,
        SYSTEM_ERROR 1 "look message by offset failed, ..." or a put failure) plus transport errors."""
        request = send_msg_back_request_to_proto(header)
        resp = await _invoke(self._stub(addr).ConsumerSendMsgBack(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def create_topic(self, addr: str, config: TopicConfig, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """UPDATE_AND_CREATE_TOPIC: create or replace. Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.CreateTopicRequest(topic_config=topic_config_to_proto(config))
        resp = await _invoke(self._stub(addr).CreateTopic(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def update_topic(self, addr: str, config: TopicConfig, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """UpdateTopic: like create_topic, but raises TOPIC_NOT_EXIST (17) for an unknown topic."""
        request = broker_pb2.UpdateTopicRequest(topic_config=topic_config_to_proto(config))
        resp = await _invoke(self._stub(addr).UpdateTopic(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def get_broker_runtime_info(self, addr: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime KV table (keys: mq_broker.ha.runtime_info, e.g.
        ``brokerRole``, ``commitLogMaxOffset``). Mirrors MQClientAPIImpl#getBrokerRuntimeInfo.

        Raises error_for_code(...) on a non-zero code (NO_PERMISSION 16 for a caller that may not call admin RPCs)."""
        request = broker_pb2.GetBrokerRuntimeInfoRequest()
        resp = await _invoke(self._stub(addr).GetBrokerRuntimeInfo(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return dict(resp.table)

    async def get_topic_stats(
        self, addr: str, topic: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[TopicQueueOffset]:
        """GET_TOPIC_STATS_INFO: min/max offset per queue of ``topic`` on this broker.

        Raises error_for_code(...) (e.g. TOPIC_NOT_EXIST 17) on a non-zero code."""
        request = broker_pb2.GetTopicStatsRequest(topic=topic)
        resp = await _invoke(self._stub(addr).GetTopicStats(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return [topic_queue_offset_from_proto(o) for o in resp.offsets]

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int = 64,
        begin_timestamp_ms: int = 0,
        end_timestamp_ms: int = 0,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> QueryResult:
        """QUERY_MESSAGE: messages of ``topic`` whose KEYS or UNIQ_KEY is ``key``, stored within the range
        (``end_timestamp_ms`` 0: no upper bound), newest first, CRC checked. Mirrors MQClientAPIImpl#queryMessage.

        Raises error_for_code(...): MQBrokerError QUERY_NOT_FOUND (22) when nothing matches,
        InvalidParameterError (29) for a bad topic/key/range; MQClientError (SYSTEM_ERROR) when the bytes do not
        decode; transport errors."""
        header = QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp_ms=begin_timestamp_ms,
            end_timestamp_ms=end_timestamp_ms,
        )
        call = self._stub(addr).QueryMessage(query_request_to_proto(header), timeout=_seconds(timeout_ms))
        return query_result_of(query_response_from_proto(await _invoke(call, addr)))

    async def query_message_by_unique_key(
        self, addr: str, topic: str, uniq_key: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[MessageExt]:
        """QUERY_MESSAGE with UNIQUE_MSG_QUERY_FLAG: the messages of ``topic`` with that UNIQ_KEY, newest first.

        Raises like :meth:`query_message`."""
        request = uniq_key_request_to_proto(QueryMessageByUniqueKeyRequestHeader(topic=topic, uniq_key=uniq_key))
        call = self._stub(addr).QueryMessageByUniqueKey(request, timeout=_seconds(timeout_ms))
        return list(query_result_of(uniq_key_response_from_proto(await _invoke(call, addr))).messages)

    async def recall_message(
        self,
        addr: str,
        producer_group: str,
        topic: str,
        recall_handle: str,
        broker_name: str = "",
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> str:
        """RECALL_MESSAGE at ``addr`` (the master of the handle's broker): cancel a timer message not delivered yet.
        Returns the recalled message's UNIQ_KEY. Mirrors MQClientAPIImpl#recallMessage.

        Raises error_for_code(code, remark, broker_name): MQBrokerError ILLEGAL_OPERATION (604) for a garbage
        handle, a handle of another topic or broker, a delivery time already passed or an unknown or already
        recalled message; TOPIC_NOT_EXIST (17); SLAVE_NOT_AVAILABLE (11) from a slave; transport errors."""
        request = broker_pb2.RecallMessageRequest(
            producer_group=producer_group, topic=topic, recall_handle=recall_handle
        )
        call = self._stub(addr).RecallMessage(request, timeout=_seconds(timeout_ms))
        resp = await _invoke(call, addr)
        _check(resp.code, resp.remark, broker_name)
        return resp.msg_id

    async def end_transaction(
        self,
        addr: str,
        header: EndTransactionRequestHeader,
        broker_name: str = "",
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> str:
        """END_TRANSACTION at ``addr`` (the master of the half message's broker): commit or roll back a half
        message. Returns the broker's remark. Mirrors MQClientAPIImpl#endTransactionOneway (answered here).

        Raises error_for_code(code, remark, broker_name): SYSTEM_ERROR (1) when no half message of that group,
        offset, transaction id and topic is there; ILLEGAL_OPERATION (604) for one already ended or a producer's
        answer after its immunity time; SLAVE_NOT_AVAILABLE (11) from a slave; transport errors."""
        call = self._stub(addr).EndTransaction(end_transaction_request_to_proto(header), timeout=_seconds(timeout_ms))
        resp = await _invoke(call, addr)
        _check(resp.code, resp.remark, broker_name)
        return resp.remark

    async def view_message_by_id(
        self, addr: str, offset_msg_id: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker that stored it. Mirrors MQClientAPIImpl#viewMessage.

        Raises QUERY_NOT_FOUND (22) when no message starts at that offset, InvalidParameterError (29) for a
        malformed id or one stored by another broker, SYSTEM_ERROR (1) for a damaged record or an answer that is
        not exactly one message (see :func:`mq_common.protocol.viewed_message_of`)."""
        request = view_request_to_proto(ViewMessageRequestHeader(offset_msg_id=offset_msg_id))
        call = self._stub(addr).ViewMessageById(request, timeout=_seconds(timeout_ms))
        return viewed_message_of(view_response_from_proto(await _invoke(call, addr)))
