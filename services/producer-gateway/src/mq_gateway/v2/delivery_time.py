"""A v2 message's ``delivery_timestamp`` as the TIMER_DELIVER_MS the broker holds it to, with the proxy's checks,
and the v2 answers of a timer message's send.

Mirrors org.apache.rocketmq.proxy.grpc.v2.producer.SendMessageActivity#fillDelayMessageProperty and
#validateDelayTime: a time more than ``max_delay_time_ms`` (ProxyConfig.maxDelayTimeMills) from now is refused
with ILLEGAL_DELIVERY_TIME 40012; beyond the proxy, so is a time more than the timer precision (1 s) in the past
or a malformed Timestamp, and the broker's MESSAGE_ILLEGAL about a timer's delivery time (timerMaxDelaySec, a bad
TIMER_* value) answers 40012 too. The official Python SDK 5.1.2 writes its ``delivery_timestamp`` value into the
Timestamp's ``seconds`` (documented as milliseconds, often given in seconds): a ``seconds`` value no time in
seconds can have (at least :data:`SECONDS_THAT_ARE_MS`, the year 5138) is read as milliseconds, so both forms
work; Java, Go and Node.js send a proper Timestamp. Pure functions; any thread.
"""

from __future__ import annotations

from typing import Final

from google.protobuf import timestamp_pb2
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code, V2Error

# A Timestamp.seconds this large is a millisecond value (the Python SDK 5.1.2's form): 10**11 s is the year 5138,
# 10**11 ms is March 1973.
SECONDS_THAT_ARE_MS: Final = 10**11
# How far in the past a delivery time may be (the broker's timerPrecisionMs): such a message is delivered at once.
PAST_TOLERANCE_MS: Final = 1_000
_NANOS_PER_SECOND: Final = 1_000_000_000
_TIME_WORDS: Final = ("timer", "deliver", "delay")


def delivery_ms_of(timestamp: timestamp_pb2.Timestamp, max_delay_time_ms: int, now_ms: int) -> int:
    """The delivery time of ``timestamp`` in ms since the epoch. ``max_delay_time_ms`` <= 0: no upper limit
    (as the proxy). Raises V2Error(ILLEGAL_DELIVERY_TIME 40012) for negative seconds or nanos outside
    [0, 1e9), a time more than ``max_delay_time_ms`` after ``now_ms`` ("the max delay time of message is too
    large, max is N", the proxy's remark) or more than PAST_TOLERANCE_MS before it."""
    seconds, nanos = timestamp.seconds, timestamp.nanos
    if seconds < 0 or not 0 <= nanos < _NANOS_PER_SECOND:
        raise V2Error(
            Code.ILLEGAL_DELIVERY_TIME,
            f"delivery_timestamp is malformed: seconds {seconds}, nanos {nanos} (seconds >= 0, 0 <= nanos < 1e9)",
        )
    deliver_ms = seconds if seconds >= SECONDS_THAT_ARE_MS else seconds * 1000 + nanos // 1_000_000
    if max_delay_time_ms > 0 and deliver_ms - now_ms > max_delay_time_ms:
        raise V2Error(
            Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {max_delay_time_ms}"
        )
    if deliver_ms < now_ms - PAST_TOLERANCE_MS:
        raise V2Error(
            Code.ILLEGAL_DELIVERY_TIME,
            f"the delivery time {deliver_ms} is {now_ms - deliver_ms} ms in the past (at most {PAST_TOLERANCE_MS})",
        )
    return deliver_ms


def is_delivery_time_refusal(error: MQError) -> bool:
    """True for the broker's MESSAGE_ILLEGAL (13) about a timer's delivery time (its remark names the timer, the
    delivery or the delay), which v2 answers with ILLEGAL_DELIVERY_TIME 40012 instead of BAD_REQUEST."""
    if error.code != ResponseCode.MESSAGE_ILLEGAL:
        return False
    remark = error.remark.lower()
    return any(word in remark for word in _TIME_WORDS)
