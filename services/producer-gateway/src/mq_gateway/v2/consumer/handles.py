"""The receipt-handle RPCs: AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue.

Stateless: the v2 receipt handle is the broker's POP handle (mq_common.protocol.pop.ReceiptHandle), which names
its broker; the broker's address comes from the topic's route, so any gateway replica serves any handle. Refusals
of a handle (it does not decode, names another broker, was acked, replaced or revived) answer
INVALID_RECEIPT_HANDLE 40013 (codes.RECEIPT_HANDLE_OVERRIDES). A broker that does not answer (RemotingError)
invalidates the topic's cached route, as a receive does, so the next ack or change of invisible time goes to the
group's master of the fresh route (after a controller-mode failover). Runs on the gateway's asyncio loop. Mirrors
org.apache.rocketmq.proxy.grpc.v2.consumer.{AckMessageActivity, ChangeInvisibleDurationActivity} and
org.apache.rocketmq.proxy.grpc.v2.producer.ForwardMessageToDLQActivity.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.broker_client import BrokerClient
from mq_client.pop_calls import PopBrokerCalls
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.errors import RemotingError
from mq_common.protocol import (
    ChangeInvisibleTimeRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    ReceiptHandle,
)

from mq_gateway.v2.codes import RECEIPT_HANDLE_OVERRIDES, Code, V2Error, ok_status, status_of, v2_code_for
from mq_gateway.v2.consumer.ack_batcher import AckBatcher, AckTarget
from mq_gateway.v2.consumer.config import ConsumerActivityConfig
from mq_gateway.v2.consumer.validation import check_group, check_invisible_time, check_topic, duration_ms

MAX_ACK_ENTRIES: Final = 1_024
"""Entries one AckMessage may carry; more is BAD_REQUEST."""
_OK: Final = ok_status()
"""Shared, never mutated: response constructors copy it."""
DLQ_DELAY_LEVEL: Final = -1
"""ConsumerSendMsgBack's delay level that stores the message on %DLQ%<group> at once."""


def decode_handle(text: str) -> ReceiptHandle:
    """The broker handle of a v2 receipt handle. Raises InvalidReceiptHandleError (INVALID_PARAMETER 29, answered
    as INVALID_RECEIPT_HANDLE 40013)."""
    return ReceiptHandle.decode(text)


def common_status(statuses: Sequence[definition_pb2.Status]) -> definition_pb2.Status:
    """One status for many entries: OK when there are none, the shared one when every code is the same, else
    MULTIPLE_RESULTS (30000). Mirrors AckMessageActivity#setAckResponseStatus."""
    codes = {s.code for s in statuses}
    if not codes:
        return ok_status()
    if len(codes) == 1:
        return statuses[0]
    return definition_pb2.Status(code=Code.MULTIPLE_RESULTS, message="ack results differ")


def _status_of_result(code: int, remark: str) -> definition_pb2.Status:
    v2_code = v2_code_for(code, RECEIPT_HANDLE_OVERRIDES)
    return _OK if v2_code == Code.OK else definition_pb2.Status(code=v2_code, message=remark or str(code))


class ReceiptHandleActivity:
    """Ack, change of invisible time and forward to the DLQ by receipt handle, on the broker the handle names."""

    def __init__(
        self, routes: TopicRouteManager, pop: PopBrokerCalls, broker: BrokerClient, config: ConsumerActivityConfig
    ) -> None:
        self._routes = routes
        self._pop = pop
        self._broker = broker
        self._config = config
        self.acks = AckBatcher(pop.ack_message, config.broker_timeout_ms)
        """Concurrent acks of one broker, group and topic share one broker call (ack_batcher)."""

    async def ack_message(self, request: service_pb2.AckMessageRequest) -> service_pb2.AckMessageResponse:
        """One entry status per request entry (handles of one broker acked in one call), top-level status by
        :func:`common_status`. Bad group/topic names: 40003/40002; over MAX_ACK_ENTRIES: BAD_REQUEST."""
        try:
            group, topic = check_group(request.group), check_topic(request.topic)
            if len(request.entries) > MAX_ACK_ENTRIES:
                raise V2Error(Code.BAD_REQUEST, f"more than {MAX_ACK_ENTRIES} entries in one ack")
        except V2Error as exc:
            return service_pb2.AckMessageResponse(status=status_of(exc))
        statuses: list[definition_pb2.Status] = [_OK] * len(request.entries)
        by_broker: dict[str, list[int]] = defaultdict(list)
        for index, entry in enumerate(request.entries):
            try:
                by_broker[decode_handle(entry.receipt_handle).broker_name].append(index)
            except Exception as exc:
                statuses[index] = status_of(exc, RECEIPT_HANDLE_OVERRIDES)
        handles = [e.receipt_handle for e in request.entries]
        if len(by_broker) == 1:  # the usual case (an SDK acks one message per call): no task for a gather
            [(name, indexes)] = by_broker.items()
            outcomes = [await self._ack_on(group, topic, name, [handles[i] for i in indexes])]
        else:
            outcomes = await asyncio.gather(
                *(self._ack_on(group, topic, name, [handles[i] for i in idx]) for name, idx in by_broker.items())
            )
        for indexes, outcome in zip(by_broker.values(), outcomes, strict=True):
            for index, status in zip(indexes, outcome, strict=True):
                statuses[index] = status
        entries = [
            service_pb2.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=s)
            for e, s in zip(request.entries, statuses, strict=True)
        ]
        return service_pb2.AckMessageResponse(status=common_status(statuses), entries=entries)

    async def _ack_on(
        self, group: str, topic: str, broker_name: str, handles: list[str]
    ) -> list[definition_pb2.Status]:
        try:
            return await self.ack_statuses(group, topic, broker_name, handles)
        except Exception as exc:
            self._forget_route_on(exc, topic)
            return [status_of(exc, RECEIPT_HANDLE_OVERRIDES)] * len(handles)

    def _forget_route_on(self, exc: BaseException, topic: str) -> None:
        """A broker that did not answer: refresh the topic's route before the next call (a new master)."""
        if isinstance(exc, RemotingError):
            self._routes.invalidate(topic)

    async def ack_statuses(
        self, group: str, topic: str, broker_name: str, handles: list[str]
    ) -> list[definition_pb2.Status]:
        """Ack ``handles`` (all of ``broker_name``, at most MAX_ACK_ENTRIES) in one broker call, shared with
        concurrent acks of the same broker, group and topic (:class:`AckBatcher`): one status per handle (OK, or
        INVALID_RECEIPT_HANDLE for a spent one, ...). Raises MQError / transport errors for a refused call."""
        addr = await self._routes.master_addr(topic, broker_name)
        results = await self.acks.ack(AckTarget(addr, broker_name, group, topic), tuple(handles))
        return [_status_of_result(code, remark) for code, remark in results]

    async def ack(self, group: str, topic: str, broker_name: str, handles: list[str]) -> None:
        """:meth:`ack_statuses`, raising V2Error with the first refused handle's status."""
        for status in await self.ack_statuses(group, topic, broker_name, handles):
            if status.code != Code.OK:
                raise V2Error(status.code, status.message)

    async def close(self) -> None:
        """Send the acks still gathering and wait for the broker calls under way."""
        await self.acks.close()

    async def change_invisible_duration(
        self, request: service_pb2.ChangeInvisibleDurationRequest
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        """The new receipt handle (the old one is then refused). Invisible duration outside 0 .. max: 40011;
        garbage or spent handle: 40013."""
        try:
            group, topic = check_group(request.group), check_topic(request.topic)
            invisible_ms = check_invisible_time(
                duration_ms(request.invisible_duration), 0, self._config.max_invisible_time_ms
            )
            handle = await self.change_invisible(group, topic, request.receipt_handle, invisible_ms)
        except Exception as exc:
            self._forget_route_on(exc, request.topic.name)
            return service_pb2.ChangeInvisibleDurationResponse(status=status_of(exc, RECEIPT_HANDLE_OVERRIDES))
        return service_pb2.ChangeInvisibleDurationResponse(status=ok_status(), receipt_handle=handle)

    async def change_invisible(self, group: str, topic: str, text: str, invisible_ms: int) -> str:
        """Make the message of handle ``text`` invisible for ``invisible_ms`` from now; its new handle. Raises
        InvalidReceiptHandleError, MQError (NO_MESSAGE 208 for a spent handle) and transport errors."""
        broker_name = decode_handle(text).broker_name
        addr = await self._routes.master_addr(topic, broker_name)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=topic, receipt_handle=text, invisible_time_ms=invisible_ms
        )
        answer = await self._pop.change_invisible_time(addr, header, self._config.broker_timeout_ms, broker_name)
        return answer.receipt_handle

    async def forward_message_to_dead_letter_queue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        """Move the message of the handle to %DLQ%<group>, then ack it. The handle is first checked (and the
        message held invisible for forward_hold_ms) by a change of invisible time, so a spent handle (40013) stores
        nothing; a failure after that leaves the message to come back later, never lost."""
        try:
            group, topic = check_group(request.group), check_topic(request.topic)
            await self.forward_to_dlq(group, topic, request.receipt_handle, request.message_id)
        except Exception as exc:
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=status_of(exc, RECEIPT_HANDLE_OVERRIDES))
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=ok_status())

    async def forward_to_dlq(self, group: str, topic: str, text: str, message_id: str) -> None:
        """ConsumerSendMsgBack (delay level -1: the DLQ) of the message the handle ``text`` holds, then its ack.
        Raises V2Error INVALID_RECEIPT_HANDLE for a handle without a commit log offset, and what
        :meth:`change_invisible`, BrokerClient.consumer_send_msg_back and :meth:`ack` raise."""
        handle = decode_handle(text)
        if handle.commit_log_offset < 0:
            raise V2Error(Code.INVALID_RECEIPT_HANDLE, "the receipt handle carries no commit log offset")
        held = await self.change_invisible(group, topic, text, self._config.forward_hold_ms)
        addr = await self._routes.master_addr(topic, handle.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            group=group,
            offset=handle.commit_log_offset,
            delay_level=DLQ_DELAY_LEVEL,
            origin_msg_id=message_id,
            origin_topic=topic,
        )
        await self._broker.consumer_send_msg_back(addr, header, self._config.broker_timeout_ms)
        await self.ack(group, topic, handle.broker_name, [held])
