"""The recall handle codec: RocketMQ's RecallMessageHandle.HandleV1 strings, both ways."""

from __future__ import annotations

import base64

import pytest
from mq_common.recall_handle import RecallHandle, build_recall_handle, decode_recall_handle


def test_build_is_rocketmq_handle_v1_bytes() -> None:
    handle = build_recall_handle("TopicA", "broker-a", 1_700_000_000_123, "7F0000010001000000000000000A0001")
    raw = base64.urlsafe_b64decode(handle).decode()
    assert raw == "v1 TopicA broker-a 1700000000123 7F0000010001000000000000000A0001"
    assert handle.endswith("=") or len(handle) % 4 == 0  # padded, as Java's Base64.getUrlEncoder()


def test_decode_round_trips_with_and_without_padding() -> None:
    handle = build_recall_handle("T%x", "b", 5, "K")
    expected = RecallHandle(topic="T%x", broker_name="b", deliver_ms=5, uniq_key="K")
    assert decode_recall_handle(handle) == expected
    assert decode_recall_handle(handle.rstrip("=")) == expected


def test_decode_takes_a_java_built_handle_with_url_safe_characters() -> None:
    raw = "v1 T?>>? b 1 K"  # encodes with '-' and '_' in the URL-safe alphabet
    handle = base64.urlsafe_b64encode(raw.encode()).decode()
    assert "-" in handle or "_" in handle
    assert decode_recall_handle(handle).topic == "T?>>?"


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "not base64!",
        "dGVzdA",  # "test": no version
        base64.urlsafe_b64encode(b"v2 T b 1 K").decode(),
        base64.urlsafe_b64encode(b"v1 T b 1").decode(),  # four fields
        base64.urlsafe_b64encode(b"v1 T b soon K").decode(),
        base64.urlsafe_b64encode(b"v1 T b -1 K").decode(),
        base64.urlsafe_b64encode(b"v1 T  1 K").decode(),  # empty broker name
        base64.urlsafe_b64encode(b"\xff\xfe v1").decode(),
        "====",
    ],
)
def test_decode_refuses_garbage_with_rocketmq_text(handle: str) -> None:
    with pytest.raises(ValueError, match=r"^recall handle is invalid$"):
        decode_recall_handle(handle)
