"""The v2 consumer side of the gateway: ReceiveMessage (POP), AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment and the pull API, over the brokers' POP, offsets and pull.

Modules: config (limits), validation (request checks), converter (MessageExt -> v2 Message), groups (subscription
group cache), handles (receipt-handle RPCs), receive (ReceiveMessage), pull (assignment, offsets, PullMessage),
activity (the one public class). Mirrors org.apache.rocketmq.proxy.grpc.v2.consumer.
"""

from mq_gateway.v2.consumer.activity import ConsumerActivity
from mq_gateway.v2.consumer.config import ConsumerActivityConfig

__all__ = ["ConsumerActivity", "ConsumerActivityConfig"]
