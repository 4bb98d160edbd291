"""mq_common.wire_bounds: element bounds checked on the wire bytes before parsing."""

from __future__ import annotations

import pytest
from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq.namesrv.v1 import namesrv_pb2
from mq_common.wire_bounds import (
    DEFAULT_MAX_ELEMENTS,
    MAX_OTHER_FIELDS,
    BoundExceeded,
    FieldBound,
    Malformed,
    build_plan,
    check_bounds,
    field_path,
    method_bounds,
)

BROKER = broker_pb2.DESCRIPTOR.services_by_name["Broker"]


def _frame(requests: int) -> bytes:
    batch = broker_pb2.SendBatchRequest(requests=[broker_pb2.SendMessageRequest()] * requests)
    return broker_pb2.SendStreamRequest(frame_id=7, batch=batch).SerializeToString()


def test_field_path_and_method_bounds_name_field_numbers() -> None:
    assert field_path(broker_pb2.SendStreamRequest.DESCRIPTOR, "batch.requests") == (4, 1)
    name, bounds = method_bounds(BROKER, "CreateTopic", ("topic_config.attributes", 3, "max_topic_attributes", 100))
    assert name == "/mq.broker.v1.Broker/CreateTopic"
    assert bounds == (FieldBound((1, 7), 3, "max_topic_attributes", 100),)
    with pytest.raises(KeyError):
        field_path(broker_pb2.SendStreamRequest.DESCRIPTOR, "batch.nothing")


def test_a_nested_count_bound_allows_its_limit_and_refuses_one_more() -> None:
    plan = build_plan(method_bounds(BROKER, "SendStream", ("batch.requests", 5, "max_send_batch_requests", None))[1])
    check_bounds(_frame(5), plan)
    with pytest.raises(BoundExceeded, match=r"more than 5 elements in one request \(max_send_batch_requests\)"):
        check_bounds(_frame(6), plan)


def test_a_byte_bound_counts_the_encoded_entries() -> None:
    _, bounds = method_bounds(BROKER, "CreateTopic", ("topic_config.attributes", 10, "attrs", 64))
    plan = build_plan(bounds)
    small = common_pb2.TopicConfig(topic_name="T", attributes={"a": "b"})
    check_bounds(broker_pb2.CreateTopicRequest(topic_config=small).SerializeToString(), plan)
    big = common_pb2.TopicConfig(topic_name="T", attributes={"a": "b" * 100})
    with pytest.raises(BoundExceeded, match="more than 64 bytes"):
        check_bounds(broker_pb2.CreateTopicRequest(topic_config=big).SerializeToString(), plan)


def test_every_top_level_repeated_field_gets_the_default_bound() -> None:
    plan = build_plan((), namesrv_pb2.RegisterBrokerRequest.DESCRIPTOR)
    entry = b"\x32\x00"  # an empty topic_config_table entry
    check_bounds(entry * DEFAULT_MAX_ELEMENTS, plan)
    with pytest.raises(BoundExceeded, match="topic_config_table"):
        check_bounds(entry * (DEFAULT_MAX_ELEMENTS + 1), plan)


def test_a_flood_of_other_fields_is_refused_without_walking_all_of_it() -> None:
    plan = build_plan((), namesrv_pb2.RegisterBrokerRequest.DESCRIPTOR)
    with pytest.raises(BoundExceeded, match=f"more than {MAX_OTHER_FIELDS} fields"):
        check_bounds(b"\x08\x01" * 10_000_000, plan)  # cluster_name's field number as a varint, 10 million times


@pytest.mark.parametrize(
    "data",
    [b"\x0a\x05ab", b"\x0a", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0b", b"\x0d\x00"],
    ids=["length past the end", "no length", "overlong varint", "group", "short fixed32"],
)
def test_malformed_bytes_are_malformed(data: bytes) -> None:
    with pytest.raises(Malformed):
        check_bounds(data, build_plan((), namesrv_pb2.RegisterBrokerRequest.DESCRIPTOR))


def test_no_plan_checks_nothing() -> None:
    check_bounds(b"\xff\xff", {})
