"""Broker-side queue locks of orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, RebalanceLockManager): one client
holds a queue at a time, renews it, frees it, and loses it to another client once it expired; over the broker's
gRPC API through mq_client's ConsumerBrokerCalls (GetConsumeStats names each queue's holder), with the refusals of
bad input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from consumer_testkit import create_topic
from mq.broker.v1 import broker_pb2
from mq_broker.consumer.rebalance_lock_manager import REBALANCE_LOCK_MAX_LIVE_TIME_MS, RebalanceLockManager
from mq_broker.controller import BrokerController
from mq_client.consumer_calls import ConsumerBrokerCalls
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol import MessageQueue
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    from mq.broker.v1 import broker_pb2_grpc

Broker = tuple[BrokerController, "broker_pb2_grpc.BrokerAsyncStub"]
Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_a_lock_is_held_by_one_client_until_freed_or_expired() -> None:
    now = [1_000_000]
    locks = RebalanceLockManager(clock_ms=lambda: now[0])
    assert locks.try_lock_batch("G", [Q0, Q1], "c1") == {Q0, Q1}
    assert locks.try_lock_batch("G", [Q1, Q2], "c2") == {Q2}  # Q1 is c1's
    assert locks.try_lock_batch("other", [Q1], "c2") == {Q1}  # locks are per group
    now[0] += REBALANCE_LOCK_MAX_LIVE_TIME_MS // 2
    assert locks.try_lock_batch("G", [Q0], "c1") == {Q0}  # renewed
    now[0] += REBALANCE_LOCK_MAX_LIVE_TIME_MS // 2 + 1
    assert locks.try_lock_batch("G", [Q0, Q1], "c2") == {Q1}  # Q1 expired (not renewed), Q0 was renewed
    assert locks.locked_queues("G") == {Q0: "c1", Q1: "c2"}  # Q2's lock expired too
    locks.unlock_batch("G", [Q0, Q1], "c2")  # Q0 is not c2's: kept
    assert locks.locked_queues("G") == {Q0: "c1"}
    locks.unlock_batch("G", [Q0, Q2], "c1")
    assert locks.try_lock_batch("G", [Q0], "c2") == {Q0}


async def test_lock_and_unlock_over_grpc(broker: Broker) -> None:
    controller, stub = broker
    await create_topic(stub, "T", 3)
    addr = f"127.0.0.1:{controller.port}"
    pool = ChannelPool()
    calls = ConsumerBrokerCalls(pool)
    try:
        assert await calls.lock_batch_mq(addr, "G", "c1", [Q0, Q1]) == {Q0, Q1}
        assert await calls.lock_batch_mq(addr, "G", "c2", [Q0, Q1, Q2]) == {Q2}
        await calls.unlock_batch_mq(addr, "G", "c1", [Q0])
        assert await calls.lock_batch_mq(addr, "G", "c2", [Q0]) == {Q0}
        stats = await stub.GetConsumeStats(broker_pb2.GetConsumeStatsRequest(consumer_group="G", topic="T"))
        assert [(q.queue_id, q.locked_by) for q in stats.queues] == [(0, "c2"), (1, "c1"), (2, "c2")]
        for group, client_id, queues in (
            ("bad group!", "c1", [Q0]),
            ("G", "", [Q0]),
            ("G", "c1", [MessageQueue("T", "broker-a", -1)]),
            ("G", "c1", [MessageQueue("bad topic!", "broker-a", 0)]),
            ("G", "c1", [MessageQueue("T", "broker-a", i) for i in range(1_025)]),
        ):
            with pytest.raises(MQError) as refused:
                await calls.lock_batch_mq(addr, group, client_id, queues)
            assert refused.value.code == ResponseCode.INVALID_PARAMETER, (group, client_id)
            assert refused.value.remark
    finally:
        await pool.close()
