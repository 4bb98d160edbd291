"""The pure parts of the v2 consumer side: the receive poll-time rule and invisible-time limits, tag expressions,
the MessageExt -> v2 Message conversion (original topic of retries, recomputed type, reserved properties left
out, delivery timestamp), the common ack status, endpoint schemes and permissions, the config's own checks."""

from __future__ import annotations

import hashlib

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from google.protobuf import duration_pb2
from mq_common.codec import MessageExt
from mq_gateway.v2.codes import Code, V2Error, ok_status
from mq_gateway.v2.consumer import ConsumerActivityConfig
from mq_gateway.v2.consumer.converter import message_to_v2, message_type_of
from mq_gateway.v2.consumer.handles import common_status
from mq_gateway.v2.consumer.pull import endpoints_with_scheme, permission_of
from mq_gateway.v2.consumer.validation import (
    check_invisible_time,
    poll_time_ms,
    receive_invisible_time,
    tag_expression,
    version_tuple,
)

CONFIG = ConsumerActivityConfig()


def _receive(
    poll_ms: int | None = None, invisible_ms: int = 0, auto_renew: bool = False
) -> service_pb2.ReceiveMessageRequest:
    request = service_pb2.ReceiveMessageRequest(auto_renew=auto_renew)
    request.invisible_duration.CopyFrom(duration_pb2.Duration(seconds=invisible_ms // 1000))
    if poll_ms is not None:
        request.long_polling_timeout.CopyFrom(duration_pb2.Duration(seconds=poll_ms // 1000))
    return request


@pytest.mark.parametrize(
    ("poll_ms", "remaining_ms", "expected_ms"),
    [
        (20_000, 30_000.0, 20_000),  # as asked
        (60_000, 30_000.0, 20_000),  # clamped to the max
        (1_000, 30_000.0, 5_000),  # raised to the min
        (20_000, 8_000.0, 7_500),  # capped at the deadline less the reserve
        (None, 23_000.0, 20_000),  # absent: remaining - request_timeout / 2, clamped
        (None, 9_000.0, 7_500),
        (None, None, 20_000),  # no deadline: the max
    ],
)
def test_poll_time(poll_ms: int | None, remaining_ms: float | None, expected_ms: int) -> None:
    assert poll_time_ms(_receive(poll_ms), remaining_ms, CONFIG) == expected_ms


@pytest.mark.parametrize(
    ("client_version", "code"),
    [
        ("5.1.2", Code.ILLEGAL_POLLING_TIME),
        ("5.0.3", Code.ILLEGAL_POLLING_TIME),
        ("5.0.2", Code.BAD_REQUEST),
        ("1.0.8", Code.BAD_REQUEST),
        ("", Code.BAD_REQUEST),
    ],
)
def test_poll_time_refuses_a_deadline_under_the_minimum(client_version: str, code: int) -> None:
    with pytest.raises(V2Error) as refused:
        poll_time_ms(_receive(20_000), 4_999.0, CONFIG, client_version)
    assert refused.value.code == code


def test_version_tuple() -> None:
    assert version_tuple("5.1.2") == (5, 1, 2)
    assert version_tuple("5.0.3-SNAPSHOT") == (5, 0, 3)
    assert version_tuple("v5") is None


def test_invisible_time_limits() -> None:
    assert receive_invisible_time(_receive(invisible_ms=10_000), CONFIG) == 10_000
    assert receive_invisible_time(_receive(invisible_ms=1_000, auto_renew=True), CONFIG) == 60_000
    for bad in (9_000, 43_201_000):
        with pytest.raises(V2Error) as refused:
            receive_invisible_time(_receive(invisible_ms=bad), CONFIG)
        assert refused.value.code == Code.ILLEGAL_INVISIBLE_TIME
    assert check_invisible_time(0, 0, 10) == 0


@pytest.mark.parametrize(
    ("text", "expected"), [("", "*"), (" * ", "*"), ("TagA", "TagA"), ("a || b", "a || b"), ("a||b||", "a || b")]
)
def test_tag_expressions(text: str, expected: str) -> None:
    assert (
        tag_expression(definition_pb2.FilterExpression(type=definition_pb2.FilterType.TAG, expression=text)) == expected
    )


@pytest.mark.parametrize(
    ("filter_type", "text", "code"),
    [
        (definition_pb2.FilterType.TAG, "||", Code.ILLEGAL_FILTER_EXPRESSION),
        (definition_pb2.FilterType.TAG, "a||b\n", Code.OK),
        (definition_pb2.FilterType.TAG, "a||b\x07c", Code.ILLEGAL_FILTER_EXPRESSION),
        (definition_pb2.FilterType.TAG, "a" * 5_000, Code.ILLEGAL_FILTER_EXPRESSION),
        (definition_pb2.FilterType.SQL, "a > 1", Code.NOT_IMPLEMENTED),
    ],
)
def test_bad_filter_expressions(filter_type: definition_pb2.FilterType.ValueType, text: str, code: int) -> None:
    expression = definition_pb2.FilterExpression(type=filter_type, expression=text)
    if code == Code.OK:
        assert tag_expression(expression) == "a || b"
        return
    with pytest.raises(V2Error) as refused:
        tag_expression(expression)
    assert refused.value.code == code


def _stored(topic: str, properties: dict[str, str], reconsume_times: int = 0) -> MessageExt:
    return MessageExt(
        topic=topic,
        body=b"hello",
        flag=0,
        properties=properties,
        queue_id=2,
        queue_offset=7,
        commit_log_offset=4096,
        store_size=200,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_123,
        born_host=("127.0.0.21", 5555),
        store_timestamp_ms=1_700_000_000_456,
        store_host=("127.0.0.1", 10911),
        reconsume_times=reconsume_times,
    )


def test_a_retry_record_shows_its_original_topic_and_attempt() -> None:
    properties = {
        "RETRY_TOPIC": "Orders",
        "UNIQ_KEY": "AB12",
        "TAGS": "t",
        "KEYS": "k1 k2",
        "RECONSUME_TIME": "2",
        "POP_CK": "x",
        "__BORNHOST": "127.0.0.22:1",
        "color": "red",
    }
    message = message_to_v2(_stored("%RETRY%g", properties, reconsume_times=2), "h 1", 30_000)
    system = message.system_properties
    assert message.topic.name == "Orders"
    assert dict(message.user_properties) == {"color": "red"}
    assert (system.message_id, system.tag, list(system.keys)) == ("AB12", "t", ["k1", "k2"])
    assert (system.delivery_attempt, system.receipt_handle, system.queue_id, system.queue_offset) == (3, "h 1", 2, 7)
    assert system.invisible_duration.ToMilliseconds() == 30_000
    assert (system.born_host, system.store_host) == ("127.0.0.22:1", "127.0.0.1:10911")
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert system.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert not system.HasField("delivery_timestamp")


def test_without_uniq_key_the_offset_message_id_is_used() -> None:
    stored = _stored("T", {})
    assert message_to_v2(stored).system_properties.message_id == stored.offset_msg_id
    assert not message_to_v2(stored).system_properties.HasField("tag")


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({"TRAN_MSG": "true", "__SHARDINGKEY": "g"}, definition_pb2.MessageType.TRANSACTION),
        ({"TIMER_DELIVER_MS": "1700000009000"}, definition_pb2.MessageType.DELAY),
        ({"DELAY": "3"}, definition_pb2.MessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, definition_pb2.MessageType.FIFO),
        ({}, definition_pb2.MessageType.NORMAL),
    ],
)
def test_message_type_is_recomputed(properties: dict[str, str], expected: int) -> None:
    assert message_type_of(properties) == expected


def test_delivery_timestamp_and_message_group() -> None:
    system = message_to_v2(_stored("T", {"TIMER_DELIVER_MS": "1700000009000", "__SHARDINGKEY": "g1"})).system_properties
    assert system.delivery_timestamp.ToMilliseconds() == 1_700_000_009_000
    assert system.message_group == "g1"


def test_common_status() -> None:
    bad = definition_pb2.Status(code=Code.INVALID_RECEIPT_HANDLE, message="spent")
    assert common_status([]).code == Code.OK
    assert common_status([bad, bad]) == bad
    assert common_status([ok_status(), bad]).code == Code.MULTIPLE_RESULTS


@pytest.mark.parametrize(
    ("host", "scheme"),
    [
        ("127.0.0.1", definition_pb2.AddressScheme.IPv4),
        ("::1", definition_pb2.AddressScheme.IPv6),
        ("localhost", definition_pb2.AddressScheme.DOMAIN_NAME),
    ],
)
def test_endpoints_get_a_scheme(host: str, scheme: int) -> None:
    endpoints = definition_pb2.Endpoints(addresses=[definition_pb2.Address(host=host, port=1)])
    assert endpoints_with_scheme(endpoints).scheme == scheme
    kept = definition_pb2.Endpoints(scheme=definition_pb2.AddressScheme.DOMAIN_NAME, addresses=endpoints.addresses)
    assert endpoints_with_scheme(kept).scheme == definition_pb2.AddressScheme.DOMAIN_NAME


def test_permissions() -> None:
    assert [permission_of(p) for p in (6, 4, 2, 0)] == [
        definition_pb2.Permission.READ_WRITE,
        definition_pb2.Permission.READ,
        definition_pb2.Permission.WRITE,
        definition_pb2.Permission.NONE,
    ]


def test_config_refuses_inconsistent_limits() -> None:
    for bad in (
        {"min_invisible_time_ms_for_recv": 50_000_000},
        {"long_polling_timeout_min_ms": 30_000},
        {"receive_batch_size_max": 0},
        {"poll_reserve_ms": 5_000},
    ):
        with pytest.raises(ValueError, match="must"):
            ConsumerActivityConfig(**bad)  # type: ignore[arg-type]
