"""The FIFO phase of the observability load (issue 33): orderly POP on every master, so the brokers' FIFO figures and
the broker dashboard's "FIFO (orderly) consumption" row have data.

On a topic with one queue per master, each master's queue gets messages; a consumer group with
consumeMessageOrderly=true pops one message orderly and acks it (a block that ended: mq_broker_fifo_order_wait_ms),
then pops the next and keeps it un-acked, invisible for an hour (a block that stays: mq_broker_fifo_blocked_queues 1,
mq_broker_fifo_block_age_ms growing). Over the brokers' own gRPC API.
"""

from __future__ import annotations

from typing import Final

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.protocol import TopicConfig
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import unique_topic
from mq_local.topics import create_topic_on_cluster

FIFO_GROUP: Final = "obs_fifo_group"
FIFO_PRODUCER_GROUP: Final = "obs_fifo_producer"
# Round-robin over 2 masters x 1 queue: each queue gets half.
MESSAGES: Final = 8
HELD_INVISIBLE_MS: Final = 3_600_000
CALL_TIMEOUT_S: Final = 30.0


async def consume_orderly(cluster: LocalCluster) -> str:
    """Create the topic, send MESSAGES, then on every master: one orderly pop acked, one left blocking. Returns the
    topic."""
    topic = unique_topic("obs_fifo")
    await create_topic_on_cluster(cluster.namesrv_addr, TopicConfig(topic, 1, 1), cluster.spec.cluster_name)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group=FIFO_PRODUCER_GROUP), [cluster.namesrv_addr])
    await producer.start()
    try:
        for i in range(MESSAGES):
            await producer.send(Message(topic, b"fifo %d" % i))
    finally:
        await producer.shutdown()
    for addr in cluster.broker_addrs.values():
        await _pop_orderly_on(addr, topic)
    return topic


async def _pop_orderly_on(addr: str, topic: str) -> None:
    async with grpc.aio.insecure_channel(addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        config = broker_pb2.SubscriptionGroupConfig(
            group_name=FIFO_GROUP, consume_enable=True, consume_message_orderly=True, retry_max_times=16,
            retry_queue_nums=1,
        )  # fmt: skip
        created = await stub.UpdateSubscriptionGroup(
            broker_pb2.UpdateSubscriptionGroupRequest(config=config), timeout=CALL_TIMEOUT_S
        )
        assert created.code == ResponseCode.SUCCESS, created.remark

        async def pop_one(invisible_time_ms: int) -> str:
            request = broker_pb2.PopMessageRequest(
                consumer_group=FIFO_GROUP, topic=topic, queue_id=-1, max_msg_nums=1,
                invisible_time_ms=invisible_time_ms, poll_time_ms=5_000, init_mode=1, order=True,
            )  # fmt: skip
            reply = await stub.PopMessage(request, timeout=CALL_TIMEOUT_S)
            assert reply.code == ResponseCode.SUCCESS, (addr, reply.code, reply.remark)
            assert len(reply.messages) == 1, addr
            handle: str = reply.messages[0].receipt_handle
            return handle

        first = await pop_one(60_000)
        acked = await stub.AckMessage(
            broker_pb2.AckMessageRequest(consumer_group=FIFO_GROUP, topic=topic, receipt_handles=[first]),
            timeout=CALL_TIMEOUT_S,
        )
        assert acked.code == ResponseCode.SUCCESS, acked.remark
        await pop_one(HELD_INVISIBLE_MS)  # never acked: blocks the queue
