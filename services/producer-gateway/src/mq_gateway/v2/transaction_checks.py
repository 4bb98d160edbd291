"""The gateway's side of the transaction check-back: brokers ask, a live v2 producer answers.

The broker does not know which gateway replica holds a client's Telemetry stream, so every gateway keeps one
TransactionChecks stream (proto/mq/broker/v1/transaction.proto) to each broker master of the topics its live v2
producers publish, and registers those topics — a v2 producer's group is its topic, as the proxy's PGROUP — on it,
again whenever they change (checked every REGISTER_INTERVAL_S). The broker's ProducerManager sends each check to one
gateway that registered the group; the gateway relays it to one of its producers of the topic (round robin) as
``RecoverOrphanedTransactionCommand{message, transaction_id}`` on that client's Telemetry stream. The client's
TransactionChecker answers with EndTransaction source SOURCE_SERVER_CHECK (mq_gateway.v2.transactions). A check
with no producer here, or a client whose queue is full, is dropped and logged: the broker asks again next interval.
A broken stream is reopened after RECONNECT_S. Runs on the gateway's asyncio loop. Mirrors RocketMQ 5's proxy
(ProxyChannel registered as the producer group's channel; GrpcClientChannel#checkTransactionState).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Final

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.channels import ChannelPool
from mq_common.codec import MessageDecodeError, decode_message
from mq_common.errors import MQError
from mq_common.logging import get_logger

from mq_gateway.v2.consumer.converter import message_to_v2
from mq_gateway.v2.telemetry import TelemetrySessions
from mq_gateway.v2.transactions import TransactionId, encode_transaction_id

log = get_logger("mq_gateway.v2.transaction_checks")

REGISTER_INTERVAL_S: Final = 1.0
RECONNECT_S: Final = 1.0


class TransactionCheckRelay:
    """One TransactionChecks stream per broker master; relays checks to Telemetry sessions (see the module)."""

    def __init__(
        self, sessions: TelemetrySessions, routes: TopicRouteManager, pool: ChannelPool, client_id: str
    ) -> None:
        self.sessions = sessions
        self.routes = routes
        self.pool = pool
        self.client_id = client_id
        self._groups: frozenset[str] = frozenset()
        self._outboxes: dict[str, asyncio.Queue[transaction_pb2.TransactionChecksRequest]] = {}
        self._streams: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._turn = itertools.count()
        self.relayed = 0
        self.dropped = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="transaction-check-relay")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._streams.values()) if t is not None]
        self._task = None
        self._streams.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self.register_once()
            except Exception:
                log.exception("transaction_check_register_failed")
            await asyncio.sleep(REGISTER_INTERVAL_S)

    async def register_once(self) -> None:
        """Open streams to new masters and send the topic list where it changed."""
        topics = frozenset(self.sessions.published_topics())
        masters: set[str] = set()
        for topic in topics:
            try:
                route = await self.routes.route(topic)
            except MQError:
                continue
            masters.update(a for a in (bd.master_addr() for bd in route.broker_datas) if a)
        changed = topics != self._groups
        self._groups = topics
        for addr in masters - set(self._streams):
            self._outboxes[addr] = asyncio.Queue()
            self._streams[addr] = asyncio.create_task(self._stream(addr), name=f"transaction-checks-{addr}")
            self._outboxes[addr].put_nowait(self._frame())
        if changed:
            for addr, outbox in self._outboxes.items():
                if addr in masters or not topics:
                    outbox.put_nowait(self._frame())

    def _frame(self) -> transaction_pb2.TransactionChecksRequest:
        return transaction_pb2.TransactionChecksRequest(client_id=self.client_id, producer_groups=sorted(self._groups))

    async def _stream(self, addr: str) -> None:
        outbox = self._outboxes[addr]

        async def requests() -> AsyncIterator[transaction_pb2.TransactionChecksRequest]:
            while True:
                yield await outbox.get()

        while True:
            try:
                stub = transaction_pb2_grpc.TransactionCheckStub(self.pool.get(addr))
                call = stub.TransactionChecks(requests())
                async for check in call:
                    self.relay(check)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("transaction_checks_stream_broken", broker=addr, error=str(exc))
            outbox.put_nowait(self._frame())  # the reopened stream registers again first
            await asyncio.sleep(RECONNECT_S)

    def relay(self, check: transaction_pb2.TransactionChecksResponse) -> bool:
        """Push the check to one producer of its topic; False when nobody here could take it."""
        clients = self.sessions.producers_of(check.topic)
        if not clients:
            self.dropped += 1
            log.info("transaction_check_no_client", topic=check.topic, msg_id=check.msg_id)
            return False
        try:
            message = message_to_v2(decode_message(check.message_bytes))
        except (MessageDecodeError, ValueError, IndexError):
            self.dropped += 1
            log.warning("transaction_check_unreadable", topic=check.topic, msg_id=check.msg_id)
            return False
        message.topic.name = check.topic
        message.system_properties.message_type = definition_pb2.MessageType.TRANSACTION
        tid = encode_transaction_id(
            TransactionId(check.broker_name, check.commit_log_offset, check.tran_state_table_offset, check.msg_id)
        )
        command = service_pb2.TelemetryCommand(
            recover_orphaned_transaction_command=service_pb2.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=tid
            )
        )
        start = next(self._turn)
        for i in range(len(clients)):
            if self.sessions.push(clients[(start + i) % len(clients)], command):
                self.relayed += 1
                return True
        self.dropped += 1
        return False
