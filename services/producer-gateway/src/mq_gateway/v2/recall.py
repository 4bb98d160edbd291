"""v2 RecallMessage: cancel a delay (timer) message that is not delivered yet, by the recall handle of its send.

The topic is checked (ILLEGAL_TOPIC 40002), the handle decoded (mq_common.recall_handle), and the producer core
calls RecallMessage on the master of the handle's broker (its one route view, TopicRouteManager.master_addr). The
answer carries the recalled message's id. Codes: a handle that does not decode BAD_REQUEST 40000 "recall handle is
invalid"; the broker's ILLEGAL_OPERATION 604 (another topic or broker, a delivery time already passed, an unknown
or already recalled message: its remark says which) BAD_REQUEST 40000; TOPIC_NOT_EXIST TOPIC_NOT_FOUND 40402; a
broker the topic's route does not name NOT_FOUND 40400; SLAVE_NOT_AVAILABLE HA_NOT_AVAILABLE 50002; others through
:mod:`mq_gateway.v2.codes`. The 5.x proxy answers INTERNAL_SERVER_ERROR 50001 for a garbage handle and for every
ILLEGAL_OPERATION (its ResponseBuilder has no mapping for them); a client's retry logic reads the code, and a
refused recall is the request's fault, not the server's. Runs on the gateway's asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.v2.producer.RecallMessageActivity and ProducerProcessor#recallMessage.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Protocol

from apache.rocketmq.v2 import service_pb2
from mq_common.constants import is_client_forbidden_send_topic
from mq_common.errors import MQError
from mq_common.recall_handle import INVALID_RECALL_HANDLE, decode_recall_handle
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code, V2Code, V2Error, ok_status, status_of
from mq_gateway.v2.context import ClientContext
from mq_gateway.v2.route import check_topic_name

# The proxy's recall timeout (RecallMessageActivity: Duration.ofSeconds(2)).
RECALL_TIMEOUT_MS: Final = 2_000
RECALL_CODE_OVERRIDES: Final[Mapping[int, V2Code]] = MappingProxyType(
    {ResponseCode.ILLEGAL_OPERATION: Code.BAD_REQUEST}
)


class Recaller(Protocol):
    """The part of mq_client.producer.DefaultMQProducer RecallMessage uses."""

    async def recall_message(self, topic: str, recall_handle: str, timeout_ms: int | None = None) -> str: ...


class RecallMessageActivity:
    """RecallMessage over the producer core (``recaller``), each call within ``timeout_ms``."""

    def __init__(self, recaller: Recaller, timeout_ms: int = RECALL_TIMEOUT_MS) -> None:
        self.recaller = recaller
        self.timeout_ms = timeout_ms

    async def recall_message(
        self, request: service_pb2.RecallMessageRequest, ctx: ClientContext
    ) -> service_pb2.RecallMessageResponse:
        """``{status, message_id}``: OK and the recalled message's id, or the refusal (module docstring) in-band."""
        topic = request.topic.name
        check_topic_name(topic)
        if is_client_forbidden_send_topic(topic):
            raise V2Error(Code.ILLEGAL_TOPIC, f"cannot recall a message of system topic {topic}")
        try:
            decode_recall_handle(request.recall_handle)
        except ValueError:
            raise V2Error(Code.BAD_REQUEST, INVALID_RECALL_HANDLE) from None
        try:
            message_id = await self.recaller.recall_message(topic, request.recall_handle, self.timeout_ms)
        except MQError as exc:
            return service_pb2.RecallMessageResponse(status=status_of(exc, RECALL_CODE_OVERRIDES))
        return service_pb2.RecallMessageResponse(status=ok_status(), message_id=message_id)
