"""v2 QueryRoute: a topic's route as the MessageQueue list RocketMQ 5 clients expect.

Per broker (name server order) the queue ids are numbered READ-only first, then WRITE-only, then READ_WRITE (from
the queue data's perm and read/write counts), ``accept_message_types`` is what the topic's ``message.type`` on that
broker accepts (its QueueData's; absent = NORMAL, MIXED = NORMAL, FIFO, DELAY, TRANSACTION; an unknown or
UNSPECIFIED type = MESSAGE_TYPE_UNSPECIFIED), ``broker.id`` is 0 (the master; the gateway proxies every call) and
``broker.endpoints`` is the gateway itself: the hosts the client addressed (the request's ``endpoints``) with the
gateway's port, else the gateway's listen address (the host name for a wildcard bind); the address scheme is
always set (IPv4 for dotted quads, IPv6 for literals with ':', DOMAIN_NAME otherwise). Runs on the gateway's
asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.v2.route.RouteActivity#queryRoute / #genMessageQueueFromQueueData /
#parseTopicMessageType.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.constants import PermName, validate_topic
from mq_common.errors import TopicNotExistError
from mq_common.message_type import TopicMessageType, accepted_message_types
from mq_common.protocol import QueueData, TopicRouteData

from mq_gateway.v2.codes import Code, V2Error, ok_status

MessageType = definition_pb2.MessageType
Permission = definition_pb2.Permission
AddressScheme = definition_pb2.AddressScheme
MASTER_BROKER_ID: Final = 0
WILDCARD_HOSTS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})
_V2_TYPE: Final[dict[TopicMessageType, definition_pb2.MessageType.ValueType]] = {
    TopicMessageType.UNSPECIFIED: MessageType.MESSAGE_TYPE_UNSPECIFIED,
    TopicMessageType.NORMAL: MessageType.NORMAL,
    TopicMessageType.FIFO: MessageType.FIFO,
    TopicMessageType.DELAY: MessageType.DELAY,
    TopicMessageType.TRANSACTION: MessageType.TRANSACTION,
}

# topic -> its message type (from its route: mq_common.protocol.TopicRouteData.topic_message_type).
TopicMessageTypes = Callable[[str], Awaitable[TopicMessageType]]


def v2_accept_message_types(topic_type: TopicMessageType) -> list[definition_pb2.MessageType.ValueType]:
    """``accept_message_types`` of a queue of a topic of ``topic_type`` (RouteActivity#parseTopicMessageType)."""
    return [_V2_TYPE[t] for t in accepted_message_types(topic_type)]


def route_message_types(routes: TopicRouteManager) -> TopicMessageTypes:
    """topic -> its type by the route ``routes`` holds (TopicNotExistError without one; MQError when no name
    server answers)."""

    async def message_types(topic: str) -> TopicMessageType:
        return (await routes.route(topic)).topic_message_type()

    return message_types


# validate_topic's verdicts, cached: clients send to the same few topics over and over.
_topic_remark: Final = functools.lru_cache(maxsize=4096)(validate_topic)


def check_topic_name(topic: str) -> None:
    """Raises V2Error(ILLEGAL_TOPIC 40002) with RocketMQ's remark for an illegal topic name."""
    remark = _topic_remark(topic)
    if remark is not None:
        raise V2Error(Code.ILLEGAL_TOPIC, remark)


def address_scheme(host: str) -> definition_pb2.AddressScheme.ValueType:
    """IPv4 / IPv6 for IP literals, DOMAIN_NAME for names."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return AddressScheme.DOMAIN_NAME
    return AddressScheme.IPv4 if ip.version == 4 else AddressScheme.IPv6


def advertised_host(listen_host: str) -> str:
    """The host to name when a client gave none: ``listen_host``, or this machine's name for a wildcard bind."""
    return socket.gethostname() if listen_host in WILDCARD_HOSTS else listen_host


def gateway_endpoints(requested: definition_pb2.Endpoints, host: str, port: int) -> definition_pb2.Endpoints:
    """The gateway's endpoints as the client addressed it: the requested hosts with ``port``; ``host:port`` when
    the request names none. The scheme is that of the first host."""
    hosts = [a.host for a in requested.addresses if a.host] or [host]
    return definition_pb2.Endpoints(
        scheme=address_scheme(hosts[0]), addresses=[definition_pb2.Address(host=h, port=port) for h in hosts]
    )


def _queue_permissions(data: QueueData) -> list[definition_pb2.Permission.ValueType]:
    readable, writable = PermName.is_readable(data.perm), PermName.is_writeable(data.perm)
    read_only = write_only = both = 0
    if readable and writable:
        both = min(data.read_queue_nums, data.write_queue_nums)
        read_only, write_only = data.read_queue_nums - both, data.write_queue_nums - both
    elif writable:
        write_only = data.write_queue_nums
    elif readable:
        read_only = data.read_queue_nums
    return [Permission.READ] * read_only + [Permission.WRITE] * write_only + [Permission.READ_WRITE] * both


def message_queues(
    topic: definition_pb2.Resource, route: TopicRouteData, endpoints: definition_pb2.Endpoints
) -> list[definition_pb2.MessageQueue]:
    """The MessageQueue list of ``route`` (module docstring for the order and the accepted types), brokers without
    a master left out."""
    queues: list[definition_pb2.MessageQueue] = []
    for data in route.queue_datas:
        broker = route.broker_data(data.broker_name)
        if broker is None or broker.master_addr() is None:
            continue
        pb_broker = definition_pb2.Broker(name=data.broker_name, id=MASTER_BROKER_ID, endpoints=endpoints)
        accepted = v2_accept_message_types(data.topic_message_type)
        for queue_id, permission in enumerate(_queue_permissions(data)):
            queues.append(
                definition_pb2.MessageQueue(
                    topic=topic, id=queue_id, permission=permission, broker=pb_broker, accept_message_types=accepted
                )
            )
    return queues


class RouteActivity:
    """QueryRoute over a TopicRouteManager; ``listen_host``/``port()`` name the gateway. :attr:`message_types`
    gives SendMessage a topic's type from the same route view."""

    def __init__(self, routes: TopicRouteManager, listen_host: str, port: Callable[[], int]) -> None:
        self.routes = routes
        self.message_types = route_message_types(routes)
        self._listen_host = advertised_host(listen_host)
        self._port = port

    async def query_route(self, request: service_pb2.QueryRouteRequest) -> service_pb2.QueryRouteResponse:
        """Raises V2Error ILLEGAL_TOPIC (40002); TOPIC_NOT_FOUND (40402) when the name server has no route (or
        one without queues); MQError when no name server answers."""
        name = request.topic.name
        check_topic_name(name)
        try:
            route = await self.routes.route(name)
        except TopicNotExistError as exc:
            raise V2Error(Code.TOPIC_NOT_FOUND, f"topic {name} not found: {exc.remark}") from None
        endpoints = gateway_endpoints(request.endpoints, self._listen_host, self._port())
        queues = message_queues(request.topic, route, endpoints)
        if not queues:
            raise V2Error(Code.TOPIC_NOT_FOUND, f"topic {name} has no queues on a broker with a master")
        return service_pb2.QueryRouteResponse(status=ok_status(), message_queues=queues)
