"""v2 RecallMessage (mq_gateway.v2.recall) over an in-test producer: the handle checked at the edge, the broker's
answers mapped to v2 codes; and a delivered timer message's delivery_timestamp and type (the v2 converter)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.codec import MessageExt
from mq_common.errors import MQBrokerError, MQClientError, MQError
from mq_common.recall_handle import build_recall_handle
from mq_common.response_code import ResponseCode
from mq_gateway.v2.codes import V2Error
from mq_gateway.v2.consumer.converter import message_to_v2
from mq_gateway.v2.context import ClientContext
from mq_gateway.v2.recall import RECALL_TIMEOUT_MS, RecallMessageActivity

Code = definition_pb2.Code
CTX = ClientContext(client_id="recall-test")
HANDLE = build_recall_handle("T", "broker-a", 1_900_000_000_000, "UNIQ1")


@dataclass
class FakeProducer:
    error: MQError | None = None
    calls: list[tuple[str, str, int | None]] = field(default_factory=list)

    async def recall_message(self, topic: str, recall_handle: str, timeout_ms: int | None = None) -> str:
        self.calls.append((topic, recall_handle, timeout_ms))
        if self.error is not None:
            raise self.error
        return "UNIQ1"


def recall_request(topic: str, handle: str) -> service_pb2.RecallMessageRequest:
    return service_pb2.RecallMessageRequest(topic=definition_pb2.Resource(name=topic), recall_handle=handle)


async def test_a_recall_answers_ok_and_the_message_id() -> None:
    producer = FakeProducer()
    answer = await RecallMessageActivity(producer).recall_message(recall_request("T", HANDLE), CTX)
    assert answer.status.code == Code.OK
    assert answer.message_id == "UNIQ1"
    assert producer.calls == [("T", HANDLE, RECALL_TIMEOUT_MS)]


@pytest.mark.parametrize(
    ("topic", "handle", "code", "message"),
    [
        ("T", "", Code.BAD_REQUEST, "recall handle is invalid"),
        ("T", "not a handle", Code.BAD_REQUEST, "recall handle is invalid"),
        ("T", "djIgVCBiIDEgVQ==", Code.BAD_REQUEST, "recall handle is invalid"),  # "v2 T b 1 U"
        ("bad topic!", HANDLE, Code.ILLEGAL_TOPIC, "illegal"),
        ("%DLQ%g", HANDLE, Code.ILLEGAL_TOPIC, "system topic"),
    ],
)
async def test_bad_requests_are_refused_at_the_edge(topic: str, handle: str, code: int, message: str) -> None:
    producer = FakeProducer()
    with pytest.raises(V2Error, match=message) as info:
        await RecallMessageActivity(producer).recall_message(recall_request(topic, handle), CTX)
    assert info.value.code == code
    assert producer.calls == []


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (MQBrokerError("recall failed, timestamp invalid", ResponseCode.ILLEGAL_OPERATION), Code.BAD_REQUEST),
        (MQBrokerError("recall failed, the topic[T] not exist", ResponseCode.TOPIC_NOT_EXIST), Code.TOPIC_NOT_FOUND),
        (
            MQBrokerError("recall failed, broker service not available", ResponseCode.SLAVE_NOT_AVAILABLE),
            Code.HA_NOT_AVAILABLE,
        ),
        (MQClientError("broker 'broker-z' has no master", ResponseCode.BROKER_NOT_EXIST), Code.NOT_FOUND),
    ],
)
async def test_the_brokers_refusals_are_answered_in_band(error: MQError, code: int) -> None:
    answer = await RecallMessageActivity(FakeProducer(error=error)).recall_message(recall_request("T", HANDLE), CTX)
    assert answer.status.code == code
    assert answer.status.message == error.remark
    assert answer.message_id == ""


def _stored(properties: dict[str, str]) -> MessageExt:
    return MessageExt(
        topic="T",
        body=b"x",
        flag=0,
        properties=properties,
        queue_id=0,
        queue_offset=3,
        commit_log_offset=0,
        store_size=100,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        born_host=("127.0.0.1", 1),
        store_timestamp_ms=1_700_000_003_000,
        store_host=("127.0.0.1", 10911),
    )


@pytest.mark.parametrize(
    ("properties", "deliver_ms"),
    [
        ({"UNIQ_KEY": "U", "TIMER_DELIVER_MS": "1700000003000", "TIMER_OUT_MS": "1700000003000"}, 1_700_000_003_000),
        ({"UNIQ_KEY": "U", "TIMER_OUT_MS": "1700000004000", "TIMER_DELAY_SEC": "4"}, 1_700_000_004_000),
    ],
)
def test_a_delivered_timer_keeps_its_delivery_time_and_delay_type(properties: dict[str, str], deliver_ms: int) -> None:
    sp = message_to_v2(_stored(properties)).system_properties
    assert sp.message_type == definition_pb2.MessageType.DELAY
    assert sp.HasField("delivery_timestamp")
    assert sp.delivery_timestamp.ToMilliseconds() == deliver_ms


def test_a_normal_message_has_no_delivery_time() -> None:
    sp = message_to_v2(_stored({"UNIQ_KEY": "U"})).system_properties
    assert sp.message_type == definition_pb2.MessageType.NORMAL
    assert not sp.HasField("delivery_timestamp")
