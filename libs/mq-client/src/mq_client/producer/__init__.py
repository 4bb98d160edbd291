"""The producer core (DefaultMQProducerImpl): validation, routes, queue selection, fault isolation, retries.

Public API (what an application needs): :class:`DefaultMQProducer` and its :class:`ProducerConfig`,
:class:`Message` / :class:`MessageBatch`, the results (:class:`SendResult`, :class:`SendStatus`,
:class:`MessageBatchResult`), the errors it raises, the hooks it runs and the queue selectors it takes. The
building blocks (MQFaultStrategy, TopicPublishInfo, TopicRouteManager, the BrokerTransport / NameServerLookup
seams, the encoded-batch path of the gateway, ...) are imported from their modules.
"""

from mq_client.producer.config import ProducerConfig
from mq_client.producer.errors import BrokerNotFoundError, FlowControlError, ProducerStateError, SendFailedError
from mq_client.producer.hooks import (
    CheckForbiddenHook,
    ProducerHooks,
    SendMessageContext,
    SendMessageHook,
    TopicAccessList,
    load_hook,
)
from mq_client.producer.message import Message, MessageBatch
from mq_client.producer.producer import DefaultMQProducer, ServiceState
from mq_client.producer.selectors import SelectMessageQueueByHash, select_by_sharding_key
from mq_client.producer.send_result import CommunicationMode, MessageBatchResult, SendResult, SendStatus

__all__ = [
    "BrokerNotFoundError",
    "CheckForbiddenHook",
    "CommunicationMode",
    "DefaultMQProducer",
    "FlowControlError",
    "Message",
    "MessageBatch",
    "MessageBatchResult",
    "ProducerConfig",
    "ProducerHooks",
    "ProducerStateError",
    "SelectMessageQueueByHash",
    "SendFailedError",
    "SendMessageContext",
    "SendMessageHook",
    "SendResult",
    "SendStatus",
    "ServiceState",
    "TopicAccessList",
    "load_hook",
    "select_by_sharding_key",
]
