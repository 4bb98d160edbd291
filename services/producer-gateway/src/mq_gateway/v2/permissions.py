"""What each apache.rocketmq.v2 RPC needs: its (resource, action) pairs for the gateway's ACL check.

| RPC | needs |
|---|---|
- QueryRoute: Topic Any (Pub or Sub);
- SendMessage: Topic Pub (every distinct topic of the request); EndTransaction, RecallMessage: Topic Pub;
- ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue, QueryAssignment, ChangeInvisibleDuration,
  PullMessage, GetOffset, UpdateOffset: Group Sub and Topic Sub; QueryOffset: Topic Sub (it names no group);
- Heartbeat, NotifyClientTermination: Group Sub for consumers (a group is named), nothing for producers;
- Telemetry, SyncLiteSubscription: authentication only.

Mirrors org.apache.rocketmq.auth.authorization.builder.DefaultAuthorizationContextBuilder's gRPC part. Differences
on purpose: SendMessage checks every topic of the request (RocketMQ checks the first message's only);
ChangeInvisibleDuration also needs Topic Sub; the pull and offset RPCs (not checked by RocketMQ) need Sub.
Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.auth.model import Action, Resource

from mq_gateway.auth import Permission

_NOTHING: Final[tuple[Permission, ...]] = ()
_PRODUCER_TYPES: Final = frozenset({definition_pb2.PRODUCER, definition_pb2.CLIENT_TYPE_UNSPECIFIED})


def _topic(name: str, action: Action) -> Permission:
    return (Resource.of_topic(name), action)


def _sub(group: str, topic: str) -> tuple[Permission, ...]:
    return ((Resource.of_group(group), Action.SUB), _topic(topic, Action.SUB))


def _send(request: service_pb2.SendMessageRequest) -> tuple[Permission, ...]:
    topics = dict.fromkeys(m.topic.name for m in request.messages)
    return tuple(_topic(t, Action.PUB) for t in topics)


def _group_only(group: str) -> tuple[Permission, ...]:
    return ((Resource.of_group(group), Action.SUB),) if group.strip() else _NOTHING


def _heartbeat(request: service_pb2.HeartbeatRequest) -> tuple[Permission, ...]:
    return _NOTHING if request.client_type in _PRODUCER_TYPES else _group_only(request.group.name)


_RULES: Final[dict[type[Any], Callable[[Any], tuple[Permission, ...]]]] = {
    service_pb2.QueryRouteRequest: lambda r: (_topic(r.topic.name, Action.ANY),),
    service_pb2.SendMessageRequest: _send,
    service_pb2.EndTransactionRequest: lambda r: (_topic(r.topic.name, Action.PUB),),
    service_pb2.RecallMessageRequest: lambda r: (_topic(r.topic.name, Action.PUB),),
    service_pb2.ReceiveMessageRequest: lambda r: _sub(r.group.name, r.message_queue.topic.name),
    service_pb2.AckMessageRequest: lambda r: _sub(r.group.name, r.topic.name),
    service_pb2.ForwardMessageToDeadLetterQueueRequest: lambda r: _sub(r.group.name, r.topic.name),
    service_pb2.QueryAssignmentRequest: lambda r: _sub(r.group.name, r.topic.name),
    service_pb2.ChangeInvisibleDurationRequest: lambda r: _sub(r.group.name, r.topic.name),
    service_pb2.PullMessageRequest: lambda r: _sub(r.group.name, r.message_queue.topic.name),
    service_pb2.GetOffsetRequest: lambda r: _sub(r.group.name, r.message_queue.topic.name),
    service_pb2.UpdateOffsetRequest: lambda r: _sub(r.group.name, r.message_queue.topic.name),
    service_pb2.QueryOffsetRequest: lambda r: (_topic(r.message_queue.topic.name, Action.SUB),),
    service_pb2.HeartbeatRequest: _heartbeat,
    service_pb2.NotifyClientTerminationRequest: lambda r: _group_only(r.group.name),
}


def permissions_of(request: object) -> tuple[Permission, ...]:
    """The (resource, action) pairs ``request`` needs; () for authentication-only RPCs. Never raises."""
    rule = _RULES.get(type(request))
    return rule(request) if rule is not None else _NOTHING
