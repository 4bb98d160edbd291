"""gRPC face of the transaction check-back: mq.broker.v1.TransactionCheck (proto/mq/broker/v1/transaction.proto).

Translates only: a TransactionChecks stream is one ProducerChannel of mq_broker.transaction.producer_manager; its
request frames replace the channel's producer groups, the channel's queued checks are written as responses. With
``authorize`` (auth on), every frame's groups are checked first (Pub on each group: a check carries the message); a
refusal ends the stream with gRPC PERMISSION_DENIED and the remark, having registered nothing. The stream ends when
the gateway ends it or the broker stops. Runs on the broker's asyncio loop. Mirrors the
CHECK_TRANSACTION_STATE push of org.apache.rocketmq.broker.client.net.Broker2Client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc
from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_common.errors import MQError
from mq_common.logging import get_logger

from mq_broker.transaction.producer_manager import ProducerChannel, ProducerManager

log = get_logger("mq_broker.transaction")

SERVICE_NAME = transaction_pb2.DESCRIPTOR.services_by_name["TransactionCheck"].full_name

_Context = grpc.aio.ServicerContext[transaction_pb2.TransactionChecksRequest, transaction_pb2.TransactionChecksResponse]


Authorize = Callable[[_Context, frozenset[str]], None]
"""(the stream's context, the producer groups a frame registers) -> None; raises MQError NO_PERMISSION 16."""


class TransactionCheckServicer(transaction_pb2_grpc.TransactionCheckServicer):
    """TransactionChecks streams over a ProducerManager."""

    def __init__(self, producers: ProducerManager, authorize: Authorize | None = None) -> None:
        self.producers = producers
        self.authorize = authorize

    async def TransactionChecks(
        self, request_iterator: AsyncIterator[transaction_pb2.TransactionChecksRequest], context: _Context
    ) -> AsyncIterator[transaction_pb2.TransactionChecksResponse]:
        channel = ProducerChannel("")
        self.producers.add(channel)
        reader = asyncio.get_running_loop().create_task(self._read(channel, request_iterator, context))
        try:
            while not reader.done():
                getter = asyncio.ensure_future(channel.queue.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    break
                check = getter.result()
                yield transaction_pb2.TransactionChecksResponse(
                    producer_group=check.producer_group,
                    topic=check.topic,
                    msg_id=check.msg_id,
                    transaction_id=check.transaction_id,
                    tran_state_table_offset=check.tran_state_table_offset,
                    commit_log_offset=check.commit_log_offset,
                    broker_name=check.broker_name,
                    message_bytes=check.message_bytes,
                )
            refused = reader.exception() if reader.done() and not reader.cancelled() else None
            if isinstance(refused, MQError):
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, refused.remark)
        finally:
            self.producers.remove(channel)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read(
        self,
        channel: ProducerChannel,
        requests: AsyncIterator[transaction_pb2.TransactionChecksRequest],
        context: _Context,
    ) -> None:
        async for request in requests:
            groups = frozenset(request.producer_groups)
            if self.authorize is not None:
                try:
                    self.authorize(context, groups)
                except MQError as exc:
                    log.info("transaction_checks_refused", client_id=request.client_id, remark=exc.remark)
                    channel.groups = frozenset()
                    raise
            channel.client_id = request.client_id
            channel.groups = groups
            log.debug("transaction_producer_groups", client_id=request.client_id, groups=len(channel.groups))
