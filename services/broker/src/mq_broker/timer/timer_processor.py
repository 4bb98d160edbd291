"""RECALL_MESSAGE and the timer queries behind mqadmin (QueryTimers).

Mirrors org.apache.rocketmq.broker.processor.RecallMessageProcessor: the same checks in the same order and
RocketMQ's codes (NO_PERMISSION 16 when recall is off, SLAVE_NOT_AVAILABLE 11 on a slave, SERVICE_NOT_AVAILABLE 14
when the broker is not writeable, TOPIC_NOT_EXIST 17, ILLEGAL_OPERATION 604 for the handle), then, beyond RocketMQ
(which stores a delete marker blindly), ILLEGAL_OPERATION with a remark naming why for an unknown, already delivered
or already recalled message. Event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from mq_common.codec import MessageDecodeError, decode_message
from mq_common.constants import SCHEDULE_TOPIC, MessageConst, PermName
from mq_common.errors import MQBrokerError
from mq_common.recall_handle import decode_recall_handle
from mq_common.response_code import ResponseCode

from mq_broker.schedule.delay_levels import DelayLevels
from mq_broker.schedule.delivery import now_ms
from mq_broker.schedule.schedule_message_service import ScheduleMessageService
from mq_broker.store.config import BrokerRole
from mq_broker.timer.timer_message_store import TimerMessageStore, delete_key
from mq_broker.topic_config import TopicConfigManager

PENDING: Final = "PENDING"
DELIVERED: Final = "DELIVERED"
RECALLED: Final = "RECALLED"
UNKNOWN: Final = "UNKNOWN"
_UNAVAILABLE: Final = "recall failed, broker service not available"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class TimerQueryResult:
    """QueryTimersResponse's fields (see proto/mq/broker/v1/broker.proto)."""

    pending_timers: int = 0
    earliest_deliver_ms: int = 0
    latest_deliver_ms: int = 0
    pending_delay_level_messages: int = 0
    state: str = ""
    message_deliver_ms: int = 0


class TimerProcessor:
    """Recall and queries over one broker's timer store and schedule service."""

    def __init__(
        self,
        timers: TimerMessageStore,
        schedule: ScheduleMessageService,
        topics: TopicConfigManager,
        *,
        broker_name: str,
        broker_permission: int,
        recall_message_enable: bool,
        timer_max_delay_sec: int,
    ) -> None:
        self.timers = timers
        self.schedule = schedule
        self.topics = topics
        self.broker_name = broker_name
        self.broker_permission = broker_permission
        self.recall_message_enable = recall_message_enable
        self.timer_max_delay_ms = timer_max_delay_sec * 1000

    async def recall(self, topic: str, recall_handle: str, producer_group: str) -> str:
        """Cancel the pending timer the handle names; returns its UNIQ_KEY. Raises MQBrokerError (see module)."""
        if not self.recall_message_enable:
            raise MQBrokerError("recall failed, operation is forbidden", ResponseCode.NO_PERMISSION)
        if self.timers.store.broker_role is BrokerRole.SLAVE:
            raise MQBrokerError(_UNAVAILABLE, ResponseCode.SLAVE_NOT_AVAILABLE)
        if not PermName.is_writeable(self.broker_permission) or not self.timers.running:
            raise MQBrokerError(_UNAVAILABLE, ResponseCode.SERVICE_NOT_AVAILABLE)
        if self.topics.select_topic_config(topic) is None:
            raise MQBrokerError(f"recall failed, the topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        try:
            handle = decode_recall_handle(recall_handle)
        except ValueError as exc:
            raise MQBrokerError(str(exc), ResponseCode.ILLEGAL_OPERATION) from None
        illegal = ResponseCode.ILLEGAL_OPERATION
        if handle.topic != topic:
            raise MQBrokerError("recall failed, topic not match", illegal)
        if handle.broker_name != self.broker_name:
            raise MQBrokerError(
                f"recall failed, the handle is for broker {handle.broker_name}, this is {self.broker_name}", illegal
            )
        left_ms = handle.deliver_ms - now_ms()
        if left_ms <= 0:
            raise MQBrokerError(
                f"recall failed, message {handle.uniq_key} was due at {_utc(handle.deliver_ms)} and is delivered",
                illegal,
            )
        if left_ms >= self.timer_max_delay_ms:
            raise MQBrokerError("recall failed, timestamp invalid", illegal)
        held, markers = self.timers.find_held(topic, handle.uniq_key)
        target = next((m for m in held if m.properties.get(MessageConst.TIMER_OUT_MS) == str(handle.deliver_ms)), None)
        if target is None:
            raise MQBrokerError(
                f"recall failed, no timer message {handle.uniq_key} of topic {topic} due at {_utc(handle.deliver_ms)}",
                illegal,
            )
        if markers or delete_key(topic, handle.uniq_key) in self.timers.recalled:
            raise MQBrokerError(f"recall failed, message {handle.uniq_key} is already recalled", illegal)
        if not self.timers.is_pending(target):
            raise MQBrokerError(f"recall failed, message {handle.uniq_key} is already delivered", illegal)
        self.timers.note_recalled(topic, handle.uniq_key, handle.deliver_ms)  # before the await: firing skips it
        marker = self.timers.marker_for(topic, handle.uniq_key, handle.deliver_ms, producer_group)
        result = (await self.timers.store.put_messages([marker]))[0]
        if not result.status.is_stored:
            self.timers.recalled.pop(delete_key(topic, handle.uniq_key), None)
            raise MQBrokerError("recall failed, execute error", ResponseCode.SYSTEM_ERROR)
        return handle.uniq_key

    async def query(self, topic: str, uniq_key: str = "") -> TimerQueryResult:
        """Pending timers of ``topic`` (count, earliest, latest), delay-level messages waiting on this broker (all
        topics), and, given ``uniq_key``, that message's state and due time. The pending timers are scanned in
        slices, yielding to the event loop between them."""
        if self.timers.store.broker_role is BrokerRole.SLAVE or not self.timers.running:
            raise MQBrokerError("the timer store runs on the master only", ResponseCode.SERVICE_NOT_AVAILABLE)
        self.timers.catch_up()
        found: tuple[int, int, int] | None = None
        for found in self.timers.wheel.topic_range_steps(topic):  # a million pending: ~0.3 s, in slices
            if found is None:
                await asyncio.sleep(0)
        assert found is not None
        count, earliest, latest = found
        count = min(count, self.timers.pending_by_topic().get(topic, 0))
        behind = sum(self.schedule.behind().values())
        state, due = (self._timer_state(topic, uniq_key) or self._delay_state(topic, uniq_key)) if uniq_key else ("", 0)
        return TimerQueryResult(count, earliest, latest, behind, state, due)

    def _timer_state(self, topic: str, uniq_key: str) -> tuple[str, int] | None:
        held, markers = self.timers.find_held(topic, uniq_key)
        if not held:
            return None
        target = held[0]
        due = int(target.properties.get(MessageConst.TIMER_OUT_MS, "0") or 0)
        if markers or delete_key(topic, uniq_key) in self.timers.recalled:
            return RECALLED, due
        return (PENDING if self.timers.is_pending(target) else DELIVERED), due

    def _delay_state(self, topic: str, uniq_key: str) -> tuple[str, int]:
        for raw in self.timers.store.query_message_by_unique_key(SCHEDULE_TOPIC, uniq_key).messages:
            try:
                msg = decode_message(raw, check_crc=False, decompress=False)
            except MessageDecodeError:
                continue
            if msg.properties.get(MessageConst.REAL_TOPIC) != topic:
                continue
            level = DelayLevels.level_of_queue(msg.queue_id)
            due = msg.store_timestamp_ms + self.schedule.levels.delay_ms(level)
            pending = msg.queue_offset >= self.schedule.offsets.get(level, 0)
            return (PENDING if pending else DELIVERED), due
        return UNKNOWN, 0
