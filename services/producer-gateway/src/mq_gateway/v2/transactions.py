"""The hook the message-types issue fills: EndTransaction and RecallMessage (transactional and delay messages).

Until then both answer NOT_IMPLEMENTED (50100) in-band. Replace :class:`TransactionActivities` (the servicer takes
any object with these two methods) to implement them. Runs on the gateway's asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.v2.transaction.EndTransactionActivity and
org.apache.rocketmq.proxy.grpc.v2.producer.RecallMessageActivity.
"""

from __future__ import annotations

from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2

from mq_gateway.v2.codes import Code
from mq_gateway.v2.context import ClientContext

NOT_IMPLEMENTED_REMARK: Final = "arrives with the message-types issue"


def not_implemented(what: str) -> definition_pb2.Status:
    """``Status{NOT_IMPLEMENTED, "<what> arrives with the message-types issue"}``."""
    return definition_pb2.Status(code=Code.NOT_IMPLEMENTED, message=f"{what} {NOT_IMPLEMENTED_REMARK}")


class TransactionActivities:
    """EndTransaction / RecallMessage: NOT_IMPLEMENTED for now."""

    async def end_transaction(
        self, request: service_pb2.EndTransactionRequest, ctx: ClientContext
    ) -> service_pb2.EndTransactionResponse:
        return service_pb2.EndTransactionResponse(status=not_implemented("EndTransaction"))

    async def recall_message(
        self, request: service_pb2.RecallMessageRequest, ctx: ClientContext
    ) -> service_pb2.RecallMessageResponse:
        return service_pb2.RecallMessageResponse(status=not_implemented("RecallMessage"))
