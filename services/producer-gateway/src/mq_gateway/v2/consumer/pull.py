"""QueryAssignment and RocketMQ 5's pull API: QueryOffset, GetOffset, UpdateOffset, PullMessage.

QueryAssignment answers one assignment per broker with readable queues, queue id -1 ("any queue", what
ReceiveMessage pops), or one per read queue for a FIFO (orderly) group; the broker endpoints are the request's
own (the gateway is the access point), broker id 0; none readable: FORBIDDEN 40300. The pull API maps onto the
brokers' offsets (GET_TOPIC_STATS_INFO min/max, SEARCH_OFFSET_BY_TIMESTAMP, QUERY/UPDATE_CONSUMER_OFFSET) and
PULL_MESSAGE; PullMessage streams ``{status}`` first, then each ``{message}``, then ``{next_offset}``. PullMessage
chooses the broker of the queue's group as the consumers of mq_client do (mq_client.consumer.pull_node: the
master, the slave the last answer suggested, a slave while the master is away); offsets and POP (ReceiveMessage)
stay on the master (RocketMQ's proxy, too, pops and commits offsets on masters only). Runs on the gateway's
asyncio loop. Mirrors org.apache.rocketmq.proxy.grpc.v2.route.RouteActivity#queryAssignment and the proxy's
ConsumerProcessor offset / pull calls.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.broker_client import BrokerClient
from mq_client.consumer.pull_node import FindBrokerResult, PullNodeTable
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.constants import MixAll, PermName
from mq_common.errors import MQClientError, MQError
from mq_common.protocol import ConsumerQueueOffset, MessageQueue, PullStatus, TopicRouteData
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code, V2Code, V2Error, ok_status, status_of
from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.converter import fill_message
from mq_gateway.v2.consumer.groups import SubscriptionGroupCache
from mq_gateway.v2.consumer.validation import check_group, check_topic, duration_ms, tag_expression, timestamp_ms

# GetOffset: a group with no committed offset of the queue is OFFSET_NOT_FOUND, not MESSAGE_NOT_FOUND.
OFFSET_OVERRIDES: Final[Mapping[int, V2Code]] = MappingProxyType({ResponseCode.QUERY_NOT_FOUND: Code.OFFSET_NOT_FOUND})
_PULL_STATUS: Final = MappingProxyType(
    {
        PullStatus.FOUND: (Code.OK, "OK"),
        PullStatus.NO_NEW_MSG: (Code.MESSAGE_NOT_FOUND, "no new message"),
        PullStatus.NO_MATCHED_MSG: (Code.MESSAGE_NOT_FOUND, "no matched message"),
        PullStatus.OFFSET_ILLEGAL: (Code.ILLEGAL_OFFSET, "the offset is out of the queue's range"),
    }
)


def permission_of(perm: int) -> definition_pb2.Permission.ValueType:
    """RouteActivity#convertToPermission: RocketMQ perm bits -> v2 Permission."""
    readable, writeable = PermName.is_readable(perm), PermName.is_writeable(perm)
    if readable and writeable:
        return definition_pb2.Permission.READ_WRITE
    if readable:
        return definition_pb2.Permission.READ
    return definition_pb2.Permission.WRITE if writeable else definition_pb2.Permission.NONE


def endpoints_with_scheme(endpoints: definition_pb2.Endpoints) -> definition_pb2.Endpoints:
    """``endpoints`` with a scheme (SDKs fail on UNSPECIFIED): IPV4 / IPV6 by the first host, else DOMAIN_NAME."""
    out = definition_pb2.Endpoints()
    out.CopyFrom(endpoints)
    if out.scheme == definition_pb2.AddressScheme.ADDRESS_SCHEME_UNSPECIFIED:
        host = out.addresses[0].host if out.addresses else ""
        version = 0
        with contextlib.suppress(ValueError):
            version = ipaddress.ip_address(host).version
        out.scheme = {4: definition_pb2.AddressScheme.IPv4, 6: definition_pb2.AddressScheme.IPv6}.get(
            version, definition_pb2.AddressScheme.DOMAIN_NAME
        )
    return out


class PullSideActivity:
    """QueryAssignment and the pull API on the brokers of the topic's route."""

    def __init__(
        self,
        routes: TopicRouteManager,
        offsets: ConsumerBrokerCalls,
        broker: BrokerClient,
        groups: SubscriptionGroupCache,
        config: ConsumerActivityConfig,
    ) -> None:
        self._routes = routes
        self._offsets = offsets
        self._broker = broker
        self._groups = groups
        self._config = config
        self._pull_nodes = PullNodeTable()

    async def query_assignment(
        self, request: service_pb2.QueryAssignmentRequest
    ) -> service_pb2.QueryAssignmentResponse:
        """Assignments of ``request.topic`` for ``request.group`` (see the module docstring). Refusals: 40002,
        40003, TOPIC_NOT_FOUND 40402, FORBIDDEN 40300."""
        try:
            topic, group = check_topic(request.topic), check_group(request.group)
            route = await self._routes.route(topic)
            fifo = await self._is_orderly(route, group)
            endpoints = endpoints_with_scheme(request.endpoints)
            assignments = [
                definition_pb2.Assignment(message_queue=q) for q in self._queues(request, route, fifo, endpoints)
            ]
            if not assignments:
                raise V2Error(Code.FORBIDDEN, "no readable queue")
        except Exception as exc:
            return service_pb2.QueryAssignmentResponse(status=status_of(exc))
        return service_pb2.QueryAssignmentResponse(status=ok_status(), assignments=assignments)

    @staticmethod
    def _queues(
        request: service_pb2.QueryAssignmentRequest,
        route: TopicRouteData,
        fifo: bool,
        endpoints: definition_pb2.Endpoints,
    ) -> list[definition_pb2.MessageQueue]:
        queues: list[definition_pb2.MessageQueue] = []
        for data in route.queue_datas:
            broker_data = route.broker_data(data.broker_name)
            if not (PermName.is_readable(data.perm) and data.read_queue_nums > 0) or broker_data is None:
                continue
            if broker_data.master_addr() is None:
                continue
            broker = definition_pb2.Broker(name=data.broker_name, id=MixAll.MASTER_ID, endpoints=endpoints)
            ids = range(data.read_queue_nums) if fifo else (-1,)
            queues += [
                definition_pb2.MessageQueue(
                    topic=request.topic, id=i, permission=permission_of(data.perm), broker=broker
                )
                for i in ids
            ]
        return queues

    async def _is_orderly(self, route: TopicRouteData, group: str) -> bool:
        for broker_data in route.broker_datas:
            addr = broker_data.master_addr()
            if addr is None:
                continue
            try:
                config = await self._groups.get(addr, group)
            except MQError:
                continue
            if config is not None:
                return config.consume_message_orderly
        return False

    async def _queue_addr(self, queue: definition_pb2.MessageQueue) -> tuple[str, str]:
        topic = check_topic(queue.topic)
        if queue.id < 0:
            raise V2Error(Code.BAD_REQUEST, f"queue id {queue.id} is not a queue")
        return topic, await self._routes.master_addr(topic, queue.broker.name)

    async def query_offset(self, request: service_pb2.QueryOffsetRequest) -> service_pb2.QueryOffsetResponse:
        """The queue's min offset (BEGINNING), max offset (END) or first offset stored at or after ``timestamp``
        (TIMESTAMP). Refusals: 40002, TOPIC_NOT_FOUND 40402, BAD_REQUEST for a queue id < 0, no timestamp or
        one outside years 1 .. 9999."""
        try:
            offset = await self._query_offset(request)
        except Exception as exc:
            return service_pb2.QueryOffsetResponse(status=status_of(exc))
        return service_pb2.QueryOffsetResponse(status=ok_status(), offset=offset)

    async def _query_offset(self, request: service_pb2.QueryOffsetRequest) -> int:
        queue = request.message_queue
        topic, addr = await self._queue_addr(queue)
        timeout_ms = self._config.broker_timeout_ms
        if request.query_offset_policy == definition_pb2.QueryOffsetPolicy.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise V2Error(Code.BAD_REQUEST, "a TIMESTAMP query needs a timestamp")
            when_ms = timestamp_ms(request.timestamp)
            return await self._offsets.search_offset_by_timestamp(addr, topic, queue.id, when_ms, timeout_ms)
        stats = await self._broker.get_topic_stats(addr, topic, timeout_ms)
        for stat in stats:
            if stat.queue_id == queue.id:
                end = request.query_offset_policy == definition_pb2.QueryOffsetPolicy.END
                return stat.max_offset if end else stat.min_offset
        raise V2Error(Code.BAD_REQUEST, f"topic {topic} has no queue {queue.id} on {queue.broker.name}")

    async def get_offset(self, request: service_pb2.GetOffsetRequest) -> service_pb2.GetOffsetResponse:
        """The group's committed offset of the queue. Refusals: 40002, 40003, OFFSET_NOT_FOUND 40404."""
        try:
            group = check_group(request.group)
            topic, addr = await self._queue_addr(request.message_queue)
            offset = await self._offsets.query_consumer_offset(
                addr, group, topic, request.message_queue.id, timeout_ms=self._config.broker_timeout_ms
            )
        except Exception as exc:
            return service_pb2.GetOffsetResponse(status=status_of(exc, OFFSET_OVERRIDES))
        return service_pb2.GetOffsetResponse(status=ok_status(), offset=offset)

    async def update_offset(self, request: service_pb2.UpdateOffsetRequest) -> service_pb2.UpdateOffsetResponse:
        """Commit the group's offset of the queue. Refusals: 40002, 40003, ILLEGAL_OFFSET 40019 for a negative
        offset, CONSUMER_GROUP_NOT_FOUND 40403 from the broker."""
        try:
            group = check_group(request.group)
            if request.offset < 0:
                raise V2Error(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
            topic, addr = await self._queue_addr(request.message_queue)
            offset = ConsumerQueueOffset(group, topic, request.message_queue.id, request.offset)
            outcome = await self._offsets.update_consumer_offsets(addr, [offset], self._config.broker_timeout_ms)
            if outcome[0] is not None:
                raise outcome[0]
        except Exception as exc:
            return service_pb2.UpdateOffsetResponse(status=status_of(exc))
        return service_pb2.UpdateOffsetResponse(status=ok_status())

    async def pull_message(
        self, request: service_pb2.PullMessageRequest, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        """``{status}``, each ``{message}``, ``{next_offset}`` (after a refusal only the status). The broker holds
        the pull up to long_polling_timeout (capped at the max poll time and the remaining deadline). Status:
        OK with messages, MESSAGE_NOT_FOUND, ILLEGAL_OFFSET, or a refusal (40002, 40003, 40010, 40403, ...)."""
        try:
            group = check_group(request.group)
            expression = tag_expression(request.filter_expression)
            mq, found = await self._pull_broker(request.message_queue)
            poll_ms, timeout_ms = self._pull_times(request, time_remaining_ms)
            result = await self._broker.pull_message(
                found.broker_addr,
                mq.topic,
                request.message_queue.id,
                request.offset,
                max(1, min(request.batch_size, self._config.pull_batch_size_max)),
                subscription=expression,
                timeout_ms=timeout_ms,
                consumer_group=group,
                suspend_timeout_ms=poll_ms,
            )
        except Exception as exc:
            yield service_pb2.PullMessageResponse(status=status_of(exc))
            return
        self._pull_nodes.update(mq, result.suggest_which_broker_id)
        code, text = _PULL_STATUS[result.status]
        yield service_pb2.PullMessageResponse(status=definition_pb2.Status(code=code, message=text))
        for message in result.messages:
            response = service_pb2.PullMessageResponse()
            fill_message(response.message, message)
            yield response
        yield service_pb2.PullMessageResponse(next_offset=result.next_begin_offset)

    async def _pull_broker(self, queue: definition_pb2.MessageQueue) -> tuple[MessageQueue, FindBrokerResult]:
        """The queue and the broker of its group to pull it from now. Raises V2Error (40002, BAD_REQUEST for a
        queue id < 0), TopicNotExistError, MQClientError (BROKER_NOT_EXIST) when the route has no such group."""
        topic = check_topic(queue.topic)
        if queue.id < 0:
            raise V2Error(Code.BAD_REQUEST, f"queue id {queue.id} is not a queue")
        mq = MessageQueue(topic, queue.broker.name, queue.id)
        found = self._pull_nodes.select(mq, (await self._routes.route(topic)).broker_data(mq.broker_name))
        if found is None:
            self._routes.invalidate(topic)
            remark = f"broker {mq.broker_name!r} is not in the route of topic {topic!r}"
            raise MQClientError(remark, ResponseCode.BROKER_NOT_EXIST)
        return mq, found

    def _pull_times(self, request: service_pb2.PullMessageRequest, time_remaining_ms: float | None) -> tuple[int, int]:
        poll_ms = min(max(0, duration_ms(request.long_polling_timeout)), self._config.long_polling_timeout_max_ms)
        timeout_ms = self._config.broker_timeout_ms
        if time_remaining_ms is not None:
            poll_ms = max(0, min(poll_ms, int(time_remaining_ms) - self._config.poll_reserve_ms))
            timeout_ms = max(1, min(timeout_ms, int(time_remaining_ms) - poll_ms))
        return poll_ms, timeout_ms
