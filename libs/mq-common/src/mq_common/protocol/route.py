"""Route values: where a topic's queues live (no protobuf here). Frozen and slotted: safe to share.

Mirrors org.apache.rocketmq.remoting.protocol.route.{QueueData, BrokerData, TopicRouteData} and
org.apache.rocketmq.common.message.MessageQueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mq_common.constants import MixAll, PermName
from mq_common.message_type import MESSAGE_TYPE_ATTRIBUTE, TopicMessageType, parse_topic_message_type
from mq_common.protocol.topic import TopicConfig


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group. Mirrors org.apache.rocketmq.common.message.MessageQueue.

    Ordered by (topic, broker_name, queue_id) like MessageQueue#compareTo.
    """

    topic: str
    broker_name: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class QueueData:
    """Queue counts and permission (PermName bits) of a topic on one broker group.

    ``message_type``: beyond RocketMQ, the topic's ``message.type`` attribute on that broker group as registered
    ('' when it has none, which means NORMAL), so that a topic's type travels with its route.
    Mirrors org.apache.rocketmq.remoting.protocol.route.QueueData.
    """

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0
    message_type: str = ""

    @classmethod
    def of(cls, broker_name: str, config: TopicConfig) -> QueueData:
        """RouteInfoManager#createAndUpdateQueueData's QueueData for ``config`` on ``broker_name`` (with the
        config's ``message.type`` attribute)."""
        return cls(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
            config.attributes.get(MESSAGE_TYPE_ATTRIBUTE, ""),
        )

    @property
    def topic_message_type(self) -> TopicMessageType:
        """The type :attr:`message_type` names (NORMAL when empty, UNSPECIFIED when unknown)."""
        return parse_topic_message_type(self.message_type)


@dataclass(frozen=True, slots=True)
class BrokerData:
    """Addresses of one broker group. Mirrors org.apache.rocketmq.remoting.protocol.route.BrokerData.

    ``broker_addrs`` maps broker id (0 = master, MixAll.MASTER_ID) to ``"host:port"``.
    """

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str]

    def master_addr(self) -> str | None:
        """The master's address (broker id 0), or None when the master is not registered."""
        return self.broker_addrs.get(MixAll.MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master's address, else the address of the lowest broker id, else None (BrokerData#selectBrokerAddr)."""
        master = self.master_addr()
        if master is not None:
            return master
        if not self.broker_addrs:
            return None
        return self.broker_addrs[min(self.broker_addrs)]


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Where a topic lives: queue data per broker group and those groups' addresses.

    Mirrors org.apache.rocketmq.remoting.protocol.route.TopicRouteData; the name server sorts both tuples by
    broker name.
    """

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str = ""

    def topic_message_type(self) -> TopicMessageType:
        """The topic's message type by this route: that of the first QueueData by broker name (NORMAL without
        any). Broker groups normally agree (``updateTopic -c`` sets every master); when they do not, each queue's
        own type is in its QueueData (v2 QueryRoute answers per queue) and the broker checks its own."""
        if not self.queue_datas:
            return TopicMessageType.NORMAL
        return min(self.queue_datas, key=lambda q: q.broker_name).topic_message_type

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """The BrokerData named ``broker_name``, or None."""
        for data in self.broker_datas:
            if data.broker_name == broker_name:
                return data
        return None

    def find_broker_addr(self, broker_name: str) -> str | None:
        """Address to talk to for ``broker_name`` (master first), or None when the route has none."""
        data = self.broker_data(broker_name)
        return None if data is None else data.select_broker_addr()

    def read_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues: ``read_queue_nums`` queues per readable QueueData with a live broker group.

        Mirrors MQClientInstance#topicRouteData2TopicSubscribeInfo; sorted by broker name then queue id.
        """
        queues: list[MessageQueue] = []
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if not PermName.is_readable(qd.perm) or self.broker_data(qd.broker_name) is None:
                continue
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
        return queues
