"""Checks of the v2 consumer requests, each raising V2Error with the proxy's code; and the duration helpers.

Mirrors org.apache.rocketmq.proxy.grpc.v2.AbstractMessingActivity#validateTopicAndConsumerGroup /
#validateInvisibleTime, ReceiveMessageActivity's poll-time rule and org.apache.rocketmq.common.filter.FilterAPI#build
(TAG expressions). Pure functions; any thread.
"""

from __future__ import annotations

import itertools
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import duration_pb2, timestamp_pb2
from mq_common.constants import validate_group, validate_topic

from mq_gateway.v2.codes import Code, V2Error
from mq_gateway.v2.consumer.config import ConsumerActivityConfig

SUB_ALL: Final = "*"
TAG_SEPARATOR: Final = "||"
MAX_EXPRESSION_CHARS: Final = 4_096
"""A tag expression longer than this is refused (ILLEGAL_FILTER_EXPRESSION) before it reaches a broker."""
ILLEGAL_POLLING_TIME_INTRODUCED: Final = (5, 0, 3)
# google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
MIN_TIMESTAMP_SECONDS: Final = -62_135_596_800
MAX_TIMESTAMP_SECONDS: Final = 253_402_300_799


def check_topic(topic: definition_pb2.Resource) -> str:
    """The topic name; raises V2Error ILLEGAL_TOPIC (40002) for a blank, too long or ill-formed name."""
    remark = validate_topic(topic.name)
    if remark is not None:
        raise V2Error(Code.ILLEGAL_TOPIC, remark)
    return topic.name


def check_group(group: definition_pb2.Resource) -> str:
    """The group name; raises V2Error ILLEGAL_CONSUMER_GROUP (40003) for a blank, too long or ill-formed name."""
    remark = validate_group(group.name)
    if remark is not None:
        raise V2Error(Code.ILLEGAL_CONSUMER_GROUP, remark)
    return group.name


def tag_expression(expression: definition_pb2.FilterExpression) -> str:
    """The broker's tag expression of a v2 FilterExpression: ``"*"`` for a blank or ``*`` TAG expression, else the
    trimmed ``"TagA || TagB"`` text. Raises V2Error ILLEGAL_FILTER_EXPRESSION (40010) when no tag remains after
    splitting on ``||``, a tag holds a control character or the text is over MAX_EXPRESSION_CHARS;
    NOT_IMPLEMENTED (50100) for SQL92 (the brokers filter by tag only)."""
    if expression.type == definition_pb2.FilterType.SQL:
        raise V2Error(Code.NOT_IMPLEMENTED, "the broker does not support consumer to filter message by SQL92")
    text = expression.expression.strip()
    if not text or text == SUB_ALL:
        return SUB_ALL
    if len(text) > MAX_EXPRESSION_CHARS:
        raise V2Error(Code.ILLEGAL_FILTER_EXPRESSION, f"filter expression longer than {MAX_EXPRESSION_CHARS}")
    tags = [t.strip() for t in text.split(TAG_SEPARATOR)]
    if not any(tags) or any(not c.isprintable() for t in tags for c in t):
        raise V2Error(Code.ILLEGAL_FILTER_EXPRESSION, f"illegal tag expression: {expression.expression!r}")
    return " || ".join(t for t in tags if t)


def timestamp_ms(timestamp: timestamp_pb2.Timestamp) -> int:
    """A protobuf Timestamp in whole ms since the epoch (Timestamps.toMillis). Raises V2Error BAD_REQUEST (40000)
    for one outside the Timestamp range (years 1 .. 9999) or with nanos outside 0 .. 999,999,999."""
    if not MIN_TIMESTAMP_SECONDS <= timestamp.seconds <= MAX_TIMESTAMP_SECONDS or not 0 <= timestamp.nanos < 10**9:
        raise V2Error(
            Code.BAD_REQUEST,
            f"timestamp {timestamp.seconds} s {timestamp.nanos} ns is not a valid time (years 1 .. 9999)",
        )
    return timestamp.seconds * 1000 + timestamp.nanos // 1_000_000


def duration_ms(duration: duration_pb2.Duration) -> int:
    """A protobuf Duration in whole ms (Durations.toMillis)."""
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def check_invisible_time(invisible_ms: int, min_ms: int, max_ms: int) -> int:
    """``invisible_ms`` when within ``min_ms`` .. ``max_ms``; raises V2Error ILLEGAL_INVISIBLE_TIME (40011)."""
    if invisible_ms < min_ms:
        raise V2Error(Code.ILLEGAL_INVISIBLE_TIME, f"the invisible time {invisible_ms} ms is less than {min_ms} ms")
    if invisible_ms > max_ms:
        raise V2Error(Code.ILLEGAL_INVISIBLE_TIME, f"the invisible time {invisible_ms} ms is more than {max_ms} ms")
    return invisible_ms


def receive_invisible_time(request: service_pb2.ReceiveMessageRequest, config: ConsumerActivityConfig) -> int:
    """The invisible time of a receive: the default for auto-renew receives, else the request's, validated
    (ILLEGAL_INVISIBLE_TIME 40011 outside min_invisible_time_ms_for_recv .. max_invisible_time_ms)."""
    if request.auto_renew:
        return config.default_invisible_time_ms
    wanted = duration_ms(request.invisible_duration)
    return check_invisible_time(wanted, config.min_invisible_time_ms_for_recv, config.max_invisible_time_ms)


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"5.0.3"`` -> (5, 0, 3); None when ``text`` does not start with a dotted number."""
    numbers: list[int] = []
    for part in text.strip().split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers) or None


def polling_time_code(client_version: str) -> definition_pb2.Code.ValueType:
    """ILLEGAL_POLLING_TIME (40018) for clients from 5.0.3 on, BAD_REQUEST (40000) for older or unknown versions
    (ReceiveMessageActivity: the code was introduced with client 5.0.3)."""
    version = version_tuple(client_version)
    if version is None or version < ILLEGAL_POLLING_TIME_INTRODUCED:
        return Code.BAD_REQUEST
    return Code.ILLEGAL_POLLING_TIME


def poll_time_ms(
    request: service_pb2.ReceiveMessageRequest,
    remaining_ms: float | None,
    config: ConsumerActivityConfig,
    client_version: str = "",
) -> int:
    """How long the broker may hold a receive: the request's long_polling_timeout (absent: remaining deadline -
    request_timeout / 2) clamped to [min, max], then capped at the remaining deadline less poll_reserve_ms.
    Raises V2Error :func:`polling_time_code` (ILLEGAL_POLLING_TIME 40018 / BAD_REQUEST 40000) when the remaining
    deadline is under the minimum."""
    if request.HasField("long_polling_timeout"):
        wanted = duration_ms(request.long_polling_timeout)
    elif remaining_ms is not None:
        wanted = int(remaining_ms) - config.request_timeout_ms // 2
    else:
        wanted = config.long_polling_timeout_max_ms
    poll = min(max(wanted, config.long_polling_timeout_min_ms), config.long_polling_timeout_max_ms)
    if remaining_ms is None or poll + config.poll_reserve_ms <= remaining_ms:
        return poll
    if remaining_ms < config.long_polling_timeout_min_ms:
        raise V2Error(
            polling_time_code(client_version),
            "The deadline time remaining is not enough for polling, please check network condition",
        )
    return int(remaining_ms) - config.poll_reserve_ms
