"""The broker's POP consumption as one object: pop, ack, change of invisible time, revive, in-flight counts.

Mirrors what BrokerController wires for POP: PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor,
the PopReviveService threads and PopInflightMessageCounter, plus the revive topic TopicConfigManager#init creates
(``rmq_sys_REVIVE_LOG_<cluster>``, revive_queue_num queues). :meth:`PopService.start` creates that topic when
missing, rebuilds the in-flight table from the revive log and starts reviving; call it after the store, the topic
table and the consumer offsets are loaded and before serving. revive_queue_num must not shrink between starts
(checkpoints in the queues left out would not be revived; logged). Event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path

from mq_common.constants import PermName
from mq_common.logging import get_logger
from mq_common.protocol import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    TopicConfig,
)

from mq_broker.consumer.long_polling import LongPollingService
from mq_broker.consumer.pop.ack_processor import AckMessageProcessor, ChangeInvisibleTimeProcessor
from mq_broker.consumer.pop.context import GroupLookup, OffsetStore, PopConfig, PopContext, ReviveLogWriter, now_ms
from mq_broker.consumer.pop.inflight import InflightTable
from mq_broker.consumer.pop.order_info import CONSUMER_ORDER_INFO_FILE, ConsumerOrderInfoManager
from mq_broker.consumer.pop.pop_processor import PopMessageProcessor
from mq_broker.consumer.pop.recovery import RecoveryStats, recover_inflight
from mq_broker.consumer.pop.revive_service import PopReviveService
from mq_broker.consumer.retry_dlq import RetryDlqService
from mq_broker.store.api import MessageStore
from mq_broker.topic_config import TopicConfigManager

log = get_logger("mq_broker.consumer.pop")


class PopService:
    """POP for one broker (see the module docstring)."""

    def __init__(
        self,
        config: PopConfig,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: GroupLookup,
        offsets: OffsetStore,
        long_polling: LongPollingService,
        retry_dlq: RetryDlqService,
        order_info_path: Path | None = None,
    ) -> None:
        self.config = config
        self.context = PopContext(
            config,
            store,
            topics,
            groups,
            offsets,
            InflightTable(config.revive_queue_num),
            ReviveLogWriter(store, config),
            ConsumerOrderInfoManager(
                order_info_path or store.config.store_path_root_dir / "config" / CONSUMER_ORDER_INFO_FILE
            ),
        )
        self.pop_processor = PopMessageProcessor(self.context, long_polling, retry_dlq)
        self.ack_processor = AckMessageProcessor(self.context, long_polling)
        self.change_processor = ChangeInvisibleTimeProcessor(self.context, long_polling)
        self.revive_service = PopReviveService(self.context, retry_dlq, long_polling)

    def start(self) -> RecoveryStats:
        """Create the revive topic when missing, rebuild the in-flight table, start the revive task."""
        cfg = self.config
        existing = self.context.topics.select_topic_config(cfg.revive_topic)
        if existing is not None and existing.read_queue_nums > cfg.revive_queue_num:
            log.error(  # as in RocketMQ, reviveQueueNum must not shrink
                "pop_revive_queue_num_shrunk",
                revive_topic=cfg.revive_topic,
                queues=existing.read_queue_nums,
                revive_queue_num=cfg.revive_queue_num,
            )
        if existing is None or existing.read_queue_nums < cfg.revive_queue_num:
            rw = PermName.PERM_READ | PermName.PERM_WRITE
            revive = TopicConfig(cfg.revive_topic, cfg.revive_queue_num, cfg.revive_queue_num, rw)
            self.context.topics.update_topic_config(revive)
        self.context.order_info.load()  # blocking: one small file (ValueError when it is unusable)
        self._clean_order_info()
        stats = recover_inflight(self.context)
        self.revive_service.start()
        return stats

    async def stop(self) -> None:
        """Stop reviving and commit the revive offsets (call before the consumer offsets are persisted); write
        the orderly POP table (config/consumerOrderInfo.json) once more (an OSError is logged)."""
        await self.revive_service.stop()
        order_info = self.context.order_info
        self._clean_order_info()
        try:
            await order_info.wait_persisted()
            await asyncio.to_thread(order_info.persist)
        except OSError as exc:
            log.error("consumer_order_info_persist_failed", error=str(exc))

    def _clean_order_info(self) -> None:
        """Drop the order info of deleted topics, groups and queues and of queues idle for a day (at start and stop,
        as RocketMQ cleans at each persist)."""
        ctx = self.context

        def read_queue_nums(topic: str) -> int | None:
            config = ctx.topics.select_topic_config(topic)
            return None if config is None else config.read_queue_nums

        dropped = ctx.order_info.auto_clean(read_queue_nums, ctx.groups.contains, now_ms())
        if dropped:
            log.info("consumer_order_info_cleaned", queues=dropped)

    async def restart(self) -> RecoveryStats:
        """Controller mode, on becoming master: stop reviving, rebuild the in-flight table from the revive log
        (replicated from the former master) and revive again. Event loop."""
        await self.revive_service.stop()
        self.context.table.clear()
        return self.start()

    async def pop(self, request: PopMessageRequestHeader, peer: str = "") -> PopMessageResponseHeader:
        """See mq_broker.consumer.pop.pop_processor (raises MQError for a refused request).

        ``request.ack_receipt_handles`` are acked first, as :meth:`ack` would (one code and remark per handle in
        the answer's ack_codes / ack_remarks, whatever the pop finds); a request-level refusal of the acks (more
        than MAX_ACK_HANDLES handles, an unknown topic) refuses the whole call before anything is acked or popped.
        A pop refused after its acks were applied raises as usual: a client that acks again is answered
        NO_MESSAGE (acked already) per handle. Ours, not RocketMQ's: one call instead of an ack and a pop."""
        if not request.ack_receipt_handles:
            return await self.pop_processor.pop(request, peer)
        acked = await self.ack_processor.ack(
            AckMessageRequestHeader(
                consumer_group=request.consumer_group, topic=request.topic, receipt_handles=request.ack_receipt_handles
            )
        )
        popped = await self.pop_processor.pop(request, peer)
        return dataclasses.replace(popped, ack_codes=acked.codes, ack_remarks=acked.remarks)

    async def ack(self, request: AckMessageRequestHeader) -> AckMessageResponseHeader:
        """See mq_broker.consumer.pop.ack_processor (raises MQError for a refused request)."""
        return await self.ack_processor.ack(request)

    async def change_invisible_time(
        self, request: ChangeInvisibleTimeRequestHeader
    ) -> ChangeInvisibleTimeResponseHeader:
        """See mq_broker.consumer.pop.ack_processor (raises MQError for a refused request)."""
        return await self.change_processor.change_invisible_time(request)

    def inflight_count(self, group: str, topic: str, queue_id: int) -> int:
        """Messages of ``topic``/``queue_id`` popped by ``group`` and neither acked nor revived (consume stats'
        inflight_counter; PopInflightMessageCounter#getGroupPopInFlightMessageNum). Any thread."""
        return self.context.table.inflight_count(group, topic, queue_id)

    def inflight_by_group_topic(self) -> Mapping[tuple[str, str], int]:
        """(group, topic) -> messages popped and neither acked nor revived (for metrics). Any thread."""
        return self.context.table.inflight_by_group_topic()
