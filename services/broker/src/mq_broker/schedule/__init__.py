"""Delay levels (RocketMQ 4.x): ScheduleMessageService over SCHEDULE_TOPIC_XXXX, and the put hook that holds delay-level
and timer messages (HookUtils#handleScheduleMessage)."""
