"""Admin-side consumer broker calls by address: subscription groups, consume stats, offset reset by time, topic
deletion, consumer connections; plus (inherited) mq_client.consumer_calls' consumer calls.

A client adapter like mq_client.broker_client (the only kind of mq_client module that touches generated protobuf
types): it translates between the mq_common.protocol domain types and broker.proto, nothing more. Used by
mq_client.admin.MQAdminClient. Runs on the caller's asyncio loop; errors are mapped as in mq_client.consumer_calls
(transport -> mq_common.grpc_errors.transport_error, a non-zero code -> error_for_code, raised).
"""

from __future__ import annotations

from mq.broker.v1 import broker_pb2
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS
from mq_common.channels import seconds as _seconds
from mq_common.grpc_errors import invoke as _invoke
from mq_common.namesrv_client import check_code as _check
from mq_common.protocol import (
    ConsumerConnectionInfo,
    ConsumerQueueOffset,
    ConsumeStats,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    ResetOffsetRequestHeader,
    SubscriptionGroupConfig,
)
from mq_common.protocol.convert import (
    consume_stats_from_proto,
    consume_stats_request_to_proto,
    consumer_connection_info_from_proto,
    consumer_queue_offset_from_proto,
    delete_group_request_to_proto,
    reset_offset_request_to_proto,
    subscription_group_config_from_proto,
    subscription_group_config_to_proto,
)

from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = ["ConsumerAdminCalls"]


class ConsumerAdminCalls(ConsumerBrokerCalls):
    """The admin RPCs of the Broker service's consumer side, one method each, on top of the consumer calls.
    Mirrors MQClientAPIImpl's admin calls (createSubscriptionGroup, deleteSubscriptionGroup,
    getAllSubscriptionGroup, getConsumeStats, invokeBrokerToResetOffset, deleteTopicInBroker,
    getConsumerConnectionList). Runs on the caller's loop; channels come from (and belong to) ``pool``.
    """

    async def update_subscription_group(
        self, addr: str, config: SubscriptionGroupConfig, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or replace ``config`` on this broker.

        Raises error_for_code(...) on a non-zero code (e.g. INVALID_PARAMETER 29 for an illegal group name)."""
        request = broker_pb2.UpdateSubscriptionGroupRequest(config=subscription_group_config_to_proto(config))
        resp = await _invoke(self._stub(addr).UpdateSubscriptionGroup(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def delete_subscription_group(
        self, addr: str, group: str, *, clean_offset: bool = False, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP: remove ``group`` (and its consumer offsets with ``clean_offset``).

        Raises error_for_code(...) on a non-zero code."""
        request = delete_group_request_to_proto(DeleteSubscriptionGroupRequestHeader(group, clean_offset))
        resp = await _invoke(self._stub(addr).DeleteSubscriptionGroup(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def get_all_subscription_groups(
        self, addr: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[SubscriptionGroupConfig]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group of this broker, in the broker's order.

        Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.GetAllSubscriptionGroupsRequest()
        resp = await _invoke(self._stub(addr).GetAllSubscriptionGroups(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return [subscription_group_config_from_proto(c) for c in resp.configs]

    async def get_consume_stats(
        self, addr: str, group: str, topic: str = "", timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> ConsumeStats:
        """GET_CONSUME_STATS: ``group``'s per-queue broker/consumer offsets on this broker (of ``topic``, or of
        every topic the group has offsets for when empty) and its consume TPS.

        Raises error_for_code(...) on a non-zero code (e.g. TOPIC_NOT_EXIST 17)."""
        request = consume_stats_request_to_proto(GetConsumeStatsRequestHeader(group, topic))
        resp = await _invoke(self._stub(addr).GetConsumeStats(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return consume_stats_from_proto(resp)

    async def reset_offset_by_timestamp(
        self,
        addr: str,
        group: str,
        topic: str,
        timestamp_ms: int,
        *,
        force: bool = True,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> list[ConsumerQueueOffset]:
        """INVOKE_BROKER_TO_RESET_OFFSET: set ``group``'s offsets of ``topic`` on this broker to those of store time
        ``timestamp_ms`` (ms since the epoch; without ``force`` only backwards); returns the offsets set.

        Raises error_for_code(...) on a non-zero code."""
        request = reset_offset_request_to_proto(ResetOffsetRequestHeader(group, topic, timestamp_ms, force))
        resp = await _invoke(self._stub(addr).ResetOffsetByTimestamp(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return [consumer_queue_offset_from_proto(o) for o in resp.offsets]

    async def delete_topic(self, addr: str, topic: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """DELETE_TOPIC_IN_BROKER: drop ``topic``'s config and consume queues on this broker.

        Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.DeleteTopicRequest(topic=topic)
        resp = await _invoke(self._stub(addr).DeleteTopic(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def get_consumer_connection_list(
        self, addr: str, group: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> ConsumerConnectionInfo:
        """GET_CONSUMER_CONNECTION_LIST: ``group``'s live instances on this broker and their subscriptions.

        Raises MQBrokerError CONSUMER_NOT_ONLINE (206) when none is live, error_for_code(...) otherwise."""
        request = broker_pb2.GetConsumerConnectionListRequest(consumer_group=group)
        resp = await _invoke(self._stub(addr).GetConsumerConnectionList(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return consumer_connection_info_from_proto(resp)
