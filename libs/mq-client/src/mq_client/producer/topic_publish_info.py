"""A topic's writable queues and the round-robin index over them.

Mirrors org.apache.rocketmq.client.impl.producer.TopicPublishInfo, org.apache.rocketmq.client.common.
ThreadLocalIndex and MQClientInstance#topicRouteData2TopicPublishInfo / #topicRouteDataIsChange (4.9.x).
Used on the producer's one asyncio loop (no locking; the index is a plain counter, not thread-local).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Final

from mq_common.constants import MixAll, PermName
from mq_common.protocol import BrokerData, MessageQueue, QueueData, TopicRouteData

POSITIVE_MASK: Final = 0x7FFFFFFF


class SendWhichQueue:
    """A round-robin counter. Mirrors ThreadLocalIndex: starts at a random non-negative int (or ``start``),
    :meth:`increment_and_get` adds one and returns the value masked to 31 bits (never negative).
    """

    __slots__ = ("_value",)

    def __init__(self, start: int | None = None, rng: random.Random | None = None) -> None:
        if start is None:
            start = (rng or random.Random()).randrange(0, POSITIVE_MASK + 1)
        self._value = start & POSITIVE_MASK

    def increment_and_get(self) -> int:
        """The next index (start + 1 on the first call)."""
        self._value = (self._value + 1) & POSITIVE_MASK
        return self._value

    @property
    def value(self) -> int:
        """The last index handed out (the start value before the first call)."""
        return self._value


@dataclass(slots=True)
class TopicPublishInfo:
    """Where a topic can be written: ``message_queues`` in route order (broker name, then queue id).

    ``route`` is the TopicRouteData it was built from (None for an empty placeholder);
    ``have_topic_router_info`` is true once a name server answered for the topic (or for TBW102 on its
    behalf, ``from_default_topic``). ``send_which_queue`` is shared by every selection for the topic.
    """

    topic: str
    message_queues: tuple[MessageQueue, ...] = ()
    route: TopicRouteData | None = None
    order_topic: bool = False
    have_topic_router_info: bool = False
    from_default_topic: bool = False
    send_which_queue: SendWhichQueue = field(default_factory=SendWhichQueue)

    def ok(self) -> bool:
        """True when there is at least one writable queue (TopicPublishInfo#ok)."""
        return len(self.message_queues) > 0

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; with ``last_broker_name``, the next queue on another broker if one exists.

        Mirrors TopicPublishInfo#selectOneMessageQueue(String) / (): each probe takes a new index; after
        ``len(queues)`` probes that all hit ``last_broker_name`` it falls back to plain round robin.
        Requires :meth:`ok` (asserted).
        """
        queues = self.message_queues
        assert queues, "select_one_message_queue needs at least one queue"
        if last_broker_name is not None:
            for _ in range(len(queues)):
                mq = queues[self.send_which_queue.increment_and_get() % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.send_which_queue.increment_and_get() % len(queues)]

    def write_queue_nums_by_broker(self, broker_name: str) -> int:
        """Write queue count of the first writable QueueData of ``broker_name``, or -1.

        Mirrors TopicPublishInfo#getQueueIdByBroker (4.x; renamed getWriteQueueNumsByBroker in 5.x).
        """
        if self.route is None:
            return -1
        for qd in self.route.queue_datas:
            if PermName.is_writeable(qd.perm) and qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def topic_route_data_to_publish_info(
    topic: str,
    route: TopicRouteData,
    send_which_queue: SendWhichQueue | None = None,
    *,
    from_default_topic: bool = False,
) -> TopicPublishInfo:
    """Build the publish info of ``topic``. Mirrors MQClientInstance#topicRouteData2TopicPublishInfo.

    With ``order_topic_conf`` ("brokerA:4;brokerB:4") the queues follow it in that order. Otherwise, for each
    QueueData sorted by broker name that is writable and whose broker group has a master (id 0),
    ``write_queue_nums`` queues (ids 0..n-1) are added.
    """
    info = TopicPublishInfo(
        topic=topic,
        route=route,
        have_topic_router_info=True,
        from_default_topic=from_default_topic,
        send_which_queue=send_which_queue if send_which_queue is not None else SendWhichQueue(),
    )
    queues: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            broker_name, _, nums = item.partition(":")
            if broker_name and nums.strip().isdigit():
                queues.extend(MessageQueue(topic, broker_name, i) for i in range(int(nums)))
        info.order_topic = True
    else:
        brokers = {bd.broker_name: bd for bd in route.broker_datas}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not PermName.is_writeable(qd.perm):
                continue
            bd = brokers.get(qd.broker_name)
            if bd is None or MixAll.MASTER_ID not in bd.broker_addrs:
                continue
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    info.message_queues = tuple(queues)
    return info


def default_topic_route(route: TopicRouteData, default_topic_queue_nums: int) -> TopicRouteData:
    """The TBW102 route adapted for a new topic: each QueueData gets
    ``min(default_topic_queue_nums, read_queue_nums)`` read and write queues.

    Mirrors MQClientInstance#updateTopicRouteInfoFromNameServer(topic, isDefault=true, producer).
    """
    return TopicRouteData(
        queue_datas=tuple(
            QueueData(
                broker_name=qd.broker_name,
                read_queue_nums=min(default_topic_queue_nums, qd.read_queue_nums),
                write_queue_nums=min(default_topic_queue_nums, qd.read_queue_nums),
                perm=qd.perm,
                topic_sys_flag=qd.topic_sys_flag,
            )
            for qd in route.queue_datas
        ),
        broker_datas=route.broker_datas,
        order_topic_conf=route.order_topic_conf,
    )


def _normalized(
    route: TopicRouteData,
) -> tuple[list[QueueData], list[tuple[str, str, dict[int, str]]], str]:
    brokers = sorted(route.broker_datas, key=lambda b: b.broker_name)
    return (
        sorted(route.queue_datas, key=lambda q: (q.broker_name, q.perm, q.write_queue_nums, q.read_queue_nums)),
        [_broker_key(b) for b in brokers],
        route.order_topic_conf,
    )


def _broker_key(data: BrokerData) -> tuple[str, str, dict[int, str]]:
    return (data.cluster, data.broker_name, dict(data.broker_addrs))


def topic_route_data_changed(old: TopicRouteData | None, new: TopicRouteData | None) -> bool:
    """True unless both routes hold the same queue and broker data in any order.

    Mirrors MQClientInstance#topicRouteDataIsChange (sorts both, then compares).
    """
    if old is None or new is None:
        return True
    return _normalized(old) != _normalized(new)
