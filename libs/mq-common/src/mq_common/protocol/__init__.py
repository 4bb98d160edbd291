"""One model of each protocol concept, shared by the name server, the broker and the clients (no protobuf).

Mirrors RocketMQ's ``remoting/protocol`` package and the values of ``common`` it carries. The proto
converters of these types live in :mod:`mq_common.protocol.convert` (the edge: the only module here that
imports generated protobuf types).
"""

from mq_common.protocol.admin import PullStatus, TopicQueueOffset
from mq_common.protocol.cluster import BrokerLiveInfo, ClusterInfo
from mq_common.protocol.registration import BrokerRegistration, DataVersion, RegisterBrokerResult
from mq_common.protocol.route import BrokerData, MessageQueue, QueueData, TopicRouteData
from mq_common.protocol.topic import DEFAULT_TOPIC_PERM, TopicConfig

__all__ = [
    "DEFAULT_TOPIC_PERM",
    "BrokerData",
    "BrokerLiveInfo",
    "BrokerRegistration",
    "ClusterInfo",
    "DataVersion",
    "MessageQueue",
    "PullStatus",
    "QueueData",
    "RegisterBrokerResult",
    "TopicConfig",
    "TopicQueueOffset",
    "TopicRouteData",
]
