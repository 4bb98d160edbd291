"""Messages a consumer gives back: to ``%RETRY%<group>`` for another delivery, or ``%DLQ%<group>`` past the limit.

Mirrors org.apache.rocketmq.broker.processor.AbstractSendMessageProcessor#consumerSendMsgBack (the message
rebuilt from the stored original) and SendMessageProcessor#handleRetryAndDLQ (reconsume times past the group's
retryMaxTimes, or a negative delay level, send it to the dead letter queue). Event loop.

A message a consumer gives back (``hold_delay``) waits its delay level on SCHEDULE_TOPIC_XXXX first
(mq_broker.schedule: 10 s, 30 s, 1 m, ... for the default levels and reconsume times 0, 1, 2, ...); POP's revive
stores on the retry topic at once (its invisible time was the wait).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from mq_common.codec import MessageExt, decode_properties, encode_properties, host_to_bytes
from mq_common.constants import MessageConst, MessageSysFlag, PermName, dlq_topic, retry_topic
from mq_common.errors import MQBrokerError
from mq_common.logging import get_logger
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode

from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.schedule.schedule_hook import ScheduleHook
from mq_broker.store.api import MessageStore
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from mq_broker.topic_config import TopicConfigManager

log = get_logger("mq_broker.consumer.retry_dlq")

DLQ_NUMS_PER_GROUP: Final = 1
"""MixAll / AbstractSendMessageProcessor.DLQ_NUMS_PER_GROUP: the dead letter topic has one queue."""
RETRY_DLQ_PERM: Final = PermName.PERM_READ | PermName.PERM_WRITE
"""Perm of the %RETRY% and %DLQ% topics created on first use (createTopicInSendMessageBackMethod's callers)."""
FIRST_RETRY_DELAY_LEVEL: Final = 3
"""Delay level 0 means 3 + reconsume times (10 s for the first retry with the default levels)."""


class RetryDlqService:
    """Stores a given-back message again for its group. ``on_send_to_dlq(group, original topic)`` (event loop) is
    told about every message stored in a dead letter queue (rocketmq_send_to_dlq_messages_total)."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager, groups: SubscriptionGroupManager) -> None:
        self.store = store
        self.topics = topics
        self.groups = groups
        self.on_send_to_dlq: Callable[[str, str], None] | None = None
        self.schedule_hook: ScheduleHook | None = None

    async def send_back(
        self,
        msg: MessageExt,
        *,
        group: str,
        delay_level: int,
        max_reconsume_times: int | None,
        client_host: str,
        hold_delay: bool = False,
    ) -> PutMessageResult:
        """Store ``msg`` (a stored message, as DefaultMessageStore#lookup_message_by_offset returns it) again for
        ``group``: on ``%RETRY%<group>`` (a random queue of the group's retry_queue_nums), or on ``%DLQ%<group>``
        (queue 0) when its reconsume times reached ``max_reconsume_times`` (None: the group's retryMaxTimes) or
        ``delay_level`` < 0. The topic is created on first use (RW, retry_queue_nums / 1 queue).

        The new record keeps body, flag, properties, tags and born host/timestamp of ``msg``; RECONSUMETIMES and
        the RECONSUME_TIME property are ``msg``'s + 1; RETRY_TOPIC is the original topic (kept when ``msg`` is
        itself a retry); ORIGIN_MESSAGE_ID is the first message's id (UNIQ_KEY, else the offset msg id) when not
        set yet; DELAY is ``delay_level`` (0: 3 + reconsume times, at most the last level; 0 on the DLQ); WAIT is
        true. A compressed original is stored inflated (flag cleared). With ``hold_delay`` (and a schedule hook)
        the record waits its delay on SCHEDULE_TOPIC_XXXX, then goes to the retry topic.

        Returns the store's PutMessageResult (its status says whether it was stored); a group with
        retry_queue_nums <= 0 stores nothing and gets PUT_OK (RocketMQ answers SUCCESS). Raises MQBrokerError:
        SUBSCRIPTION_GROUP_NOT_EXIST (26) for an unknown group, NO_PERMISSION (16) when the retry topic is not
        writeable. ``client_host`` only appears in the log.
        """
        config = self.groups.find_subscription_group_config(group)
        if config is None:
            raise MQBrokerError(f"subscription group not exist, {group}", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
        if config.retry_queue_nums <= 0:
            return PutMessageResult(PutMessageStatus.PUT_OK)
        retry = self.topics.create_topic_in_send_message_back_method(
            retry_topic(group), config.retry_queue_nums, RETRY_DLQ_PERM
        )
        if not PermName.is_writeable(retry.perm):
            raise MQBrokerError(
                f"the topic[{retry.topic_name}] sending message is forbidden", ResponseCode.NO_PERMISSION
            )
        max_times = config.retry_max_times if max_reconsume_times is None else max_reconsume_times
        to_dlq = msg.reconsume_times >= max_times or delay_level < 0
        if to_dlq:
            target = self.topics.create_topic_in_send_message_back_method(
                dlq_topic(group), DLQ_NUMS_PER_GROUP, RETRY_DLQ_PERM
            )
            queue_id, delay = 0, 0
        else:
            target = retry
            queue_id = _random_queue_id(config.retry_queue_nums, retry)
            delay = delay_level if delay_level > 0 else FIRST_RETRY_DELAY_LEVEL + msg.reconsume_times
            if self.schedule_hook is not None:
                delay = min(delay, self.schedule_hook.levels.max_level)  # RocketMQ clamps a retry's level
        inner = retry_message(msg, target.topic_name, queue_id, delay)
        if hold_delay and not to_dlq and self.schedule_hook is not None:
            inner = self._held(inner, self.schedule_hook)
        result = (await self.store.put_messages([inner]))[0]
        if to_dlq:
            self._sent_to_dlq(msg, group, inner, result, client_host)
        return result

    @staticmethod
    def _held(inner: MessageExtBrokerInner, hook: ScheduleHook) -> MessageExtBrokerInner:
        """``inner`` moved to SCHEDULE_TOPIC_XXXX for its DELAY level (unchanged for level 0)."""
        properties = decode_properties(inner.properties_string)
        placement = hook.place(inner.topic, inner.queue_id, properties, inner.sys_flag, internal=True)
        if placement is None:
            return inner
        return replace(
            inner,
            topic=placement.topic,
            queue_id=placement.queue_id,
            properties_string=encode_properties(placement.properties),
        )

    def _sent_to_dlq(
        self, msg: MessageExt, group: str, inner: MessageExtBrokerInner, result: PutMessageResult, client_host: str
    ) -> None:
        origin_topic = msg.properties.get(MessageConst.RETRY_TOPIC, msg.topic)
        log.info(
            "send_msg_to_dlq",
            dlq_topic=inner.topic,
            origin_topic=origin_topic,
            group=group,
            uniq_key=msg.uniq_key,
            client_host=client_host,
            status=result.status.value,
        )
        if result.is_ok and self.on_send_to_dlq is not None:
            self.on_send_to_dlq(group, origin_topic)


def retry_message(msg: MessageExt, topic: str, queue_id: int, delay_level: int) -> MessageExtBrokerInner:
    """The record that gives ``msg`` back on ``topic``/``queue_id`` (see RetryDlqService.send_back for the
    fields). Mirrors the MessageExtBrokerInner built in consumerSendMsgBack."""
    properties = dict(msg.properties)
    properties.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
    if not properties.get(MessageConst.ORIGIN_MESSAGE_ID):
        properties[MessageConst.ORIGIN_MESSAGE_ID] = msg.uniq_key or msg.offset_msg_id
    properties[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
    properties[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
    properties[MessageConst.WAIT_STORE_MSG_OK] = "true"
    return MessageExtBrokerInner.build(
        topic=topic,
        queue_id=queue_id,
        body=msg.body,
        properties=properties,
        flag=msg.flag,
        sys_flag=msg.sys_flag & ~MessageSysFlag.COMPRESSED_FLAG,
        born_timestamp_ms=msg.born_timestamp_ms,
        born_host=host_to_bytes(*msg.born_host),
        reconsume_times=msg.reconsume_times + 1,
    )


def _random_queue_id(retry_queue_nums: int, retry: TopicConfig) -> int:
    """A random queue among the group's retry queues that the retry topic has (it may have been created with
    fewer)."""
    return random.randrange(max(1, min(retry_queue_nums, retry.write_queue_nums)))
