"""Consumer-side broker calls by address: heartbeats, client ids of a group, consumer offsets, offset by time.

A client adapter like mq_client.broker_client (the only kind of mq_client module that touches generated
protobuf types): it translates, nothing more. Used by the consumers (mq_client.consumer) and the admin client.
Runs on the caller's asyncio loop (channels belong to the loop that created them).

Error mapping as in mq_client.broker_client: a gRPC status -> mq_common.grpc_errors.transport_error
(RemotingTimeoutError, InvalidParameterError, RemotingError); a non-zero business ``code`` ->
mq_common.errors.error_for_code(code, remark), raised.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool
from mq_common.channels import seconds as _seconds
from mq_common.errors import MQError, RemotingError, error_for_code
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check
from mq_common.protocol import (
    ConsumerQueueOffset,
    HeartbeatData,
    MessageQueue,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
)
from mq_common.protocol.convert import (
    consumer_queue_offset_to_proto,
    heartbeat_to_proto,
    message_queue_from_proto,
    message_queue_to_proto,
    query_consumer_offset_request_to_proto,
    search_offset_request_to_proto,
    unregister_client_request_to_proto,
)
from mq_common.response_code import ResponseCode

__all__ = ["ConsumerBrokerCalls"]


class ConsumerBrokerCalls:
    """The consumer RPCs of the Broker service, one method each. Mirrors MQClientAPIImpl's consumer calls
    (sendHeartbeat, unregisterClient, getConsumerIdListByGroup, lockBatchMQ, unlockBatchMQ, updateConsumerOffset,
    queryConsumerOffset, searchOffset). Runs on the caller's loop; channels come from (and belong to) ``pool``.
    """

    def __init__(self, pool: ChannelPool) -> None:
        self._pool = pool

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        # built per call: these calls are rare (seconds apart), unlike BrokerClient's hot send/pull path
        return broker_pb2_grpc.BrokerStub(self._pool.get(addr))

    async def heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """HEART_BEAT: register (or refresh) one consumer client of a group with its subscriptions.

        Mirrors MQClientAPIImpl#sendHeartbeat. Raises error_for_code(...) on a non-zero code."""
        request = heartbeat_to_proto(heartbeat)
        resp = await _invoke(self._stub(addr).Heartbeat(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def unregister_client(
        self, addr: str, client_id: str, consumer_group: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """UNREGISTER_CLIENT: ``client_id`` leaves ``consumer_group`` on this broker.

        Mirrors MQClientAPIImpl#unregisterClient. Raises error_for_code(...) on a non-zero code."""
        request = unregister_client_request_to_proto(UnregisterClientRequestHeader(client_id, consumer_group))
        resp = await _invoke(self._stub(addr).UnregisterClient(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def get_consumer_list_by_group(
        self, addr: str, consumer_group: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of ``consumer_group`` live on this broker, sorted.

        Mirrors MQClientAPIImpl#getConsumerIdListByGroup. Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.GetConsumerListByGroupRequest(consumer_group=consumer_group)
        resp = await _invoke(self._stub(addr).GetConsumerListByGroup(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return list(resp.client_ids)

    async def lock_batch_mq(
        self,
        addr: str,
        consumer_group: str,
        client_id: str,
        queues: Sequence[MessageQueue],
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: take or renew ``client_id``'s broker-side locks of ``queues`` (60 s each unless renewed);
        the queues it holds afterwards. Mirrors MQClientAPIImpl#lockBatchMQ. Raises error_for_code(...) on a
        non-zero code (INVALID_PARAMETER 29, NO_PERMISSION 16)."""
        request = broker_pb2.LockBatchMQRequest(
            consumer_group=consumer_group, client_id=client_id, mqs=[message_queue_to_proto(q) for q in queues]
        )
        resp = await _invoke(self._stub(addr).LockBatchMQ(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return {message_queue_from_proto(q) for q in resp.lock_ok_mqs}

    async def unlock_batch_mq(
        self,
        addr: str,
        consumer_group: str,
        client_id: str,
        queues: Sequence[MessageQueue],
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> None:
        """UNLOCK_BATCH_MQ: free ``client_id``'s locks of ``queues``. Mirrors MQClientAPIImpl#unlockBatchMQ.
        Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.UnlockBatchMQRequest(
            consumer_group=consumer_group, client_id=client_id, mqs=[message_queue_to_proto(q) for q in queues]
        )
        resp = await _invoke(self._stub(addr).UnlockBatchMQ(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def update_consumer_offsets(
        self,
        addr: str,
        offsets: Sequence[ConsumerQueueOffset],
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> list[MQError | None]:
        """UPDATE_CONSUMER_OFFSET for many queues in one call: one outcome per offset, in order (None:
        committed; else error_for_code(code, remark), e.g. SUBSCRIPTION_GROUP_NOT_EXIST 26, TOPIC_NOT_EXIST 17).

        Mirrors MQClientAPIImpl#updateConsumerOffset, batched. Raises error_for_code(...) when the whole call is
        refused, RemotingError when the broker answers a different number of codes."""
        request = broker_pb2.UpdateConsumerOffsetsRequest(offsets=[consumer_queue_offset_to_proto(o) for o in offsets])
        resp = await _invoke(self._stub(addr).UpdateConsumerOffsets(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        if len(resp.codes) != len(offsets):
            raise RemotingError(f"{addr}: {len(resp.codes)} codes for {len(offsets)} offsets")
        remarks = list(resp.remarks) + [""] * (len(resp.codes) - len(resp.remarks))
        return [
            None if c == ResponseCode.SUCCESS else error_for_code(c, r)
            for c, r in zip(resp.codes, remarks, strict=False)
        ]

    async def query_consumer_offset(
        self,
        addr: str,
        consumer_group: str,
        topic: str,
        queue_id: int,
        *,
        set_zero_if_not_found: bool = False,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> int:
        """QUERY_CONSUMER_OFFSET: ``consumer_group``'s committed offset of one queue.

        Mirrors MQClientAPIImpl#queryConsumerOffset. Raises MQBrokerError QUERY_NOT_FOUND (22) when the group has
        no offset there (RocketMQ's OffsetNotFoundException), error_for_code(...) for other non-zero codes."""
        header = QueryConsumerOffsetRequestHeader(consumer_group, topic, queue_id, set_zero_if_not_found)
        request = query_consumer_offset_request_to_proto(header)
        resp = await _invoke(self._stub(addr).QueryConsumerOffset(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return resp.offset

    async def search_offset_by_timestamp(
        self, addr: str, topic: str, queue_id: int, timestamp_ms: int, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset whose message was stored at or after
        ``timestamp_ms`` (the max offset when every message is older).

        Mirrors MQClientAPIImpl#searchOffset. Raises error_for_code(...) on a non-zero code."""
        request = search_offset_request_to_proto(SearchOffsetRequestHeader(topic, queue_id, timestamp_ms))
        resp = await _invoke(self._stub(addr).SearchOffsetByTimestamp(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return resp.offset
