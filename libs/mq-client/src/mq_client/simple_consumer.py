"""SimpleConsumer: receive messages by POP, then ack each one, or change how long it stays invisible.

Mirrors the RocketMQ 5 client's SimpleConsumer (org.apache.rocketmq.client.apis.consumer.SimpleConsumer:
receive(maxMessageNum, invisibleDuration), ack(messageView), changeInvisibleDuration(messageView, duration), close)
and its MessageView, over the broker's PopMessage / AckMessage / ChangeInvisibleTime (mq_client.pop_calls). A
receive pops one broker of one subscribed topic, round-robin over every (topic, broker) pair of the routes, and
is held by the broker up to ``await_duration_ms`` when nothing is there (long polling). A message not acked within
its invisible duration is delivered again, from ``%RETRY%<group>``, with ``delivery_attempt`` one higher; past the
group's retryMaxTimes it goes to ``%DLQ%<group>``. As RocketMQ's, calls are never retried here.

Runs on the caller's asyncio loop; one SimpleConsumer per loop. Routes come from the name servers (refreshed
every ROUTE_REFRESH_INTERVAL_MS, and after a transport failure).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Final, Self

from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool
from mq_common.codec import MessageExt
from mq_common.constants import MessageConst, PermName
from mq_common.errors import MQClientError, MQError, RemotingError, error_for_code
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
    PopStatus,
    TopicRouteData,
)
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig

from mq_client.pop_calls import PopBrokerCalls

DEFAULT_AWAIT_DURATION_MS: Final = 20_000
"""The RocketMQ 5 Python client's default await duration (long polling)."""
ROUTE_REFRESH_INTERVAL_MS: Final = 30_000
"""ClientConfiguration / MQClientInstance: routes are fetched again this often."""
MAX_MESSAGE_NUM: Final = 32
"""The broker pops at most 32 messages per call (RocketMQ's clients do not cap; the broker refuses more)."""
_INVALID: Final = ResponseCode.INVALID_PARAMETER


@dataclass(frozen=True, slots=True)
class MessageView:
    """A received message. Mirrors org.apache.rocketmq.client.apis.message.MessageView.

    ``message_id``: the producer's id (UNIQ_KEY; the offset msg id when there is none). ``topic``: the topic it was
    sent to (also for a redelivery from the retry topic). ``properties``: the user's properties (RocketMQ's
    reserved ones left out). ``delivery_attempt``: 1 on the first delivery. ``receipt_handle``: what acks it
    (opaque); ``broker_name`` says which broker holds it. Timestamps in ms since the epoch.
    """

    message_id: str
    topic: str
    body: bytes
    tag: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    delivery_attempt: int
    receipt_handle: str
    broker_name: str
    queue_id: int
    queue_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str

    @classmethod
    def of(cls, message: MessageExt, receipt_handle: str, broker_name: str) -> MessageView:
        user = {k: v for k, v in message.properties.items() if k not in MessageConst.RESERVED}
        host, port = message.born_host
        return cls(
            message_id=message.uniq_key or message.offset_msg_id,
            topic=message.topic,
            body=message.body,
            tag=message.tags,
            keys=tuple(message.keys),
            properties=MappingProxyType(user),
            delivery_attempt=message.reconsume_times + 1,
            receipt_handle=receipt_handle,
            broker_name=broker_name,
            queue_id=message.queue_id,
            queue_offset=message.queue_offset,
            born_timestamp_ms=message.born_timestamp_ms,
            store_timestamp_ms=message.store_timestamp_ms,
            born_host=f"{host}:{port}",
        )


class SimpleConsumer:
    """Receive, ack and change the invisible duration of messages of ``subscriptions`` (topic -> tag expression,
    ``"*"`` or ``"TagA || TagB"``) for ``consumer_group``. Use as an async context manager, or :meth:`start` then
    :meth:`close`. ``init_mode``: where the group starts on a queue it never consumed (ConsumeInitMode.LAST, as
    RocketMQ's proxy; the broker still starts at 0 while the queue's first message is in memory).
    """

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        consumer_group: str,
        subscriptions: Mapping[str, str],
        *,
        await_duration_ms: int = DEFAULT_AWAIT_DURATION_MS,
        request_timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        route_timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        init_mode: int = ConsumeInitMode.LAST,
        pool: ChannelPool | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        """Raises MQClientError (INVALID_PARAMETER) without subscriptions or group, or for a negative await
        duration; MQClientError (RPC_ADDR_IS_NULL) without name servers. ``tls`` makes the own ChannelPool (when
        ``pool`` is None) a TLS one."""
        if not consumer_group or not subscriptions:
            raise MQClientError("a consumer group and at least one subscription are required", _INVALID)
        if await_duration_ms < 0:
            raise MQClientError(f"awaitDuration {await_duration_ms} ms is negative", _INVALID)
        self._own_pool = pool is None
        self._pool = ChannelPool(tls) if pool is None else pool
        self._namesrv = NameServerClient(namesrv_addrs, self._pool)
        self._calls = PopBrokerCalls(self._pool)
        self.consumer_group = consumer_group
        self.subscriptions = dict(subscriptions)
        self.await_duration_ms = await_duration_ms
        self.request_timeout_ms = request_timeout_ms
        self.route_timeout_ms = route_timeout_ms
        self.init_mode = init_mode
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._turn = itertools.count()
        self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Fetch every subscribed topic's route. Raises TopicNotExistError (17) for a topic without a route,
        RemotingError when no name server answers."""
        for topic in self.subscriptions:
            await self._refresh_route(topic)
        self._started = True

    async def close(self) -> None:
        """Forget routes; close the channels when this consumer created the pool. Idempotent."""
        self._started = False
        self._routes.clear()
        if self._own_pool:
            await self._pool.close()

    async def receive(self, max_message_num: int, invisible_duration_ms: int) -> list[MessageView]:
        """Up to ``max_message_num`` (1..32) messages of the next (topic, broker) in turn, each invisible to other
        receives for ``invisible_duration_ms``; empty when nothing came within the await duration (or the broker
        holds too many polls). Mirrors SimpleConsumer#receive.

        Raises MQClientError (INVALID_PARAMETER) for a bad count or duration or when not started,
        MQClientError (TOPIC_NOT_EXIST) when no subscribed topic has a readable queue, the broker's refusal
        (error_for_code: e.g. INVALID_PARAMETER for an invisible duration out of its bounds,
        SUBSCRIPTION_GROUP_NOT_EXIST 26), RemotingError / RemotingTimeoutError (the route is refreshed)."""
        self._check_started()
        if not 0 < max_message_num <= MAX_MESSAGE_NUM:
            raise MQClientError(f"maxMessageNum {max_message_num} is not in [1, {MAX_MESSAGE_NUM}]", _INVALID)
        if invisible_duration_ms <= 0:
            raise MQClientError(f"invisibleDuration {invisible_duration_ms} ms must be positive", _INVALID)
        topic, broker_name, addr = await self._next_target()
        request = PopMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=topic,
            max_msg_nums=max_message_num,
            invisible_time_ms=invisible_duration_ms,
            poll_time_ms=self.await_duration_ms,
            expression=self.subscriptions[topic],
            init_mode=self.init_mode,
        )
        try:
            result = await self._calls.pop_message(addr, request, self.request_timeout_ms, broker_name)
        except RemotingError:
            await self._refresh_route(topic)
            raise
        if result.status is not PopStatus.FOUND:
            return []
        return [MessageView.of(p.message, p.receipt_handle, broker_name) for p in result.messages]

    async def ack(self, message_view: MessageView) -> None:
        """Acknowledge one message. Mirrors SimpleConsumer#ack. Raises the broker's refusal: NO_MESSAGE (208)
        when its invisible duration has passed or it was acked already, INVALID_PARAMETER (29) for a foreign or
        damaged handle (error_for_code), and transport errors."""
        error = (await self.ack_batch([message_view]))[0]
        if error is not None:
            raise error

    async def ack_batch(self, message_views: Sequence[MessageView]) -> list[MQError | None]:
        """Acknowledge many messages: one AckMessage per (broker, topic). Returns, per view in order, None when
        acked or the broker's refusal of that handle (not raised). Raises MQClientError when not started, a
        request-level refusal and transport errors."""
        self._check_started()
        results: list[MQError | None] = [None] * len(message_views)
        groups: dict[tuple[str, str], list[int]] = {}
        for i, view in enumerate(message_views):
            groups.setdefault((view.broker_name, view.topic), []).append(i)
        for (broker_name, topic), positions in groups.items():
            addr = await self._broker_addr(topic, broker_name)
            handles = tuple(message_views[i].receipt_handle for i in positions)
            request = AckMessageRequestHeader(consumer_group=self.consumer_group, topic=topic, receipt_handles=handles)
            answer = await self._calls.ack_message(addr, request, self.request_timeout_ms, broker_name)
            for i, code, remark in zip(positions, answer.codes, answer.remarks, strict=True):
                if code != ResponseCode.SUCCESS:
                    results[i] = error_for_code(code, remark, broker_name)
        return results

    async def change_invisible_duration(self, message_view: MessageView, invisible_duration_ms: int) -> MessageView:
        """Make the message invisible for ``invisible_duration_ms`` from now; returns the view with its new
        receipt handle (the old one no longer acks). Mirrors SimpleConsumer#changeInvisibleDuration. Raises the
        broker's refusal (NO_MESSAGE 208, INVALID_PARAMETER 29) and transport errors."""
        self._check_started()
        addr = await self._broker_addr(message_view.topic, message_view.broker_name)
        request = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.consumer_group,
            topic=message_view.topic,
            receipt_handle=message_view.receipt_handle,
            invisible_time_ms=invisible_duration_ms,
        )
        answer = await self._calls.change_invisible_time(
            addr, request, self.request_timeout_ms, message_view.broker_name
        )
        return dataclasses.replace(message_view, receipt_handle=answer.receipt_handle)

    # --- routes ---------------------------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise MQClientError("the simple consumer is not started", _INVALID)

    async def _refresh_route(self, topic: str) -> TopicRouteData:
        route = await self._namesrv.get_route_info_by_topic(topic, self.route_timeout_ms)
        self._routes[topic] = (time.monotonic(), route)
        return route

    async def _route(self, topic: str) -> TopicRouteData:
        cached = self._routes.get(topic)
        if cached is None or (time.monotonic() - cached[0]) * 1000 >= ROUTE_REFRESH_INTERVAL_MS:
            return await self._refresh_route(topic)
        return cached[1]

    async def _next_target(self) -> tuple[str, str, str]:
        """(topic, broker name, address) of the next readable broker of a subscribed topic, in turn."""
        targets: list[tuple[str, str, str]] = []
        for topic in self.subscriptions:
            route = await self._route(topic)
            for queue_data in route.queue_datas:
                addr = route.find_broker_addr(queue_data.broker_name)
                if addr and queue_data.read_queue_nums > 0 and PermName.is_readable(queue_data.perm):
                    targets.append((topic, queue_data.broker_name, addr))
        if not targets:
            raise MQClientError(f"no readable queue for {sorted(self.subscriptions)}", ResponseCode.TOPIC_NOT_EXIST)
        return targets[next(self._turn) % len(targets)]

    async def _broker_addr(self, topic: str, broker_name: str) -> str:
        """The address of ``broker_name`` in ``topic``'s route (refreshed once when missing). Raises MQClientError
        (BROKER_NOT_EXIST, 211)."""
        addr = (await self._route(topic)).find_broker_addr(broker_name)
        if addr is None:
            addr = (await self._refresh_route(topic)).find_broker_addr(broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist", ResponseCode.BROKER_NOT_EXIST)
        return addr
