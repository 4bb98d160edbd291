"""The producer core (DefaultMQProducerImpl): validation, routes, queue selection, fault isolation, retries.

Public API: :class:`DefaultMQProducer`, :class:`ProducerConfig`, :class:`Message`, :class:`SendResult`,
:class:`SendStatus`, the errors in :mod:`mq_client.producer.errors`, and the building blocks
(:class:`MQFaultStrategy`, :class:`LatencyFaultTolerance`, :class:`TopicPublishInfo`, selectors).
"""

from mq_common.hashing import java_string_hash

from mq_client.producer.backpressure import InFlightLimiter
from mq_client.producer.config import ProducerConfig
from mq_client.producer.errors import BrokerNotFoundError, FlowControlError, ProducerStateError, SendFailedError
from mq_client.producer.fault_strategy import LATENCY_TABLES, LatencyFaultTolerance, LatencyTables, MQFaultStrategy
from mq_client.producer.hooks import (
    CheckForbiddenHook,
    ProducerHooks,
    SendMessageContext,
    SendMessageHook,
    TopicAccessList,
    load_hook,
)
from mq_client.producer.kernel import BrokerTransport
from mq_client.producer.message import Message, MessageBatch
from mq_client.producer.message_batch import (
    ENCODED_FIXED_PROPERTIES,
    ChunkOutcome,
    EncodedMessageBatch,
    encoded_refusal,
)
from mq_client.producer.producer import DefaultMQProducer, ServiceState
from mq_client.producer.route_manager import NameServerLookup, TopicRouteManager
from mq_client.producer.selectors import SelectMessageQueueByHash, select_by_sharding_key
from mq_client.producer.send_result import CommunicationMode, MessageBatchResult, SendResult, SendStatus
from mq_client.producer.topic_publish_info import SendWhichQueue, TopicPublishInfo

__all__ = [
    "ENCODED_FIXED_PROPERTIES",
    "LATENCY_TABLES",
    "BrokerNotFoundError",
    "BrokerTransport",
    "CheckForbiddenHook",
    "ChunkOutcome",
    "CommunicationMode",
    "DefaultMQProducer",
    "EncodedMessageBatch",
    "FlowControlError",
    "InFlightLimiter",
    "LatencyFaultTolerance",
    "LatencyTables",
    "MQFaultStrategy",
    "Message",
    "MessageBatch",
    "MessageBatchResult",
    "NameServerLookup",
    "ProducerConfig",
    "ProducerHooks",
    "ProducerStateError",
    "SelectMessageQueueByHash",
    "SendFailedError",
    "SendMessageContext",
    "SendMessageHook",
    "SendResult",
    "SendStatus",
    "SendWhichQueue",
    "ServiceState",
    "TopicAccessList",
    "TopicPublishInfo",
    "TopicRouteManager",
    "encoded_refusal",
    "java_string_hash",
    "load_hook",
    "select_by_sharding_key",
]
