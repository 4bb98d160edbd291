"""The admin client's timer operations: recall a timer message by its recall handle, list a topic's pending timers
per broker, and tell a stored message's timer state.

Mirrors DefaultMQProducerImpl#recallMessage (the handle's broker name picks the master in the topic's route) for
``mqadmin recallMessage``; RocketMQ's tools have no timer listing: ``timerStatus`` and the timer rows of
``queryMsgById`` ask the broker's QueryTimers RPC (mq_client.timer_admin_calls). Mixed into
mq_client.admin.admin_client.MQAdminClient. Runs on the caller's asyncio loop; errors are the typed
mq_common.errors.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mq_common.codec import MessageExt
from mq_common.constants import SCHEDULE_TOPIC, TIMER_TOPIC, MessageConst, MixAll, validate_topic
from mq_common.errors import MQClientError, MQError
from mq_common.recall_handle import decode_recall_handle
from mq_common.response_code import ResponseCode

from mq_client.admin.admin_base import AdminBase
from mq_client.timer_admin_calls import TimerAdminCalls, TimerState, TimerStatus

__all__ = ["BrokerTimerStatus", "MessageTimer", "RecallResult", "TimerAdmin", "TimerState", "TimerStatus"]

HELD_TOPICS = frozenset({TIMER_TOPIC, SCHEDULE_TOPIC})
"""Where timer (rmq_sys_wheel_timer) and delay-level (SCHEDULE_TOPIC_XXXX) messages wait for their time."""


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What a recall did: the recalled message's UNIQ_KEY (``msg_id``), the topic, the broker (name and the master
    address asked) and the delivery time the handle named (ms since the epoch)."""

    msg_id: str
    topic: str
    broker_name: str
    broker_addr: str
    deliver_ms: int


@dataclass(frozen=True, slots=True)
class BrokerTimerStatus:
    """One broker group's answer for :meth:`TimerAdmin.timer_status`: its name, the address asked (the master,
    else the lowest broker id) and either ``status`` or ``error`` (``NAME (code): remark``)."""

    broker_name: str
    broker_addr: str
    status: TimerStatus | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class MessageTimer:
    """A stored message's timer side: its real topic and UNIQ_KEY, the broker asked, its due time (ms since the
    epoch: TIMER_OUT_MS, else the broker's answer; 0 unknown), its state (UNKNOWN when the broker could not say) and,
    when QueryTimers failed, ``error`` (``NAME (code): remark``)."""

    real_topic: str
    uniq_key: str
    broker_addr: str
    deliver_ms: int
    state: TimerState
    error: str = ""


def is_timer_message(message: MessageExt) -> bool:
    """True for a message held as a timer or delay-level message (stored on rmq_sys_wheel_timer or
    SCHEDULE_TOPIC_XXXX), or one carrying TIMER_OUT_MS or DELIVERED_FROM_OFFSET (a fired timer / re-put delay-level
    message on its real topic)."""
    props = message.properties
    return (
        message.topic in HELD_TOPICS
        or MessageConst.TIMER_OUT_MS in props
        or MessageConst.DELIVERED_FROM_OFFSET in props
    )


def _error_text(exc: MQError) -> str:
    return f"{ResponseCode.name_of(exc.code)} ({exc.code}): {exc.remark}"


def _int_property(message: MessageExt, name: str) -> int:
    text = message.properties.get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() else 0


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class TimerAdmin(AdminBase):
    """Timer operations of the admin client (see MQAdminClient, which mixes it in)."""

    @property
    def _timers(self) -> TimerAdminCalls:
        return TimerAdminCalls(self._pool)  # holds only the pool: as cheap as a stub

    async def recall_message(
        self, topic: str, recall_handle: str, producer_group: str = MixAll.DEFAULT_PRODUCER_GROUP
    ) -> RecallResult:
        """Cancel the timer message of ``recall_handle`` (the recall handle of its send result) on ``topic``: the
        RecallMessage RPC at the master of the handle's broker in ``topic``'s route. Mirrors
        DefaultMQProducerImpl#recallMessage.

        Raises MQClientError INVALID_PARAMETER (29) for an illegal topic name; MQClientError ILLEGAL_OPERATION
        (604) "topic is not supported" for a %RETRY% / %DLQ% topic and "recall handle is invalid" for a handle that
        does not decode; TopicNotExistError (17) without a route; MQClientError BROKER_NOT_EXIST (211) when the
        route has no master of the handle's broker; the broker's answer (MQBrokerError ILLEGAL_OPERATION 604: too
        late, unknown, already recalled, another topic or broker; TOPIC_NOT_EXIST 17; SLAVE_NOT_AVAILABLE 11);
        RemotingError on transport failure."""
        topic = topic.strip()
        remark = validate_topic(topic)
        if remark is not None:
            raise MQClientError(remark, ResponseCode.INVALID_PARAMETER)
        if topic.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX)):
            raise MQClientError("topic is not supported", ResponseCode.ILLEGAL_OPERATION)
        handle_text = recall_handle.strip()
        try:
            handle = decode_recall_handle(handle_text)
        except ValueError as exc:
            raise MQClientError(str(exc), ResponseCode.ILLEGAL_OPERATION) from None
        route = await self.topic_route(topic)
        data = route.broker_data(handle.broker_name)
        addr = None if data is None else data.master_addr()
        if addr is None:
            raise MQClientError(
                f"The broker service address not found: no master of broker {handle.broker_name} in the route of "
                f"topic {topic}",
                ResponseCode.BROKER_NOT_EXIST,
            )
        msg_id = await self._broker.recall_message(
            addr, producer_group, topic, handle_text, handle.broker_name, self.timeout_ms
        )
        return RecallResult(msg_id or handle.uniq_key, topic, handle.broker_name, addr, handle.deliver_ms)

    async def timer_status(self, topic: str) -> list[BrokerTimerStatus]:
        """QueryTimers(``topic``) on every broker group of ``topic``'s route (its master, else its lowest broker
        id), asked at once; one row per group, sorted by broker name. A broker that fails gives a row with
        ``error``.

        Raises TopicNotExistError (17) without a route, RemotingError when no name server answers, and the first
        broker's error when every broker failed."""
        route = await self.topic_route(topic.strip())
        targets = sorted(
            (b.broker_name, addr) for b in route.broker_datas if (addr := b.select_broker_addr()) is not None
        )
        calls = [self._timers.query_timers(addr, topic.strip(), timeout_ms=self.timeout_ms) for _n, addr in targets]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        rows: list[BrokerTimerStatus] = []
        errors: list[MQError] = []
        for (name, addr), outcome in zip(targets, outcomes, strict=True):
            if isinstance(outcome, MQError):
                errors.append(outcome)
                rows.append(BrokerTimerStatus(name, addr, None, _error_text(outcome)))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                rows.append(BrokerTimerStatus(name, addr, outcome))
        if errors and len(errors) == len(rows):
            raise errors[0]
        return rows

    async def message_timer(self, message: MessageExt) -> MessageTimer | None:
        """The timer state of ``message`` (as :meth:`query_msg_by_id` read it), asked of the broker that stored it
        with QueryTimers(topic=REAL_TOPIC, uniq_key=UNIQ_KEY, deliver_ms=TIMER_OUT_MS); None when the message is no
        timer or delay-level message (:func:`is_timer_message`). A failed QueryTimers gives state UNKNOWN with
        ``error``; transport errors included (the message itself was read)."""
        if not is_timer_message(message):
            return None
        props = message.properties
        real_topic = props.get(MessageConst.REAL_TOPIC) or message.topic
        deliver_ms = _int_property(message, MessageConst.TIMER_OUT_MS)
        addr = _host_port(*message.store_host)
        uniq_key = message.uniq_key or ""
        try:
            status = await self._timers.query_timers(addr, real_topic, uniq_key, deliver_ms, self.timeout_ms)
        except MQError as exc:
            return MessageTimer(real_topic, uniq_key, addr, deliver_ms, TimerState.UNKNOWN, _error_text(exc))
        return MessageTimer(
            real_topic,
            uniq_key,
            addr,
            deliver_ms or status.message_deliver_ms,
            status.state or TimerState.UNKNOWN,
        )
