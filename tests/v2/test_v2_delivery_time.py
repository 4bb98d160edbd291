"""v2 delivery_timestamp checks and reading (mq_gateway.v2.delivery_time): both Timestamp forms the SDKs send,
the proxy's limit, the past and malformed values, and which broker refusals are about the delivery time."""

from __future__ import annotations

import pytest
from apache.rocketmq.v2 import definition_pb2
from google.protobuf import timestamp_pb2
from mq_common.errors import MessageIllegalError, MQBrokerError
from mq_common.response_code import ResponseCode
from mq_gateway.v2.codes import V2Error
from mq_gateway.v2.delivery_time import delivery_ms_of, is_delivery_time_refusal

Code = definition_pb2.Code
NOW_MS = 1_750_000_000_000
DAY_MS = 86_400_000


def ts(seconds: int, nanos: int = 0) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def test_a_proper_timestamp_is_read_to_the_millisecond() -> None:
    due = NOW_MS + 3_250
    assert delivery_ms_of(ts(due // 1000, due % 1000 * 1_000_000 + 999), 3 * DAY_MS, NOW_MS) == due


def test_the_python_sdks_seconds_field_holding_milliseconds_is_read_as_milliseconds() -> None:
    assert delivery_ms_of(ts(NOW_MS + 3_000), 3 * DAY_MS, NOW_MS) == NOW_MS + 3_000


def test_the_python_sdks_seconds_field_holding_seconds_is_read_as_seconds() -> None:
    assert delivery_ms_of(ts(NOW_MS // 1000 + 3), 3 * DAY_MS, NOW_MS) == NOW_MS + 3_000


@pytest.mark.parametrize(
    ("timestamp", "remark"),
    [
        (ts(NOW_MS // 1000 + 3 * 86_400 + 2), "max delay time of message is too large, max is 259200000"),
        (ts(NOW_MS + 3 * DAY_MS + 1), "max delay time of message is too large"),
        (ts(NOW_MS // 1000 - 5), "5000 ms in the past"),
        (ts(0), "in the past"),
        (ts(-1), "malformed"),
        (ts(NOW_MS // 1000, 1_000_000_000), "malformed"),
        (ts(NOW_MS // 1000, -1), "malformed"),
    ],
)
def test_bad_delivery_times_are_illegal_delivery_time(timestamp: timestamp_pb2.Timestamp, remark: str) -> None:
    with pytest.raises(V2Error, match=remark) as info:
        delivery_ms_of(timestamp, 3 * DAY_MS, NOW_MS)
    assert info.value.code == Code.ILLEGAL_DELIVERY_TIME


def test_within_the_precision_in_the_past_is_accepted_and_no_limit_when_zero() -> None:
    assert delivery_ms_of(ts((NOW_MS - 900) // 1000, (NOW_MS - 900) % 1000 * 10**6), 1, NOW_MS) == NOW_MS - 900
    assert delivery_ms_of(ts(NOW_MS + 10 * DAY_MS), 0, NOW_MS) == NOW_MS + 10 * DAY_MS


def test_only_the_brokers_message_illegal_about_time_is_a_delivery_time_refusal() -> None:
    assert is_delivery_time_refusal(MessageIllegalError("timer message delay time 400000 s exceeds timerMaxDelaySec"))
    assert is_delivery_time_refusal(MQBrokerError("TIMER_DELIVER_MS is not a number", ResponseCode.MESSAGE_ILLEGAL))
    assert not is_delivery_time_refusal(MessageIllegalError("the message body size over max value"))
    assert not is_delivery_time_refusal(MQBrokerError("delay too busy", ResponseCode.SYSTEM_BUSY))
