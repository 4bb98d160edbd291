"""ConsumerBrokerCalls against a real broker: heartbeat -> consumer list -> unregister, offsets committed in one
batch then queried, search by time, and the codes of bad input."""

from __future__ import annotations

import time

import pytest
from lite_pull_testkit import send_bodies
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_client.producer import DefaultMQProducer
from mq_common.channels import ChannelPool
from mq_common.errors import MQBrokerError
from mq_common.protocol import (
    ConsumerQueueOffset,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic

pytestmark = pytest.mark.integration


async def test_heartbeat_lists_the_client_until_it_unregisters(cluster: LocalCluster, pool: ChannelPool) -> None:
    addr = cluster.broker_addrs["broker-a"]
    calls = ConsumerBrokerCalls(pool)
    for cid in ("cid-2", "cid-1"):
        heartbeat = HeartbeatData(
            cid, "g_calls", ConsumeType.CONSUME_ACTIVELY, MessageModel.CLUSTERING, (SubscriptionData("T"),)
        )
        await calls.heartbeat(addr, heartbeat)
    assert await calls.get_consumer_list_by_group(addr, "g_calls") == ["cid-1", "cid-2"]
    await calls.unregister_client(addr, "cid-1", "g_calls")
    assert await calls.get_consumer_list_by_group(addr, "g_calls") == ["cid-2"]


async def test_offsets_of_one_broker_go_in_one_call_and_come_back(
    cluster: LocalCluster, producer: DefaultMQProducer, pool: ChannelPool
) -> None:
    topic = await make_topic(cluster, "calls_offsets", 2)
    await send_bodies(producer, topic, "o", 20)
    addr = cluster.broker_addrs["broker-a"]
    calls = ConsumerBrokerCalls(pool)
    with pytest.raises(MQBrokerError) as none_yet:
        await calls.query_consumer_offset(addr, "g_offsets", topic, 0)
    assert none_yet.value.code == ResponseCode.QUERY_NOT_FOUND

    outcomes = await calls.update_consumer_offsets(
        addr,
        [
            ConsumerQueueOffset("g_offsets", topic, 0, 1),
            ConsumerQueueOffset("g_offsets", "no_such_topic_calls", 0, 1),
            ConsumerQueueOffset("g_offsets", topic, 1, 2),
        ],
    )
    assert [None if o is None else o.code for o in outcomes] == [None, ResponseCode.TOPIC_NOT_EXIST, None]
    assert [await calls.query_consumer_offset(addr, "g_offsets", topic, q) for q in (0, 1)] == [1, 2]


async def test_search_offset_by_timestamp_finds_the_first_message_at_or_after(
    cluster: LocalCluster, producer: DefaultMQProducer, pool: ChannelPool
) -> None:
    topic = await make_topic(cluster, "calls_search", 1)
    sent = await send_bodies(producer, topic, "s", 6)
    mq = sent[0].message_queue
    addr = cluster.broker_addrs[mq.broker_name]
    calls = ConsumerBrokerCalls(pool)
    max_offset = sum(1 for r in sent if r.message_queue == mq)
    assert await calls.search_offset_by_timestamp(addr, topic, mq.queue_id, 0) == 0
    future_ms = int(time.time() * 1000) + 3_600_000
    assert await calls.search_offset_by_timestamp(addr, topic, mq.queue_id, future_ms) == max_offset
