"""One model of each protocol concept, shared by the name server, the broker and the clients (no protobuf):
topic configs, routes, cluster info, registration, admin offsets, the send headers (send.py), the pull
headers (pull.py), the query headers (query.py) and the consumer side (consumer.py: subscription groups,
offsets, consume stats, heartbeats, connections).

Mirrors RocketMQ's ``remoting/protocol`` package and the values of ``common`` it carries. The proto
converters of these types live in :mod:`mq_common.protocol.convert` (the edge: the only module here that
imports generated protobuf types).
"""

from mq_common.protocol.admin import TopicQueueOffset
from mq_common.protocol.cluster import BrokerLiveInfo, ClusterInfo
from mq_common.protocol.consumer import (
    SUB_ALL,
    ConsumerConnection,
    ConsumerConnectionInfo,
    ConsumerQueueOffset,
    ConsumeStats,
    ConsumeType,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    HeartbeatData,
    MessageModel,
    QueryConsumerOffsetRequestHeader,
    QueueConsumeStats,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SubscriptionData,
    SubscriptionGroupConfig,
    UnregisterClientRequestHeader,
)
from mq_common.protocol.pull import (
    PULL_STATUS_BY_CODE,
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullResult,
    PullStatus,
    pull_result_of,
)
from mq_common.protocol.query import (
    QueryMessageByUniqueKeyRequestHeader,
    QueryMessageByUniqueKeyResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueryResult,
    ViewMessageRequestHeader,
    ViewMessageResponseHeader,
    query_result_of,
    viewed_message_of,
)
from mq_common.protocol.registration import BrokerRegistration, DataVersion, RegisterBrokerResult
from mq_common.protocol.route import BrokerData, MessageQueue, QueueData, TopicRouteData
from mq_common.protocol.send import (
    SendMessageBatchRequestHeader,
    SendMessageBatchResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from mq_common.protocol.topic import DEFAULT_TOPIC_PERM, TopicConfig

__all__ = [
    "DEFAULT_TOPIC_PERM",
    "PULL_STATUS_BY_CODE",
    "SUB_ALL",
    "BrokerData",
    "BrokerLiveInfo",
    "BrokerRegistration",
    "ClusterInfo",
    "ConsumeStats",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerConnectionInfo",
    "ConsumerQueueOffset",
    "ConsumerSendMsgBackRequestHeader",
    "DataVersion",
    "DeleteSubscriptionGroupRequestHeader",
    "GetConsumeStatsRequestHeader",
    "HeartbeatData",
    "MessageModel",
    "MessageQueue",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullResult",
    "PullStatus",
    "QueryConsumerOffsetRequestHeader",
    "QueryMessageByUniqueKeyRequestHeader",
    "QueryMessageByUniqueKeyResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryResult",
    "QueueConsumeStats",
    "QueueData",
    "RegisterBrokerResult",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SendMessageBatchRequestHeader",
    "SendMessageBatchResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "TopicConfig",
    "TopicQueueOffset",
    "TopicRouteData",
    "UnregisterClientRequestHeader",
    "ViewMessageRequestHeader",
    "ViewMessageResponseHeader",
    "pull_result_of",
    "query_result_of",
    "viewed_message_of",
]
