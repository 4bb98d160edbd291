"""SendMessage's response entries for outcomes a healthy cluster does not produce on demand (an in-test producer):
per-message statuses, MULTIPLE_RESULTS, stored-but-not-durable send statuses, unexpected failures."""

from __future__ import annotations

from collections.abc import Sequence

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer import Message, SendResult, SendStatus
from mq_client.producer.route_manager import TopicRouteManager
from mq_client.producer.testing import InMemoryNameServer, make_route
from mq_common.errors import MQBrokerError, MQError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode
from mq_gateway.v2.limits import V2Limits
from mq_gateway.v2.route import route_message_types
from mq_gateway.v2.send import SendMessageActivity, peer_host

Code = definition_pb2.Code


class ScriptedSender:
    """Answers by body: b"ok" SEND_OK, b"flush" FLUSH_DISK_TIMEOUT, b"busy" a broker SYSTEM_BUSY, else a bug."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.batches: list[int] = []

    async def send(self, msg: Message, timeout_ms: int | None = None, *, checked: bool = False) -> SendResult:
        assert checked, "the activity checked the message"
        return self._answer(msg)

    async def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None) -> list[SendResult | MQError]:
        """One call for the whole request, one outcome per message (as DefaultMQProducer.send_batch)."""
        self.batches.append(len(msgs))
        outcomes: list[SendResult | MQError] = []
        for msg in msgs:
            try:
                outcomes.append(self._answer(msg))
            except MQError as exc:
                outcomes.append(exc)
        return outcomes

    def _answer(self, msg: Message) -> SendResult:
        self.sent.append(msg)
        queue = MessageQueue(msg.topic, "broker-a", 0)
        if msg.body == b"ok":
            return SendResult(SendStatus.SEND_OK, "id", "off", queue, 7)
        if msg.body == b"flush":
            return SendResult(SendStatus.FLUSH_DISK_TIMEOUT, "id", "off", queue, 8)
        if msg.body == b"busy":
            raise MQBrokerError("too busy", ResponseCode.SYSTEM_BUSY, "broker-a")
        raise ZeroDivisionError("a bug")


def request(*bodies: bytes) -> service_pb2.SendMessageRequest:
    return service_pb2.SendMessageRequest(
        messages=[
            definition_pb2.Message(
                topic=definition_pb2.Resource(name="T"),
                body=body,
                system_properties=definition_pb2.SystemProperties(message_id=f"ID{i}"),
            )
            for i, body in enumerate(bodies)
        ]
    )


def activity(sender: ScriptedSender) -> SendMessageActivity:
    routes = TopicRouteManager(InMemoryNameServer({"T": make_route({"broker-a": 1}, addrs={"broker-a": "a:1"})}))
    return SendMessageActivity(sender, routes, route_message_types(routes), V2Limits())


async def test_each_message_gets_its_own_status_and_mixed_results_say_multiple() -> None:
    sender = ScriptedSender()
    answer = await activity(sender).send_message(request(b"ok", b"flush", b"busy"), "ipv4:127.0.0.24:1234", 3000)
    assert sender.batches == [3], "the request's messages went to the producer as one call"
    assert answer.status.code == Code.MULTIPLE_RESULTS
    codes = [e.status.code for e in answer.entries]
    assert codes == [Code.OK, Code.MASTER_PERSISTENCE_TIMEOUT, Code.TOO_MANY_REQUESTS]
    assert [e.message_id for e in answer.entries] == ["ID0", "ID1", "ID2"]
    assert (answer.entries[0].offset, answer.entries[0].transaction_id) == (7, "ID0")
    assert answer.entries[1].offset == 8  # stored, not durable yet: still has its offset
    assert {m.properties["__BORNHOST"] for m in sender.sent} == {"127.0.0.24"}


async def test_an_unexpected_failure_is_an_internal_error_entry() -> None:
    answer = await activity(ScriptedSender()).send_message(request(b"bug"), "ipv4:1.2.3.4:5", 3000)
    assert answer.status.code == Code.INTERNAL_SERVER_ERROR
    assert [e.message_id for e in answer.entries] == ["ID0"]


async def test_one_common_outcome_is_the_top_level_status() -> None:
    answer = await activity(ScriptedSender()).send_message(request(b"busy", b"busy"), "ipv4:1.2.3.4:5", 3000)
    assert answer.status.code == Code.TOO_MANY_REQUESTS
    assert len(answer.entries) == 2


def test_peer_host() -> None:
    assert peer_host("ipv4:127.0.0.1:5555") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:5555") == "::1"
    assert peer_host("unix:/tmp/s") == "unix:/tmp/s"
