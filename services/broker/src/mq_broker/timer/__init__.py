"""Timer messages (RocketMQ 5.x): TimerMessageStore over rmq_sys_wheel_timer, with recall."""
