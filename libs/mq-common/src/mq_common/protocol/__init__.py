"""One model of each protocol concept, shared by the name server, the broker and the clients (no protobuf):
topic configs, routes, cluster info, registration, admin offsets, the send headers (send.py), the pull
headers (pull.py), the query headers (query.py) and the POP headers with the receipt handle (pop.py).

Mirrors RocketMQ's ``remoting/protocol`` package and the values of ``common`` it carries. The proto
converters of these types live in :mod:`mq_common.protocol.convert` (the edge: the only module here that
imports generated protobuf types).
"""

from mq_common.protocol.admin import TopicQueueOffset
from mq_common.protocol.cluster import BrokerLiveInfo, ClusterInfo
from mq_common.protocol.pop import (
    AckMessageRequestHeader,
    AckMessageResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumeInitMode,
    InvalidReceiptHandleError,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PoppedMessage,
    PoppedMessageExt,
    PopResult,
    PopStatus,
    ReceiptHandle,
    pop_result_of,
)
from mq_common.protocol.pull import (
    PULL_STATUS_BY_CODE,
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
    "AckMessageRequestHeader",
    "AckMessageResponseHeader",
    "BrokerData",
    "BrokerLiveInfo",
    "BrokerRegistration",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "ClusterInfo",
    "ConsumeInitMode",
    "DataVersion",
    "InvalidReceiptHandleError",
    "MessageQueue",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "PopResult",
    "PopStatus",
    "PoppedMessage",
    "PoppedMessageExt",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullResult",
    "PullStatus",
    "QueryMessageByUniqueKeyRequestHeader",
    "QueryMessageByUniqueKeyResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryResult",
    "QueueData",
    "ReceiptHandle",
    "RegisterBrokerResult",
    "SendMessageBatchRequestHeader",
    "SendMessageBatchResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "TopicConfig",
    "TopicQueueOffset",
    "TopicRouteData",
    "ViewMessageRequestHeader",
    "ViewMessageResponseHeader",
    "pop_result_of",
    "pull_result_of",
    "query_result_of",
    "viewed_message_of",
]
