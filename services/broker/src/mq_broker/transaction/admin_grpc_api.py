"""gRPC face of the open-transaction queries: mq.broker.v1.TransactionAdmin (proto/mq/broker/v1/transaction.proto).

Translates only: QueryOpenTransactions asks mq_broker.transaction.open_transactions.OpenTransactions and writes its
answer. With ``authorize`` (auth on) the caller must be allowed admin RPCs first (NO_PERMISSION 16 otherwise, as the
Broker service's admin RPCs). Business outcomes travel as code + remark (SUCCESS 0, INVALID_PARAMETER 29,
SERVICE_NOT_AVAILABLE 14, NO_PERMISSION 16; anything unexpected SYSTEM_ERROR 1, logged). Runs on the broker's asyncio
loop. No RocketMQ counterpart (its tools have no open-transaction listing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_common.errors import MQError, internal_error_remark
from mq_common.logging import get_logger
from mq_common.protocol.transaction_convert import open_transaction_to_proto
from mq_common.response_code import ResponseCode

from mq_broker.transaction.open_transactions import OpenTransactions

log = get_logger("mq_broker.transaction")

SERVICE_NAME = transaction_pb2.DESCRIPTOR.services_by_name["TransactionAdmin"].full_name

_Context = grpc.aio.ServicerContext[
    transaction_pb2.QueryOpenTransactionsRequest, transaction_pb2.QueryOpenTransactionsResponse
]

AuthorizeAdmin = Callable[[Any, str], None]
"""(the call's context, the RPC's name) -> None; raises MQError NO_PERMISSION 16 for a caller who is no admin."""


class TransactionAdminServicer(transaction_pb2_grpc.TransactionAdminServicer):
    """QueryOpenTransactions over an OpenTransactions (see the module)."""

    def __init__(self, queries: OpenTransactions, authorize: AuthorizeAdmin | None = None) -> None:
        self.queries = queries
        self.authorize = authorize

    async def QueryOpenTransactions(
        self, request: transaction_pb2.QueryOpenTransactionsRequest, context: _Context
    ) -> transaction_pb2.QueryOpenTransactionsResponse:
        rpc = "QueryOpenTransactions"
        try:
            if self.authorize is not None:
                self.authorize(context, rpc)
            result = await self.queries.query(request.topic.strip(), request.max_num, request.uniq_key.strip())
        except MQError as exc:
            log.info("request_refused", rpc=rpc, code=ResponseCode.name_of(exc.code), remark=exc.remark)
            return transaction_pb2.QueryOpenTransactionsResponse(code=exc.code, remark=exc.remark)
        except Exception:
            log.exception("request_failed", rpc=rpc)
            return transaction_pb2.QueryOpenTransactionsResponse(
                code=ResponseCode.SYSTEM_ERROR, remark=internal_error_remark(rpc)
            )
        response = transaction_pb2.QueryOpenTransactionsResponse(
            code=ResponseCode.SUCCESS,
            transactions=[open_transaction_to_proto(t) for t in result.transactions],
            total_open=result.total_open,
            state=result.state,
        )
        if result.transaction is not None:
            response.transaction.CopyFrom(open_transaction_to_proto(result.transaction))
        return response
