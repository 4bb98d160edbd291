"""ConsumerActivity: the v2 consumer RPCs (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment, the pull API) for the gateway's MessagingService servicer.

Every method answers a complete response with an in-band ``Status`` (mq_gateway.v2.codes); nothing raises out but
cancellation. Stateless: all state is in the brokers (receipt handles name their broker, offsets live on the
brokers), so any gateway replica serves any client. Runs on the gateway's asyncio loop; channels come from the
shared ChannelPool. Mirrors org.apache.rocketmq.proxy.grpc.v2.consumer.* and
org.apache.rocketmq.proxy.grpc.v2.DefaultGrpcMessingActivity's consumer half.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from apache.rocketmq.v2 import service_pb2
from mq_client.broker_client import BrokerClient
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_client.pop_calls import PopBrokerCalls
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.channels import ChannelPool
from mq_common.constants import MixAll, retry_topic
from mq_common.errors import MQError, TopicNotExistError
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.response_code import ResponseCode

from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.groups import SubscriptionGroupCache
from mq_gateway.v2.consumer.handles import ReceiptHandleActivity
from mq_gateway.v2.consumer.pull import PullSideActivity
from mq_gateway.v2.consumer.receive import ReceiveActivity
from mq_gateway.v2.context import ClientContext


class ConsumerActivity:
    """The consumer half of ``apache.rocketmq.v2.MessagingService``. ``routes`` and ``pool`` are the gateway's
    shared route cache and channel pool; ``config`` the proxy limits (defaults: ConsumerActivityConfig())."""

    def __init__(
        self, routes: TopicRouteManager, pool: ChannelPool, config: ConsumerActivityConfig | None = None
    ) -> None:
        self.config = config if config is not None else ConsumerActivityConfig()
        self._routes = routes
        self._broker = BrokerClient(pool)
        pop = PopBrokerCalls(pool)
        admin = ConsumerAdminCalls(pool)
        self._groups = SubscriptionGroupCache(
            admin,
            ttl_ms=self.config.group_config_ttl_ms,
            max_entries=self.config.max_cached_groups,
            timeout_ms=self.config.broker_timeout_ms,
        )
        self._handles = ReceiptHandleActivity(routes, pop, self._broker, self.config)
        self._receive = ReceiveActivity(routes, pop, self._groups, self._handles, self.config)
        self._pull = PullSideActivity(routes, admin, self._broker, self._groups, self.config)

    def receive_message(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """ReceiveMessage's response stream: status first, messages, delivery_timestamp last (receive.py).
        ``time_remaining_ms``: the call's remaining deadline (None: no deadline)."""
        return self._receive.receive_message(request, ctx, time_remaining_ms)

    async def ack_message(
        self, request: service_pb2.AckMessageRequest, ctx: ClientContext
    ) -> service_pb2.AckMessageResponse:
        """AckMessage: per-entry status; top-level OK, the common code or MULTIPLE_RESULTS (handles.py)."""
        return await self._handles.ack_message(request)

    async def change_invisible_duration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, ctx: ClientContext
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        """ChangeInvisibleDuration: the new receipt handle (handles.py)."""
        return await self._handles.change_invisible_duration(request)

    async def forward_message_to_dead_letter_queue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, ctx: ClientContext
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        """ForwardMessageToDeadLetterQueue: to %DLQ%<group>, then acked (handles.py)."""
        return await self._handles.forward_message_to_dead_letter_queue(request)

    async def query_assignment(
        self, request: service_pb2.QueryAssignmentRequest, ctx: ClientContext
    ) -> service_pb2.QueryAssignmentResponse:
        """QueryAssignment: one queue (id -1) per readable broker; FIFO groups one per read queue (pull.py)."""
        return await self._pull.query_assignment(request)

    async def query_offset(
        self, request: service_pb2.QueryOffsetRequest, ctx: ClientContext
    ) -> service_pb2.QueryOffsetResponse:
        """QueryOffset by BEGINNING / END / TIMESTAMP (pull.py)."""
        return await self._pull.query_offset(request)

    async def get_offset(
        self, request: service_pb2.GetOffsetRequest, ctx: ClientContext
    ) -> service_pb2.GetOffsetResponse:
        """GetOffset: the group's committed offset (pull.py)."""
        return await self._pull.get_offset(request)

    async def update_offset(
        self, request: service_pb2.UpdateOffsetRequest, ctx: ClientContext
    ) -> service_pb2.UpdateOffsetResponse:
        """UpdateOffset: commit the group's offset (pull.py)."""
        return await self._pull.update_offset(request)

    def pull_message(
        self, request: service_pb2.PullMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        """PullMessage's response stream: status, messages, next_offset (pull.py)."""
        return self._pull.pull_message(request, time_remaining_ms)

    async def subscription_group_config(self, group: str, topic: str = "") -> SubscriptionGroupConfig:
        """``group``'s config as the first broker that has it holds it (cached group_config_ttl_ms). The brokers
        are the masters of the route of ``topic`` (when given), else of ``%RETRY%<group>`` (created with the
        group), else of the default topic TBW102 (present while brokers auto-create topics). Raises MQError
        SUBSCRIPTION_GROUP_NOT_EXIST (26) when none of them has the group, transport errors."""
        for name in (topic, retry_topic(group), MixAll.DEFAULT_TOPIC):
            try:
                route = await self._routes.route(name) if name else None
            except TopicNotExistError:
                continue
            for broker_data in route.broker_datas if route is not None else ():
                addr = broker_data.master_addr()
                config = await self._groups.get(addr, group) if addr is not None else None
                if config is not None:
                    return config
        raise MQError(f"subscription group not exist, {group}", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)

    async def close(self) -> None:
        """Wait for running nacks and acks, then release the BrokerClient's streams (channels belong to the
        pool)."""
        await self._receive.close()
        await self._handles.close()
        await self._broker.close()


__all__ = ["ConsumerActivity", "ConsumerActivityConfig"]
