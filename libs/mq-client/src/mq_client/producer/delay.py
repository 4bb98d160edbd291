"""A message's delivery time as the properties the broker reads: a delay level (4.x) or a timer (5.x).

Mirrors org.apache.rocketmq.common.message.Message#setDelayTimeLevel (property DELAY), #setDeliverTimeMs
(TIMER_DELIVER_MS), #setDelayTimeSec (TIMER_DELAY_SEC) and #setDelayTimeMs (TIMER_DELAY_MS), with one change: the
relative forms are sent as TIMER_DELIVER_MS (now + delay, computed once when the message is prepared), so the
recall handle of the send result (RecallMessageHandle.HandleV1: topic, broker, delivery time, UNIQ_KEY) names the
exact time the broker holds the message to. The broker checks the level against its messageDelayLevel and the time
against timerMaxDelaySec / timerPrecisionMs (MESSAGE_ILLEGAL 13 with its remark). Pure; any thread.
"""

from __future__ import annotations

import time
from typing import Final

from mq_common.constants import MessageConst
from mq_common.errors import MessageIllegalError

from mq_client.producer.message import Message

_FIELDS: Final = ("delay_time_level", "deliver_time_ms", "delay_time_sec", "delay_time_ms")


def delay_properties(msg: Message, props: dict[str, str], now_ms: int | None = None) -> int:
    """Put ``msg``'s delay level (DELAY) or delivery time (TIMER_DELIVER_MS) into ``props``; return the delivery
    time in ms since the epoch for a timer message, 0 for a delay-level message or one without a delay.
    ``now_ms`` (default: the wall clock) is the base of ``delay_time_sec`` / ``delay_time_ms``.

    Raises MessageIllegalError (MESSAGE_ILLEGAL, 13) when a field is negative or more than one is set
    ("the message takes one of delay_time_level, deliver_time_ms, delay_time_sec, delay_time_ms").
    """
    values = (msg.delay_time_level, msg.deliver_time_ms, msg.delay_time_sec, msg.delay_time_ms)
    for name, value in zip(_FIELDS, values, strict=True):
        if value < 0:
            raise MessageIllegalError(f"the message {name} must not be negative, got {value}")
    if sum(1 for value in values if value) > 1:
        raise MessageIllegalError(f"the message takes one of {', '.join(_FIELDS)}, not several")
    level, deliver_ms, delay_sec, delay_ms = values
    if level:
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        return 0
    if not deliver_ms:
        if not delay_sec and not delay_ms:
            return 0
        base_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        deliver_ms = base_ms + (delay_sec * 1000 if delay_sec else delay_ms)
    props[MessageConst.TIMER_DELIVER_MS] = str(deliver_ms)
    return deliver_ms
