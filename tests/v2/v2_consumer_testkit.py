"""Helpers of the v2 consumer tests: a real local cluster (mq_local), ConsumerActivity instances on it (each one a
gateway replica: its own route cache), proto request builders and a reader of ReceiveMessage streams that checks
the proxy's stream order (status first, delivery_timestamp last)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import duration_pb2
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_client.producer import DefaultMQProducer, Message
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import TopicNotExistError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import SubscriptionGroupConfig
from mq_gateway.v2.consumer import ConsumerActivity, ConsumerActivityConfig
from mq_gateway.v2.context import ClientContext
from mq_local.cluster import LocalCluster
from mq_local.testing import read_all, spec_for_tests

CTX: Final = ClientContext(client_id="127.0.0.1@4242@0@v2c-test", language="PYTHON", client_version="5.1.2")
DEADLINE_S: Final = 60.0
POLL_MS: Final = 5_000
REMAINING_MS: Final = 30_000.0


@contextmanager
def started_cluster(data_dir: Path, **broker_env: str) -> Iterator[LocalCluster]:
    """mqnamesrv + two broker groups (broker-a, broker-b) on 127.0.0.1, with ``broker_env`` over the defaults."""
    spec = spec_for_tests(
        data_dir,
        broker_groups=2,
        flush_disk_type="ASYNC_FLUSH",
        broker_env={"MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000", **broker_env},
        start_wait_s=90.0,
    )
    with LocalCluster(spec) as cluster:
        yield cluster


def new_activity(
    cluster: LocalCluster, pool: ChannelPool, config: ConsumerActivityConfig | None = None
) -> ConsumerActivity:
    """One gateway replica's ConsumerActivity (its own route view over the cluster's name server)."""
    routes = TopicRouteManager(NameServerClient([cluster.namesrv_addr], pool))
    return ConsumerActivity(routes, pool, config)


def duration(ms: int) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromMilliseconds(ms)
    return out


def resource(name: str) -> definition_pb2.Resource:
    return definition_pb2.Resource(name=name)


def receive_request(
    group: str,
    topic: str,
    *,
    broker_name: str = "",
    batch_size: int = 32,
    invisible_ms: int | None = 60_000,
    poll_ms: int | None = POLL_MS,
    tag: str = "*",
    auto_renew: bool = False,
) -> service_pb2.ReceiveMessageRequest:
    request = service_pb2.ReceiveMessageRequest(
        group=resource(group),
        message_queue=definition_pb2.MessageQueue(
            topic=resource(topic), id=-1, broker=definition_pb2.Broker(name=broker_name)
        ),
        filter_expression=definition_pb2.FilterExpression(type=definition_pb2.FilterType.TAG, expression=tag),
        batch_size=batch_size,
        auto_renew=auto_renew,
    )
    if invisible_ms is not None:
        request.invisible_duration.CopyFrom(duration(invisible_ms))
    if poll_ms is not None:
        request.long_polling_timeout.CopyFrom(duration(poll_ms))
    return request


@dataclass(frozen=True, slots=True)
class Received:
    """One ReceiveMessage stream: its status and messages (order already checked)."""

    status: definition_pb2.Status
    messages: list[definition_pb2.Message]


async def receive(
    activity: ConsumerActivity, request: service_pb2.ReceiveMessageRequest, remaining_ms: float | None = REMAINING_MS
) -> Received:
    """Read a whole ReceiveMessage stream; assert one status first, messages only after an OK status, and a
    delivery_timestamp last."""
    responses = [r async for r in activity.receive_message(request, CTX, remaining_ms)]
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds[0] == "status", kinds
    assert kinds[-1] == "delivery_timestamp", kinds
    assert set(kinds[1:-1]) <= {"message"}, kinds
    status = responses[0].status
    messages = [r.message for r in responses[1:-1]]
    assert not messages or status.code == definition_pb2.Code.OK
    return Received(status, messages)


async def receive_until(
    activity: ConsumerActivity, requests: Sequence[service_pb2.ReceiveMessageRequest], want: int
) -> list[definition_pb2.Message]:
    """Receive with each of ``requests`` in turn (e.g. one per broker) until ``want`` messages arrived (or
    DEADLINE_S passed); asserts every status is OK or MESSAGE_NOT_FOUND."""
    got: list[definition_pb2.Message] = []
    deadline = time.monotonic() + DEADLINE_S
    turn = itertools.cycle(requests)
    while len(got) < want and time.monotonic() < deadline:
        answer = await receive(activity, next(turn))
        assert answer.status.code in (definition_pb2.Code.OK, definition_pb2.Code.MESSAGE_NOT_FOUND), answer.status
        got += answer.messages
    return got


def ack_request(group: str, topic: str, messages: list[definition_pb2.Message]) -> service_pb2.AckMessageRequest:
    entries = [
        service_pb2.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in messages
    ]
    return service_pb2.AckMessageRequest(group=resource(group), topic=resource(topic), entries=entries)


async def send_all(
    producer: DefaultMQProducer, topic: str, count: int, *, tags: str = "", body_prefix: str = "m"
) -> dict[str, bytes]:
    """Send ``count`` messages (keys "k<i> x<i>", user property p=v); their ids -> bodies."""
    sent: dict[str, bytes] = {}
    for i in range(count):
        body = f"{body_prefix}{i}".encode()
        message = Message(topic, body, tags=tags, keys=(f"k{i}", f"x{i}"), properties={"p": "v"})
        sent[(await producer.send(message)).msg_id] = body
    return sent


async def stored(cluster: LocalCluster, topic: str, want: int) -> list[MessageExt]:
    """The messages of ``topic`` once at least ``want`` are readable (the topic is routed a heartbeat after the
    broker creates it)."""
    deadline = time.monotonic() + DEADLINE_S
    found: list[MessageExt] = []
    while time.monotonic() < deadline:
        try:
            found = [m for _, m in await read_all(cluster.namesrv_addr, topic)]
        except TopicNotExistError:
            found = []
        if len(found) >= want:
            return found
        await asyncio.sleep(0.2)
    return found


async def update_group(cluster: LocalCluster, pool: ChannelPool, topic: str, config: SubscriptionGroupConfig) -> None:
    """Create or replace ``config`` on every master of ``topic``'s route."""
    route = await NameServerClient([cluster.namesrv_addr], pool).get_route_info_by_topic(topic)
    admin = ConsumerAdminCalls(pool)
    for broker in route.broker_datas:
        addr = broker.master_addr()
        assert addr is not None
        await admin.update_subscription_group(addr, config)
