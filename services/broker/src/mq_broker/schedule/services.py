"""The delay-level and timer parts of one broker, built from its settings and started while it is a master.

Holds the put hook (mq_broker.schedule.schedule_hook, set on the send path and the consumer send-back path), the
ScheduleMessageService, the TimerMessageStore and the TimerProcessor (recall and queries). A master (static, or
controller mode on becoming master) runs :meth:`start`: both services recover from their checkpoints and the
CommitLog, then deliver; a slave runs nothing (:meth:`stop` on losing the master role). Event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mq_common.logging import get_logger

from mq_broker.schedule.delay_levels import DelayLevels
from mq_broker.schedule.schedule_hook import ScheduleHook
from mq_broker.schedule.schedule_message_service import ScheduleMessageService
from mq_broker.settings import BrokerSettings
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.timer.timer_message_store import TimerMessageStore
from mq_broker.timer.timer_processor import TimerProcessor
from mq_broker.topic_config import TopicConfigManager

if TYPE_CHECKING:
    from mq_broker.metrics import BrokerMetrics

log = get_logger("mq_broker.schedule")


class ScheduledDelivery:
    """Delay levels and timers of one broker."""

    def __init__(
        self,
        settings: BrokerSettings,
        store: DefaultMessageStore,
        topics: TopicConfigManager,
        config_dir: Path,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        """Raises ValueError for a malformed ``message_delay_level``."""
        levels = DelayLevels.parse(settings.message_delay_level)
        self.hook = ScheduleHook(
            levels,
            timer_wheel_enable=settings.timer_wheel_enable,
            timer_precision_ms=settings.timer_precision_ms,
            timer_max_delay_sec=settings.timer_max_delay_sec,
        )
        self.schedule = ScheduleMessageService(store, levels, config_dir, metrics)
        self.timers = TimerMessageStore(store, config_dir, metrics)
        self.processor = TimerProcessor(
            self.timers,
            self.schedule,
            topics,
            broker_name=settings.broker_name,
            broker_permission=settings.broker_permission,
            recall_message_enable=settings.recall_message_enable,
            timer_max_delay_sec=settings.timer_max_delay_sec,
        )
        if metrics is not None:
            metrics.bind_timer_backlog(self.timers.pending_by_topic)
            metrics.bind_schedule_behind(self.schedule.behind)

    def min_held_offset(self) -> int | None:
        """The lowest CommitLog offset a held message not delivered yet needs (None: none; a slave: none). The
        store's clean service keeps the files from there (any thread: reads two ints and the level heads)."""
        if not self.timers.running:
            return None
        offsets = [o for o in (self.timers.min_held_offset, self.schedule.min_held_offset()) if o is not None]
        return min(offsets, default=None)

    async def start(self) -> None:
        """Recover and deliver (a master). Raises ValueError when a checkpoint file and its .bak are unusable."""
        await self.schedule.start()
        await self.timers.start()

    async def stop(self) -> None:
        """Stop delivering and write the checkpoints (a slave, or shutdown). Errors are logged."""
        for service in (self.timers, self.schedule):
            try:
                await service.stop()
            except OSError as exc:
                log.error("scheduled_delivery_stop_failed", error=str(exc))
