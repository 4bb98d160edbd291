"""Which gateways can reach a live producer of a group, and the check requests waiting for them.

Mirrors org.apache.rocketmq.broker.client.ProducerManager (group -> channels; getAvailableChannel picks one) and
AbstractTransactionalMessageCheckListener#sendCheckMessage: every gateway holds one TransactionChecks stream to this
broker (mq_broker.transaction.grpc_api) and registers the producer groups it has live v2 producers for; a check copy
of a half message goes to ONE channel of its group (PGROUP), round robin. With no channel for the group the check is
dropped — it was counted (TRANSACTION_CHECK_TIMES) and is asked again next interval, as RocketMQ — and logged once
per group and check pass (:meth:`ProducerManager.log_unreached`: how many, one example UNIQ_KEY), not once per half
message (a Spark job's group holds hundreds of thousands, and nobody registers it by design). A channel's queue is
bounded (MAX_PENDING_CHECKS; a full one skips to the next channel, then drops). Event loop.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mq_common.codec import MessageExt
from mq_common.constants import MessageConst
from mq_common.logging import get_logger

log = get_logger("mq_broker.transaction")

MAX_PENDING_CHECKS: Final = 10_000


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequest:
    """CheckTransactionStateRequestHeader plus the check copy (``message_bytes``, CommitLog format v1)."""

    producer_group: str
    topic: str
    msg_id: str
    transaction_id: str
    tran_state_table_offset: int
    commit_log_offset: int
    broker_name: str
    message_bytes: bytes


class ProducerChannel:
    """One gateway stream: its ``client_id``, the ``groups`` it registered and its queue of checks to write."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.groups: frozenset[str] = frozenset()
        self.queue: asyncio.Queue[CheckTransactionStateRequest] = asyncio.Queue(MAX_PENDING_CHECKS)


class ProducerManager:
    """group -> registered channels; :meth:`check` is the TransactionalMessageCheckService's listener."""

    def __init__(self, broker_name: str, read_record: Callable[[int], bytes | None]) -> None:
        """``read_record(commit_log_offset) -> bytes | None`` reads the check copy's record (the store's
        select_one_message_by_offset)."""
        self.broker_name = broker_name
        self._read_record = read_record
        self._channels: list[ProducerChannel] = []
        self._turn = itertools.count()
        self.dropped = 0
        self._unreached: dict[str, tuple[int, str]] = {}
        """Group -> (checks dropped for lack of a channel since the last log line, an example UNIQ_KEY)."""

    def add(self, channel: ProducerChannel) -> None:
        self._channels.append(channel)

    def remove(self, channel: ProducerChannel) -> None:
        if channel in self._channels:
            self._channels.remove(channel)

    def channels_of(self, group: str) -> list[ProducerChannel]:
        return [c for c in self._channels if group in c.groups]

    def check(self, copy: MessageExt) -> None:
        """Hand the check of ``copy`` to one channel of its group (see the module)."""
        group = copy.properties.get(MessageConst.PRODUCER_GROUP, "")
        channels = self.channels_of(group)
        uniq_key = copy.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        if not channels:
            self.dropped += 1
            count, example = self._unreached.get(group, (0, uniq_key))
            self._unreached[group] = (count + 1, example)
            return
        record = self._read_record(copy.commit_log_offset)
        request = CheckTransactionStateRequest(
            producer_group=group,
            topic=copy.properties.get(MessageConst.REAL_TOPIC, ""),
            msg_id=uniq_key,
            transaction_id=uniq_key,
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            broker_name=self.broker_name,
            message_bytes=bytes(record) if record else b"",
        )
        start = next(self._turn)
        for i in range(len(channels)):
            channel = channels[(start + i) % len(channels)]
            try:
                channel.queue.put_nowait(request)
                return
            except asyncio.QueueFull:
                continue
        self.dropped += 1
        log.warning("transaction_check_queues_full", producer_group=group, uniq_key=uniq_key)

    def log_unreached(self) -> None:
        """Log one ``transaction_check_no_producer`` line per group whose checks found no channel since the last
        call (``checks`` = how many, ``uniq_key`` = one of them), then forget them. The check service calls it after
        each pass."""
        unreached, self._unreached = self._unreached, {}
        for group, (count, example) in unreached.items():
            log.info("transaction_check_no_producer", producer_group=group, checks=count, uniq_key=example)
