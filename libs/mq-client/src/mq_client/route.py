"""Route domain values shared by the producer, the pull consumer and the admin client (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.route.{TopicRouteData, QueueData, BrokerData},
org.apache.rocketmq.common.message.MessageQueue, org.apache.rocketmq.common.TopicConfig,
org.apache.rocketmq.remoting.protocol.body.ClusterInfo and org.apache.rocketmq.client.consumer.PullStatus.
Values are frozen and slotted: safe to share between tasks and threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from mq_common.constants import DEFAULT_TOPIC_QUEUE_NUMS, MixAll, PermName

DEFAULT_TOPIC_PERM: int = PermName.PERM_READ | PermName.PERM_WRITE


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
    """Queue counts and permission of a topic on one broker group. Mirrors ...route.QueueData."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    """Addresses of one broker group. Mirrors ...route.BrokerData.

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
    """Where a topic lives: queue data per broker group and those groups' addresses. Mirrors ...TopicRouteData."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str = ""

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


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's configuration on one broker. Mirrors org.apache.rocketmq.common.TopicConfig.

    ``perm`` holds PermName bits (6 = read|write).
    """

    topic_name: str
    read_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    perm: int = DEFAULT_TOPIC_PERM
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Brokers known to a name server. Mirrors org.apache.rocketmq.remoting.protocol.body.ClusterInfo.

    ``broker_addr_table``: broker name -> BrokerData; ``cluster_addr_table``: cluster name -> broker names;
    ``broker_live_table``: broker address -> last registration timestamp (ms since the epoch).
    """

    broker_addr_table: Mapping[str, BrokerData]
    cluster_addr_table: Mapping[str, tuple[str, ...]]
    broker_live_table: Mapping[str, int]

    def master_addrs_of_cluster(self, cluster: str) -> list[str]:
        """Master addresses of every broker group of ``cluster`` (CommandUtil#fetchMasterAddrByClusterName)."""
        addrs: list[str] = []
        for name in self.cluster_addr_table.get(cluster, ()):
            data = self.broker_addr_table.get(name)
            master = None if data is None else data.master_addr()
            if master is not None:
                addrs.append(master)
        return addrs


@dataclass(frozen=True, slots=True)
class TopicQueueOffset:
    """Min/max logical offsets of one queue. Mirrors org.apache.rocketmq.remoting.protocol.admin.TopicOffset."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int


class PullStatus(Enum):
    """Outcome of a pull. Mirrors org.apache.rocketmq.client.consumer.PullStatus."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"
