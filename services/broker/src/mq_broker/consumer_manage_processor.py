"""Consumer-side requests of the broker: subscription groups, consumer offsets, consume stats, offsets by store
time, topic deletion, consumer heartbeats and connections.

Mirrors org.apache.rocketmq.broker.processor.ConsumerManageProcessor (#updateConsumerOffset,
#queryConsumerOffset, #getConsumerListByGroup), the consumer parts of AdminBrokerProcessor
(#updateAndCreateSubscriptionGroup, #deleteSubscriptionGroup, #getAllSubscriptionGroup, #getConsumeStats,
#searchOffsetByTimestamp, #deleteTopic, #getConsumerConnectionList, #lockBatchMQ, #unlockBatchMQ over
mq_broker.consumer.rebalance_lock_manager), Broker2Client#resetOffset (the offsets are
committed here: RocketMQ 5's server-side reset) and ClientManageProcessor (#heartBeat, #unregisterClient).

Runs on the event loop. Refusals raise mq_common.errors types carrying RocketMQ's code and remark:
INVALID_PARAMETER (29) for a bad name, queue id or offset, TOPIC_NOT_EXIST (17), SUBSCRIPTION_GROUP_NOT_EXIST
(26), QUERY_NOT_FOUND (22), CONSUMER_NOT_ONLINE (206), SYSTEM_BUSY (2) from the consumer table's bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from mq_common.constants import PermName, retry_topic, validate_group, validate_topic
from mq_common.errors import InvalidParameterError, MQError, TopicNotExistError
from mq_common.logging import get_logger
from mq_common.protocol import (
    ConsumerConnectionInfo,
    ConsumerQueueOffset,
    ConsumeStats,
    DataVersion,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    HeartbeatData,
    MessageQueue,
    QueryConsumerOffsetRequestHeader,
    QueueConsumeStats,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SubscriptionGroupConfig,
    TopicConfig,
    UnregisterClientRequestHeader,
)
from mq_common.response_code import ResponseCode

from mq_broker.consumer.consumer_manager import ConsumerManager
from mq_broker.consumer.offset_manager import ConsumerOffsetManager
from mq_broker.consumer.rebalance_lock_manager import RebalanceLockManager
from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.store.api import MessageStore
from mq_broker.topic_config import TopicConfigManager

log = get_logger("mq_broker.consumer_manage_processor")

InflightCounter = Callable[[str, str, int], int]
"""(group, topic, queue id) -> messages popped and not yet acknowledged (the POP side's count)."""
ConsumeTpsMeter = Callable[[str, str], float]
"""(group, topic) -> messages the group got from the topic per second over the last minute."""

MAX_LOCK_BATCH_QUEUES: Final = 1_024
"""Queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name (ours: RocketMQ has no bound)."""
RESET_TO_MAX_OFFSET_TIMESTAMP: Final = -1
"""ResetOffsetRequestHeader.timestamp -1: reset to the max offset (Broker2Client#resetOffset)."""


def _require_group(group: str) -> None:
    remark = validate_group(group)
    if remark is not None:
        raise InvalidParameterError(remark)


def _require_topic_name(topic: str) -> None:
    remark = validate_topic(topic)
    if remark is not None:
        raise InvalidParameterError(remark)


class ConsumerManageProcessor:
    """Consumer state requests over the managers of mq_broker.consumer, the topic table and the store."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        broker_name: str,
        *,
        inflight_counter: InflightCounter | None = None,
        consume_tps: ConsumeTpsMeter | None = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.broker_name = broker_name
        self.inflight_counter = inflight_counter
        self.consume_tps = consume_tps
        self.rebalance_locks = RebalanceLockManager()

    # --- lookups that refuse ------------------------------------------------------------------------------------

    def _group_config(self, group: str) -> SubscriptionGroupConfig:
        """The group's config (auto-created when the broker allows). Raises InvalidParameterError (29) for a bad
        name, MQError SUBSCRIPTION_GROUP_NOT_EXIST (26)."""
        _require_group(group)
        config = self.groups.find_subscription_group_config(group)
        if config is None:
            raise MQError(f"subscription group [{group}] does not exist", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
        return config

    def _topic_config(self, topic: str) -> TopicConfig:
        """Raises InvalidParameterError (29) for a bad name, TopicNotExistError (17)."""
        _require_topic_name(topic)
        config = self.topics.select_topic_config(topic)
        if config is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        return config

    def _queue(self, topic: str, queue_id: int) -> TopicConfig:
        """The topic's config when ``queue_id`` is one of its queues. Raises as :meth:`_topic_config`, and
        InvalidParameterError (29) for a queue id out of range."""
        config = self._topic_config(topic)
        queue_nums = max(config.read_queue_nums, config.write_queue_nums)
        if not 0 <= queue_id < queue_nums:
            raise InvalidParameterError(f"queueId[{queue_id}] is illegal, topic:[{topic}] has {queue_nums} queues")
        return config

    # --- subscription groups ------------------------------------------------------------------------------------

    def update_subscription_group(self, config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP. Raises InvalidParameterError (29)."""
        self.groups.update_subscription_group_config(config)

    def delete_subscription_group(self, request: DeleteSubscriptionGroupRequestHeader) -> None:
        """DELETE_SUBSCRIPTIONGROUP: the group goes (and, with clean_offset, its offsets); deleting an unknown
        group succeeds, as RocketMQ. Raises InvalidParameterError (29) for a bad name."""
        _require_group(request.group_name)
        self.groups.delete_subscription_group_config(request.group_name)
        if request.clean_offset:
            self.offsets.remove_group(request.group_name)

    def get_all_subscription_groups(self) -> tuple[list[SubscriptionGroupConfig], DataVersion]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group (by name) and the table's data version."""
        return self.groups.configs(), self.groups.data_version

    # --- offsets ------------------------------------------------------------------------------------------------

    def update_consumer_offset(self, offset: ConsumerQueueOffset, client_host: str) -> None:
        """UPDATE_CONSUMER_OFFSET of one queue. Raises SUBSCRIPTION_GROUP_NOT_EXIST (26), TOPIC_NOT_EXIST (17),
        INVALID_PARAMETER (29) for a bad queue id, a negative offset or one past the queue's max offset."""
        self._group_config(offset.consumer_group)
        self._queue(offset.topic, offset.queue_id)
        max_offset = self.store.get_max_offset_in_queue(offset.topic, offset.queue_id)
        if not 0 <= offset.offset <= max_offset:
            raise InvalidParameterError(
                f"offset {offset.offset} of {offset.topic}-{offset.queue_id} is out of range [0, {max_offset}]"
            )
        self.offsets.commit_offset(client_host, offset.consumer_group, offset.topic, offset.queue_id, offset.offset)

    def update_consumer_offsets(
        self, offsets: Sequence[ConsumerQueueOffset], client_host: str
    ) -> list[tuple[int, str]]:
        """Many UPDATE_CONSUMER_OFFSETs: (code, remark) per offset, in order; one refusal does not stop the
        others."""
        answers: list[tuple[int, str]] = []
        for offset in offsets:
            try:
                self.update_consumer_offset(offset, client_host)
            except MQError as exc:
                answers.append((exc.code, exc.remark))
            else:
                answers.append((ResponseCode.SUCCESS, ""))
        return answers

    def query_consumer_offset(self, request: QueryConsumerOffsetRequestHeader) -> int:
        """QUERY_CONSUMER_OFFSET: the committed offset; without one and with set_zero_if_not_found, 0 when the
        queue still starts at 0 and that message is in the page cache (a new group then reads from the start
        without a disk read). Raises INVALID_PARAMETER (29) for bad names, MQError QUERY_NOT_FOUND (22)."""
        _require_group(request.consumer_group)
        _require_topic_name(request.topic)
        group, topic, queue_id = request.consumer_group, request.topic, request.queue_id
        offset = self.offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        if not request.set_zero_if_not_found:
            raise MQError("Not found, do not set to zero, maybe this group boot first", ResponseCode.QUERY_NOT_FOUND)
        if self.store.get_min_offset_in_queue(topic, queue_id) <= 0 and self.store.check_in_mem_by_consume_offset(
            topic, queue_id, 0
        ):
            return 0
        raise MQError("Not found, maybe this group consumer boot first", ResponseCode.QUERY_NOT_FOUND)

    def get_consume_stats(self, request: GetConsumeStatsRequestHeader) -> ConsumeStats:
        """GET_CONSUME_STATS: per read queue of ``request.topic`` (or of every topic the group has offsets for,
        and ``%RETRY%<group>``) the max offset, the committed offset (0 when none), the store time of the last
        consumed message, the in-flight POP count and the holder of the queue's orderly lock. While the group is
        online with subscriptions, topics it does not subscribe to are left out (its retry topic stays). Raises
        INVALID_PARAMETER (29)."""
        group = request.consumer_group
        _require_group(group)
        if request.topic:
            _require_topic_name(request.topic)
            names = {request.topic}
        else:
            names = self.offsets.which_topics_by_consumer(group) | {retry_topic(group)}
        info = self.consumers.connection_info(group)
        if info is not None and info.subscriptions:
            subscribed = {d.topic for d in info.subscriptions} | {retry_topic(group)}
            names &= subscribed
        queues: list[QueueConsumeStats] = []
        tps = 0.0
        for topic in sorted(names):
            config = self.topics.select_topic_config(topic)
            if config is None:
                continue
            queues.extend(self._queue_stats(group, topic, q) for q in range(config.read_queue_nums))
            tps += self.consume_tps(group, topic) if self.consume_tps is not None else 0.0
        return ConsumeStats(tuple(queues), tps)

    def _queue_stats(self, group: str, topic: str, queue_id: int) -> QueueConsumeStats:
        broker_offset = max(0, self.store.get_max_offset_in_queue(topic, queue_id))
        consumer_offset = max(0, self.offsets.query_offset(group, topic, queue_id))
        last_ms = (
            self.store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
        )
        inflight = self.inflight_counter(group, topic, queue_id) if self.inflight_counter is not None else 0
        locked_by = self.rebalance_locks.holder(group, MessageQueue(topic, self.broker_name, queue_id))
        return QueueConsumeStats(
            topic, self.broker_name, queue_id, broker_offset, consumer_offset, last_ms, inflight, locked_by
        )

    def search_offset_by_timestamp(self, request: SearchOffsetRequestHeader) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after the time (the max offset when
        every message is older). Raises TOPIC_NOT_EXIST (17), INVALID_PARAMETER (29)."""
        self._queue(request.topic, request.queue_id)
        return self.store.get_offset_in_queue_by_time(request.topic, request.queue_id, request.timestamp_ms)

    def reset_offset_by_timestamp(
        self, request: ResetOffsetRequestHeader, client_host: str
    ) -> list[ConsumerQueueOffset]:
        """INVOKE_BROKER_TO_RESET_OFFSET: per write queue, the offset of ``timestamp_ms`` (-1: the max offset);
        without ``force`` an offset only moves back; a queue without an offset takes it as is. Commits and
        returns the offsets set. Raises SUBSCRIPTION_GROUP_NOT_EXIST (26), TOPIC_NOT_EXIST (17),
        INVALID_PARAMETER (29) for a timestamp below -1."""
        group, topic = request.consumer_group, request.topic
        self._group_config(group)
        config = self._topic_config(topic)
        if request.timestamp_ms < RESET_TO_MAX_OFFSET_TIMESTAMP:
            raise InvalidParameterError(f"timestamp {request.timestamp_ms} is illegal")
        reset: list[ConsumerQueueOffset] = []
        for queue_id in range(config.write_queue_nums):
            if request.timestamp_ms == RESET_TO_MAX_OFFSET_TIMESTAMP:
                target = self.store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = self.store.get_offset_in_queue_by_time(topic, queue_id, request.timestamp_ms)
            current = self.offsets.query_offset(group, topic, queue_id)
            offset = target if request.force or current < 0 or target < current else current
            self.offsets.commit_offset(client_host, group, topic, queue_id, offset)
            reset.append(ConsumerQueueOffset(group, topic, queue_id, offset))
        log.info("consumer_offset_reset", group=group, topic=topic, timestamp_ms=request.timestamp_ms)
        return reset

    # --- topics -------------------------------------------------------------------------------------------------

    async def delete_topic(self, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER: the topic's config (the next registration leaves it out), its consumer
        offsets and its consume queues go; an unknown topic succeeds, as RocketMQ. Raises INVALID_PARAMETER (29)
        for a bad name or a system topic."""
        if not topic or topic.isspace():
            raise InvalidParameterError("The specified topic is blank.")
        _require_topic_name(topic)
        if self.topics.is_system_topic(topic):
            raise InvalidParameterError(f"The topic[{topic}] is conflict with system topic.")
        self.topics.delete_topic_config(topic)
        self.offsets.remove_topic(topic)
        await self.store.delete_topics({topic})

    # --- consumer instances -------------------------------------------------------------------------------------

    def heartbeat(self, heartbeat: HeartbeatData, client_addr: str) -> bool:
        """HEART_BEAT of a consumer: registers the instance (True when it is new to its group) and, when the
        group exists or is auto-created, makes sure its retry topic ``%RETRY%<group>`` exists with
        retryQueueNums queues. Raises INVALID_PARAMETER (29) for a bad group, client id or topic, SYSTEM_BUSY
        (2) when the group is full. Mirrors ClientManageProcessor#heartBeat."""
        _require_group(heartbeat.consumer_group)
        if not heartbeat.client_id or heartbeat.client_id.isspace():
            raise InvalidParameterError("the heartbeat carries no client id")
        for data in heartbeat.subscriptions:
            _require_topic_name(data.topic)
        config = self.groups.find_subscription_group_config(heartbeat.consumer_group)
        if config is not None and config.retry_queue_nums > 0:
            self._ensure_retry_topic(retry_topic(config.group_name), config.retry_queue_nums)
        return self.consumers.register_consumer(heartbeat, client_addr)

    def _ensure_retry_topic(self, topic: str, queue_nums: int) -> None:
        """TopicConfigManager#createTopicInSendMessageBackMethod: read + write, created once."""
        if self.topics.select_topic_config(topic) is None:
            rw = PermName.PERM_READ | PermName.PERM_WRITE
            self.topics.update_topic_config(TopicConfig(topic, queue_nums, queue_nums, rw))

    def unregister_client(self, request: UnregisterClientRequestHeader) -> None:
        """UNREGISTER_CLIENT: the instance leaves its group (unknown ones are ignored). Raises
        INVALID_PARAMETER (29) for a bad group name."""
        _require_group(request.consumer_group)
        self.consumers.unregister_consumer(request.consumer_group, request.client_id)

    def consumer_list_by_group(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: client ids of the group's live instances, sorted (empty when none).
        Raises INVALID_PARAMETER (29)."""
        _require_group(group)
        return self.consumers.client_ids(group)

    def lock_batch_mq(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: take or renew ``client_id``'s locks of ``queues`` (RebalanceLockManager#tryLockBatch);
        the queues it holds afterwards. Raises INVALID_PARAMETER (29) for a bad group name, an empty client id, a
        bad topic name or queue id, or more than MAX_LOCK_BATCH_QUEUES queues. Mirrors
        AdminBrokerProcessor#lockBatchMQ (this broker only: lockBatchMQ's onlyThisBroker)."""
        self._check_lock_request(group, client_id, queues)
        return self.rebalance_locks.try_lock_batch(group, queues, client_id)

    def unlock_batch_mq(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ: free ``client_id``'s locks of ``queues`` (RebalanceLockManager#unlockBatch). Raises
        as :meth:`lock_batch_mq`. Mirrors AdminBrokerProcessor#unlockBatchMQ."""
        self._check_lock_request(group, client_id, queues)
        self.rebalance_locks.unlock_batch(group, queues, client_id)

    @staticmethod
    def _check_lock_request(group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        _require_group(group)
        if not client_id or client_id.isspace():
            raise InvalidParameterError("the lock request carries no client id")
        if len(queues) > MAX_LOCK_BATCH_QUEUES:
            raise InvalidParameterError(f"{len(queues)} queues in one lock request, at most {MAX_LOCK_BATCH_QUEUES}")
        for queue in queues:
            _require_topic_name(queue.topic)
            if queue.queue_id < 0:
                raise InvalidParameterError(f"queueId[{queue.queue_id}] of topic {queue.topic} is negative")

    def consumer_connection_list(self, group: str) -> ConsumerConnectionInfo:
        """GET_CONSUMER_CONNECTION_LIST. Raises INVALID_PARAMETER (29), MQError CONSUMER_NOT_ONLINE (206)."""
        _require_group(group)
        info = self.consumers.connection_info(group)
        if info is None:
            raise MQError(f"the consumer group[{group}] not online", ResponseCode.CONSUMER_NOT_ONLINE)
        return info
