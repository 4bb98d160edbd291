"""The timer phase of the observability load (issue 32): timer and delay-level messages the brokers' timer figures
and the broker dashboard's "Timers and delay levels" row must then show.

On a DELAY topic created on every master: per broker group, one timer due in a second (fires: enqueue, dequeue,
lateness), one due in an hour (stays pending: rocketmq_timing_messages) and one delay-level-1 message (re-put after
1 s: mq_broker_schedule_dequeue_total, lateness with timer_type="delay_level"). Sent with DefaultMQProducer straight
to the brokers (a producer picks queues round-robin over every group, so enough messages reach each).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_common.protocol import TopicConfig
from mq_local.cluster import LocalCluster
from mq_local.testing import unique_topic
from mq_local.topics import create_topic_on_cluster

TIMER_PRODUCER_GROUP: Final = "obs_timer_producer"
SOON_MS: Final = 1_000
FAR_MS: Final = 3_600_000
# Per kind, this many messages: with round-robin queue selection over 2 groups x 2 queues, each group gets some.
PER_KIND: Final = 8


@dataclass(frozen=True, slots=True)
class TimersSent:
    """The DELAY topic and how many timers (due soon, due in an hour) and delay-level messages were sent."""

    topic: str
    soon: int
    far: int
    delay_level: int


async def send_timers(cluster: LocalCluster) -> TimersSent:
    """Create a DELAY topic (2 queues per master) and send the phase's messages; returns what was sent."""
    topic = unique_topic("obs_timers")
    config = TopicConfig(topic, read_queue_nums=2, write_queue_nums=2, attributes={"+message.type": "DELAY"})
    await create_topic_on_cluster(cluster.namesrv_addr, config, cluster.spec.cluster_name)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group=TIMER_PRODUCER_GROUP), [cluster.namesrv_addr])
    await producer.start()
    try:
        now_ms = time.time_ns() // 1_000_000
        for i in range(PER_KIND):
            await producer.send(Message(topic, b"soon %d" % i, deliver_time_ms=now_ms + SOON_MS))
            await producer.send(Message(topic, b"far %d" % i, deliver_time_ms=now_ms + FAR_MS))
            await producer.send(Message(topic, b"level %d" % i, delay_time_level=1))
    finally:
        await producer.shutdown()
    return TimersSent(topic, PER_KIND, PER_KIND, PER_KIND)
