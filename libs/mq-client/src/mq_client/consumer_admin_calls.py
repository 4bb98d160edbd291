"""Admin-side consumer broker calls by address: subscription groups, consume stats, offset reset by time, topic
deletion, consumer connections; plus (inherited) mq_client.consumer_calls' consumer calls.

A client adapter like mq_client.broker_client (the only kind of mq_client module that touches generated protobuf
types): it translates between the mq_common.protocol domain types and broker.proto, nothing more. Used by
mq_client.admin.MQAdminClient. Runs on the caller's asyncio loop (channels belong to the loop that created them).

Error mapping as in mq_client.broker_client: a gRPC status -> mq_common.grpc_errors.transport_error
(RemotingTimeoutError, InvalidParameterError, RemotingError); a non-zero business ``code`` ->
mq_common.errors.error_for_code(code, remark), raised.
"""

from __future__ import annotations

from mq_client.consumer_calls import ConsumerBrokerCalls

__all__ = ["ConsumerAdminCalls"]


class ConsumerAdminCalls(ConsumerBrokerCalls):
    """The admin RPCs of the Broker service's consumer side, one method each, on top of the consumer calls.
    Mirrors MQClientAPIImpl's admin calls (createSubscriptionGroup, deleteSubscriptionGroup,
    getAllSubscriptionGroup, getConsumeStats, invokeBrokerToResetOffset, deleteTopicInBroker,
    getConsumerConnectionList). Runs on the caller's loop; channels come from (and belong to) ``pool``.
    """
