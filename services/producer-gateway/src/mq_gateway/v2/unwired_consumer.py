"""The ConsumerActivities the gateway uses until the real consumer side (mq_gateway.v2.consumer) is wired in:
every consumer RPC answers NOT_IMPLEMENTED (50100) in-band, and group configs are unknown (Telemetry then merges
the defaults). Runs on the gateway's asyncio loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.errors import MQClientError
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.response_code import ResponseCode

from mq_gateway.v2.codes import Code
from mq_gateway.v2.context import ClientContext

REMARK = "the consumer side is not wired into this gateway"


def _status() -> definition_pb2.Status:
    return definition_pb2.Status(code=Code.NOT_IMPLEMENTED, message=REMARK)


class UnwiredConsumer:
    """Satisfies mq_gateway.v2.servicer.ConsumerActivities; answers NOT_IMPLEMENTED."""

    async def receive_message(
        self, request: service_pb2.ReceiveMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        yield service_pb2.ReceiveMessageResponse(status=_status())

    async def pull_message(
        self, request: service_pb2.PullMessageRequest, ctx: ClientContext, time_remaining_ms: float | None
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        yield service_pb2.PullMessageResponse(status=_status())

    async def ack_message(
        self, request: service_pb2.AckMessageRequest, ctx: ClientContext
    ) -> service_pb2.AckMessageResponse:
        return service_pb2.AckMessageResponse(status=_status())

    async def change_invisible_duration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, ctx: ClientContext
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        return service_pb2.ChangeInvisibleDurationResponse(status=_status())

    async def forward_message_to_dead_letter_queue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, ctx: ClientContext
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=_status())

    async def query_assignment(
        self, request: service_pb2.QueryAssignmentRequest, ctx: ClientContext
    ) -> service_pb2.QueryAssignmentResponse:
        return service_pb2.QueryAssignmentResponse(status=_status())

    async def query_offset(
        self, request: service_pb2.QueryOffsetRequest, ctx: ClientContext
    ) -> service_pb2.QueryOffsetResponse:
        return service_pb2.QueryOffsetResponse(status=_status())

    async def get_offset(
        self, request: service_pb2.GetOffsetRequest, ctx: ClientContext
    ) -> service_pb2.GetOffsetResponse:
        return service_pb2.GetOffsetResponse(status=_status())

    async def update_offset(
        self, request: service_pb2.UpdateOffsetRequest, ctx: ClientContext
    ) -> service_pb2.UpdateOffsetResponse:
        return service_pb2.UpdateOffsetResponse(status=_status())

    async def subscription_group_config(self, group: str) -> SubscriptionGroupConfig:
        raise MQClientError(REMARK, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)

    async def close(self) -> None:
        return None
