"""Which queues of a topic this consumer owns, and where a newly owned queue starts. Mirrors
org.apache.rocketmq.client.impl.consumer.RebalanceImpl#rebalanceByTopic (clustering) with
AllocateMessageQueueAveragely, and RebalanceLitePullImpl#computePullFromWhereWithException.

Runs on the consumer's asyncio loop.
"""

from __future__ import annotations

import random

from mq_common.constants import MixAll
from mq_common.errors import MQClientError, MQError
from mq_common.logging import get_logger
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode

from mq_client.consumer.allocate import allocate_message_queue_averagely
from mq_client.consumer.config import ConsumeFromWhere, LitePullConsumerConfig
from mq_client.consumer.offset_store import OFFSET_NOT_FOUND, ReadOffsetType, RemoteBrokerOffsetStore
from mq_client.consumer.pull_consumer import PullConsumer
from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = ["RebalanceLitePull"]

_log = get_logger("mq_client.consumer.rebalance")


class RebalanceLitePull:
    """Allocation per topic and initial offsets for one consumer of one group (CLUSTERING model).

    ``queues`` looks routes up (PullConsumer's route cache, MQAdminImpl's queue calls); ``calls`` asks a broker of
    the topic for the group's client ids; ``offsets`` holds the group's committed offsets.
    """

    def __init__(
        self,
        config: LitePullConsumerConfig,
        queues: PullConsumer,
        calls: ConsumerBrokerCalls,
        offsets: RemoteBrokerOffsetStore,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._queues = queues
        self._calls = calls
        self._offsets = offsets
        self._rng = rng or random.Random()

    async def allocate(self, topic: str) -> list[MessageQueue] | None:
        """The queues of ``topic`` this consumer owns now (sorted), or None when the route or the group's client
        ids could not be read (the caller keeps its current queues, as RebalanceImpl does). Mirrors
        RebalanceImpl#rebalanceByTopic's CLUSTERING branch. Never raises MQError."""
        try:
            mq_all = await self._queues.fetch_subscribe_message_queues(topic)
            route = await self._queues.route(topic)
            addrs = [a for b in route.broker_datas if (a := b.select_broker_addr()) is not None]
            if not addrs:
                return None
            # MQClientInstance#findBrokerAddrByTopic: any broker of the topic knows the group's clients
            cid_all = await self._calls.get_consumer_list_by_group(self._rng.choice(addrs), self._config.consumer_group)
        except MQError as exc:
            _log.info("rebalance_skipped", topic=topic, group=self._config.consumer_group, error=str(exc))
            return None
        if not cid_all:
            return None
        return allocate_message_queue_averagely(
            self._config.consumer_group, self._config.client_id, sorted(mq_all), sorted(cid_all)
        )

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly owned ``mq`` starts: the group's committed offset (memory first, then the broker); for
        none, by ``consume_from_where``: LAST -> the queue's max offset (0 for the group's retry topic), FIRST ->
        0, TIMESTAMP -> the first offset stored at or after ``consume_timestamp_ms`` (the max offset for the
        retry topic). Mirrors RebalanceLitePullImpl#computePullFromWhereWithException.

        Raises MQClientError (SYSTEM_ERROR) when the broker could not be asked for the committed offset, and the
        errors of PullConsumer.max_offset / search_offset."""
        last = await self._offsets.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if last >= 0:
            return last
        if last != OFFSET_NOT_FOUND:
            raise MQClientError(f"Fetch consume offset from broker exception, {mq}", ResponseCode.SYSTEM_ERROR)
        is_retry = mq.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
        where = self._config.consume_from_where
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
            return 0 if is_retry else await self._queues.max_offset(mq)
        if is_retry:
            return await self._queues.max_offset(mq)
        return await self._queues.search_offset(mq, self._config.consume_timestamp_ms)
