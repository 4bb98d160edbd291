"""ReceiveMessage: a POP of one broker, held by the broker (long polling), answered as the proxy's stream.

Stream order (the proxy's ReceiveMessageResponseStreamWriter): ``{status: OK}`` first, one ``{message}`` per
message, ``{delivery_timestamp: now}`` last; nothing found: MESSAGE_NOT_FOUND 40401 + delivery_timestamp; a full
polling queue: TOO_MANY_REQUESTS 42900; any refusal: its status + delivery_timestamp. Dead letters: a popped
message whose delivery attempt would exceed the group's max attempts (retryMaxTimes + 1) goes to %DLQ%<group> and
is acked instead of delivered (the proxy's PopMessageResultFilterImpl; the broker's revive already sends messages
past retryMaxTimes to the DLQ itself, so this only catches groups whose limit was lowered meanwhile). Runs on the
gateway's asyncio loop. Mirrors org.apache.rocketmq.proxy.grpc.v2.consumer.ReceiveMessageActivity.

FIFO: a pop carries the request's ``attempt_id`` and, for a group whose consumeMessageOrderly is on (the v2
settings' ``fifo``) as the gateway's group cache holds it, ``order`` (the proxy's ReceiveMessageActivity passes
``fifo`` and the attempt id to PopMessageRequestHeader). The broker pops orderly on its own copy of the group's flag
too (the authority: a group not cached yet, or auto-created by this very pop, is still popped in order), and uses
the attempt id only for orderly pops: a receive the client retries after a lost answer gets the same messages. The
broker sees ``<client id>/<attempt id>``, so another client replaying an attempt id never gets the messages of the
client that made it: while they are in flight its receive is refused FORBIDDEN (the broker's ILLEGAL_OPERATION 604).

POP reads the master of a broker group only, never a slave, as RocketMQ's proxy and broker do (POP keeps
invisibility, checkpoints and acks on the master; a slave answers no pops): while a group's master is away its
queues are not popped (pull consumers read them from a slave, mq_client.consumer.pull_node).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.pop_calls import PopBrokerCalls
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.constants import PermName
from mq_common.errors import MQError, RemotingError
from mq_common.logging import get_logger
from mq_common.protocol import (
    ConsumeInitMode,
    PopMessageRequestHeader,
    PoppedMessageExt,
    PopResult,
    PopStatus,
    QueueData,
)

from mq_gateway.v2.codes import Code, V2Error, ok_status, status_of
from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.converter import fill_message, now_timestamp
from mq_gateway.v2.consumer.groups import SubscriptionGroupCache
from mq_gateway.v2.consumer.handles import ReceiptHandleActivity
from mq_gateway.v2.consumer.validation import (
    check_group,
    check_topic,
    poll_time_ms,
    receive_invisible_time,
    tag_expression,
)
from mq_gateway.v2.context import ClientContext

log = get_logger("mq_gateway.v2.consumer.receive")

NACK_INVISIBLE_TIME_MS: Final = 1_000
"""A popped message that could not be handed over is visible again this soon (the proxy's NACK_INVISIBLE_TIME)."""
_NOTHING_NOW: Final = frozenset({PopStatus.NO_NEW_MSG, PopStatus.POLLING_NOT_FOUND})
"""What a pop that does not wait answers when its broker has nothing for the group."""
ATTEMPT_SEPARATOR: Final = "/"
"""Between the client id and the attempt id in the broker's attempt id."""
MAX_PENDING_NACKS: Final = 1_024
"""Nack tasks running at once; beyond, a message simply waits out its invisible time."""


@dataclass(frozen=True, slots=True)
class PopPlan:
    """One validated receive: where to pop (broker name and master address) and the broker's request."""

    broker_name: str
    addr: str
    header: PopMessageRequestHeader
    timeout_ms: int


def _closing() -> service_pb2.ReceiveMessageResponse:
    return service_pb2.ReceiveMessageResponse(delivery_timestamp=now_timestamp())


class ReceiveActivity:
    """ReceiveMessage over PopBrokerCalls.pop_message (queue id -1: any queue of the broker, and the group's
    retry topic)."""

    def __init__(
        self,
        routes: TopicRouteManager,
        pop: PopBrokerCalls,
        groups: SubscriptionGroupCache,
        handles: ReceiptHandleActivity,
        config: ConsumerActivityConfig,
    ) -> None:
        self._routes = routes
        self._pop = pop
        self._groups = groups
        self._handles = handles
        self._config = config
        self._nacks: set[asyncio.Task[None]] = set()

    async def receive_message(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        """The response stream of one receive (see the module docstring). Never raises but cancellation. When the
        stream is closed before every message was handed over (the client went away, a write failed), the
        messages not handed over, and the one being written, are made visible again after
        NACK_INVISIBLE_TIME_MS (ReceiveMessageResponseStreamWriter#processThrowableWhenWriteMessage)."""
        try:
            plan, result = await self._pop_any(await self.plan(request, ctx, time_remaining_ms))
            found = await self._deliverable(plan, result) if result.status is PopStatus.FOUND else []
        except Exception as exc:
            if isinstance(exc, RemotingError):
                self._routes.invalidate(request.message_queue.topic.name)
            yield service_pb2.ReceiveMessageResponse(status=status_of(exc))
            yield _closing()
            return
        if not found:
            code, text = (
                (Code.TOO_MANY_REQUESTS, "polling full")
                if result.status is PopStatus.POLLING_FULL
                else (Code.MESSAGE_NOT_FOUND, "no new message")
            )
            yield service_pb2.ReceiveMessageResponse(status=definition_pb2.Status(code=code, message=text))
            yield _closing()
            return
        handed_over = 0
        try:
            yield service_pb2.ReceiveMessageResponse(status=ok_status())
            invisible_ms = result.invisible_time_ms
            for popped in found:
                response = service_pb2.ReceiveMessageResponse()
                fill_message(response.message, popped.message, popped.receipt_handle, invisible_ms)
                yield response
                handed_over += 1
        finally:
            if handed_over < len(found):
                self._nack_later(plan, [p.receipt_handle for p in found[handed_over:]])
        yield _closing()

    def _nack_later(self, plan: PopPlan, handles: list[str]) -> None:
        if len(self._nacks) >= MAX_PENDING_NACKS:
            log.warning("v2_nack_dropped", group=plan.header.consumer_group, handles=len(handles))
            return
        task = asyncio.get_running_loop().create_task(self._nack(plan, handles))
        self._nacks.add(task)
        task.add_done_callback(self._nacks.discard)

    async def _nack(self, plan: PopPlan, handles: list[str]) -> None:
        group, topic = plan.header.consumer_group, plan.header.topic
        for handle in handles:
            try:
                await self._handles.change_invisible(group, topic, handle, NACK_INVISIBLE_TIME_MS)
            except Exception as exc:
                log.warning("v2_nack_failed", group=group, topic=topic, error=str(exc))

    async def close(self) -> None:
        """Wait for the nacks still running (each is one broker call per handle)."""
        if self._nacks:
            await asyncio.gather(*self._nacks, return_exceptions=True)

    async def plan(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> PopPlan:
        """Validate a receive (proxy order: poll time 40018, names 40002/40003, invisible time 40011, filter
        40010 / SQL92 50100) and resolve its broker (unknown topic: TOPIC_NOT_FOUND 40402; unknown broker
        NOT_FOUND 40400; none readable: FORBIDDEN 40300)."""
        poll_ms = poll_time_ms(request, time_remaining_ms, self._config, ctx.client_version)
        topic = check_topic(request.message_queue.topic)
        group = check_group(request.group)
        invisible_ms = receive_invisible_time(request, self._config)
        expression = tag_expression(request.filter_expression)
        broker_name = request.message_queue.broker.name or await self._any_readable_broker(topic)
        addr = await self._routes.master_addr(topic, broker_name)
        order = self._is_orderly(addr, group)
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            max_msg_nums=max(1, min(request.batch_size, self._config.receive_batch_size_max)),
            invisible_time_ms=invisible_ms,
            queue_id=-1,
            poll_time_ms=poll_ms,
            expression=expression,
            init_mode=ConsumeInitMode.LAST,
            order=order,
            attempt_id=broker_attempt_id(ctx, request),
        )
        timeout_ms = self._config.broker_timeout_ms
        if time_remaining_ms is not None:
            timeout_ms = max(1, min(timeout_ms, int(time_remaining_ms) - poll_ms))
        return PopPlan(broker_name, addr, header, timeout_ms)

    def _is_orderly(self, addr: str, group: str) -> bool:
        """The group's consumeMessageOrderly on the broker at ``addr`` as cached (SubscriptionGroupCache.peek); False
        when not cached (the broker pops orderly by its own config all the same)."""
        config = self._groups.peek(addr, group)
        return config is not None and config.consume_message_orderly

    async def _pop_any(self, plan: PopPlan) -> tuple[PopPlan, PopResult]:
        """Pop ``plan``'s broker; when it has nothing right now, the topic's other readable brokers without
        waiting; only then long-poll ``plan``'s broker. The plan whose broker answered and its result.

        Better than the proxy here: the SDKs round-robin their receives over every readable queue of every broker
        (four queues a broker, say), and a pop takes any queue of the named broker, so without this a consumer
        long-polls an empty broker once per queue while another broker holds messages (the Python SDK took 24 s
        to drain six messages from two brokers). Idle receives cost one immediate pop per broker more; a topic
        with no other readable broker is long-polled at once (the broker pops before it parks)."""
        others = await self._other_brokers(plan) if plan.header.poll_time_ms > 0 else []
        if not others:
            return plan, await self._pop.pop_message(plan.addr, plan.header, plan.timeout_ms, plan.broker_name)
        now = replace(plan, header=replace(plan.header, poll_time_ms=0))
        result = await self._pop.pop_message(now.addr, now.header, now.timeout_ms, now.broker_name)
        if result.status not in _NOTHING_NOW:
            return plan, result
        for broker_name, addr in others:
            other = replace(now, broker_name=broker_name, addr=addr)
            try:
                found = await self._pop.pop_message(other.addr, other.header, other.timeout_ms, other.broker_name)
            except MQError as exc:  # another broker failing must not fail this receive
                log.debug("v2_receive_other_broker_failed", broker=other.broker_name, error=str(exc))
                continue
            if found.status is PopStatus.FOUND:
                return replace(plan, broker_name=other.broker_name, addr=addr), found
        return plan, await self._pop.pop_message(plan.addr, plan.header, plan.timeout_ms, plan.broker_name)

    async def _other_brokers(self, plan: PopPlan) -> list[tuple[str, str]]:
        """(name, master address) of the topic's readable brokers other than ``plan``'s (cached route)."""
        route = await self._routes.route(plan.header.topic)
        others = []
        for queue_data in route.queue_datas:
            data = route.broker_data(queue_data.broker_name)
            addr = data.master_addr() if data is not None else None
            if queue_data.broker_name != plan.broker_name and addr is not None and _readable(queue_data):
                others.append((queue_data.broker_name, addr))
        return others

    async def _any_readable_broker(self, topic: str) -> str:
        route = await self._routes.route(topic)
        for queue_data in route.queue_datas:
            if _readable(queue_data):
                return queue_data.broker_name
        raise V2Error(Code.FORBIDDEN, f"no readable queue of topic {topic}")

    async def _deliverable(self, plan: PopPlan, result: PopResult) -> list[PoppedMessageExt]:
        """The popped messages to deliver; those past the group's max attempts go to the DLQ (and are acked)."""
        group = plan.header.consumer_group
        try:
            config = await self._groups.get(plan.addr, group)
        except MQError as exc:
            log.warning("v2_group_config_unavailable", group=group, addr=plan.addr, code=exc.code, remark=exc.remark)
            return list(result.messages)
        if config is None:
            return list(result.messages)
        max_attempts = config.retry_max_times + 1
        keep: list[PoppedMessageExt] = []
        for popped in result.messages:
            if popped.message.reconsume_times < max_attempts:
                keep.append(popped)
                continue
            await self._dead_letter(plan, popped)
        return keep

    async def _dead_letter(self, plan: PopPlan, popped: PoppedMessageExt) -> None:
        message = popped.message
        message_id = message.uniq_key or message.offset_msg_id
        try:
            await self._handles.forward_to_dlq(
                plan.header.consumer_group, plan.header.topic, popped.receipt_handle, message_id
            )
        except (MQError, V2Error) as exc:
            # not acked: the message comes back after its invisible time and is tried again
            log.warning(
                "v2_forward_to_dlq_failed", group=plan.header.consumer_group, message_id=message_id, error=str(exc)
            )
        else:
            log.info("v2_max_attempts_to_dlq", group=plan.header.consumer_group, message_id=message_id)


def broker_attempt_id(ctx: ClientContext, request: service_pb2.ReceiveMessageRequest) -> str:
    """The broker's attempt id of a receive: ``<client id>/<attempt id>``, empty without an attempt id."""
    return f"{ctx.client_id}{ATTEMPT_SEPARATOR}{request.attempt_id}" if request.HasField("attempt_id") else ""


def _readable(queue_data: QueueData) -> bool:
    return queue_data.read_queue_nums > 0 and PermName.is_readable(queue_data.perm)
