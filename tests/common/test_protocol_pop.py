"""mq_common.protocol.pop: receipt handle text (RocketMQ's order and field count), garbage refused with
INVALID_PARAMETER, POP/ack/change-invisible converters round-trip, pop_result_of's code mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mq_common.codec import encode_message, host_to_bytes
from mq_common.errors import InvalidParameterError, MQBrokerError, MQClientError
from mq_common.protocol import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PoppedMessage,
    PopStatus,
    ReceiptHandle,
    convert,
    pop_result_of,
)
from mq_common.protocol.pop import InvalidReceiptHandleError, topic_type_of
from mq_common.response_code import ResponseCode

i32 = st.integers(min_value=0, max_value=2**31 - 1)
i64 = st.integers(min_value=0, max_value=2**63 - 1)
broker_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=20)
handles = st.builds(
    ReceiptHandle,
    i64,
    i64,
    i64,
    i32,
    st.sampled_from(["0", "1", "2"]),
    broker_names,
    i32,
    i64,
    st.integers(min_value=-1, max_value=2**63 - 1),
)


@given(handles)
def test_receipt_handle_round_trips(handle: ReceiptHandle) -> None:
    assert ReceiptHandle.decode(handle.encode()) == handle


def test_receipt_handle_text_is_rocketmq_order() -> None:
    handle = ReceiptHandle(10, 1_700_000_000_000, 30_000, 3, "1", "broker-a", 2, 12, 4096)
    assert handle.encode() == "10 1700000000000 30000 3 1 broker-a 2 12 4096"
    assert handle.next_visible_time_ms == 1_700_000_030_000
    assert handle.is_expired(1_700_000_030_000)
    assert not handle.is_expired(1_700_000_029_999)
    assert handle.is_retry
    assert handle.real_topic("T", "G") == "%RETRY%G"
    eight = ReceiptHandle.decode("10 1700000000000 30000 3 0 broker-a 2 12")
    assert eight.commit_log_offset == -1
    assert eight.real_topic("T", "G") == "T"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "1 2 3 4 0 b 5",
        "1 2 3 4 0 b 5 6 7 8",
        "x 2 3 4 0 b 5 6",
        "1 2 3 4 9 b 5 6",
        "1 2 3 4 0  5 6",
        "1 2 3 4 0 b -5 6",
        "1 2 3 4 0 b 5 -6",
        "1 2 3 4 0 b 5 6 " + "9" * 2000,
    ],
)
def test_garbage_handle_is_invalid_parameter(text: str) -> None:
    with pytest.raises(InvalidReceiptHandleError) as caught:
        ReceiptHandle.decode(text)
    assert isinstance(caught.value, InvalidParameterError)
    assert caught.value.code == ResponseCode.INVALID_PARAMETER
    assert "receipt handle is invalid" in caught.value.remark


def test_retry_topic_names() -> None:
    assert topic_type_of("%RETRY%G") == "1"
    assert topic_type_of("T") == "0"


def test_pop_converters_round_trip() -> None:
    request = PopMessageRequestHeader(
        consumer_group="G",
        topic="T",
        max_msg_nums=7,
        invisible_time_ms=30_000,
        queue_id=-1,
        poll_time_ms=5_000,
        expression="a || b",
        init_mode=1,
    )
    assert convert.pop_request_from_proto(convert.pop_request_to_proto(request)) == request
    response = PopMessageResponseHeader(
        ResponseCode.SUCCESS, "FOUND", (PoppedMessage(b"rec", "h1"), PoppedMessage(b"rec2", "h2")), 5, 6
    )
    assert convert.pop_response_from_proto(convert.pop_response_to_proto(response)) == response
    ack = AckMessageRequestHeader(consumer_group="G", topic="T", receipt_handles=("h1", "h2"))
    assert convert.ack_request_from_proto(convert.ack_request_to_proto(ack)) == ack
    acked = AckMessageResponseHeader(ResponseCode.NO_MESSAGE, "r", (0, 208), ("", "r"))
    assert convert.ack_response_from_proto(convert.ack_response_to_proto(acked)) == acked
    change = ChangeInvisibleTimeRequestHeader(consumer_group="G", topic="T", receipt_handle="h", invisible_time_ms=9)
    assert convert.change_invisible_request_from_proto(convert.change_invisible_request_to_proto(change)) == change
    changed = ChangeInvisibleTimeResponseHeader(0, "", "h2", 11, 12)
    assert convert.change_invisible_response_from_proto(convert.change_invisible_response_to_proto(changed)) == changed


def _record(body: bytes) -> bytes:
    host = host_to_bytes("127.0.0.1", 10911)
    return encode_message(
        topic=b"T",
        body=body,
        properties=b"",
        queue_id=1,
        flag=0,
        queue_offset=3,
        physical_offset=100,
        sys_flag=0,
        born_timestamp_ms=1,
        born_host=host,
        store_timestamp_ms=2,
        store_host=host,
        reconsume_times=2,
    )


def test_pop_result_of_maps_codes_and_decodes() -> None:
    found = pop_result_of(PopMessageResponseHeader(0, "", (PoppedMessage(_record(b"x"), "h"),), 5, 6))
    assert found.status is PopStatus.FOUND
    assert [(p.message.body, p.message.reconsume_times, p.receipt_handle) for p in found.messages] == [(b"x", 2, "h")]
    assert pop_result_of(PopMessageResponseHeader(ResponseCode.POLLING_TIMEOUT)).status is PopStatus.POLLING_NOT_FOUND
    assert pop_result_of(PopMessageResponseHeader(ResponseCode.POLLING_FULL)).status is PopStatus.POLLING_FULL
    with pytest.raises(MQBrokerError) as refused:
        pop_result_of(PopMessageResponseHeader(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "no group"), "b")
    assert refused.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    damaged = bytearray(_record(b"x"))
    damaged[-20] ^= 0xFF
    with pytest.raises(MQClientError):
        pop_result_of(PopMessageResponseHeader(0, "", (PoppedMessage(bytes(damaged[:-5]), "h"),)))
