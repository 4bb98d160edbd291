"""The gateway's side of the transaction check-back: brokers ask, a live v2 producer answers.

The broker does not know which gateway replica holds a client's Telemetry stream, so every gateway keeps one
TransactionChecks stream (proto/mq/broker/v1/transaction.proto, through mq_client.transaction_checks) to each broker
master of the topics its live v2 producers publish, and registers those topics — a v2 producer's group is its
topic, as the proxy's PGROUP — on it, again whenever they change (looked at every second). The broker's
ProducerManager sends each check to one gateway that registered the group; the gateway relays it to one of its
producers of the topic (round robin) as ``RecoverOrphanedTransactionCommand{message, transaction_id}`` on that
client's Telemetry stream. The client's TransactionChecker answers with EndTransaction source SOURCE_SERVER_CHECK
(mq_gateway.v2.transactions). A check with no producer here, or whose clients' queues are full, is dropped and
logged: the broker asks again next interval. Runs on the gateway's asyncio loop. Mirrors RocketMQ 5's proxy
(ProxyChannel registered as the producer group's channel; GrpcClientChannel#checkTransactionState).
"""

from __future__ import annotations

import itertools

from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_client.producer.route_manager import TopicRouteManager
from mq_client.transaction_checks import TransactionCheck, TransactionCheckStreams
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.logging import get_logger

from mq_gateway.v2.consumer.converter import message_to_v2
from mq_gateway.v2.telemetry import TelemetrySessions
from mq_gateway.v2.transactions import TransactionId, encode_transaction_id

log = get_logger("mq_gateway.v2.transaction_checks")


class TransactionCheckRelay:
    """Check streams to the brokers of the published topics; relays checks to Telemetry sessions."""

    def __init__(
        self, sessions: TelemetrySessions, routes: TopicRouteManager, pool: ChannelPool, client_id: str
    ) -> None:
        self.sessions = sessions
        self.routes = routes
        self.streams = TransactionCheckStreams(
            pool, client_id, lambda: frozenset(sessions.published_topics()), self._masters, self._on_check
        )
        self._turn = itertools.count()
        self.relayed = 0
        self.dropped = 0

    def start(self) -> None:
        self.streams.start()

    async def stop(self) -> None:
        await self.streams.stop()

    async def _masters(self) -> set[str]:
        masters: set[str] = set()
        for topic in self.sessions.published_topics():
            try:
                route = await self.routes.route(topic)
            except MQError:
                continue
            masters.update(a for a in (bd.master_addr() for bd in route.broker_datas) if a)
        return masters

    async def _on_check(self, check: TransactionCheck) -> None:
        self.relay(check)

    def relay(self, check: TransactionCheck) -> bool:
        """Push the check to one producer of its topic; False when nobody here could take it."""
        clients = self.sessions.producers_of(check.topic)
        if not clients or check.message is None:
            self.dropped += 1
            log.info("transaction_check_not_relayed", topic=check.topic, msg_id=check.msg_id, clients=len(clients))
            return False
        message = message_to_v2(check.message)
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
