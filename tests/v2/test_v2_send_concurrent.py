"""v2 SendMessage with one message per call (the official SDKs' shape) through an in-process gateway over a real
cluster: concurrent calls share broker calls in the gateway's one batching stage (the per-broker coalescer), each
caller's entry matches what the broker stored (read back with read_all), message groups keep their order, and
stop() answers every call."""

from __future__ import annotations

import asyncio

import pytest
from apache.rocketmq.v2 import definition_pb2
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

from tests.v2.conftest import Gateway, make_typed_topic, start_gateway
from tests.v2.test_v2_send_message import send, v2_message

pytestmark = pytest.mark.integration
Code = definition_pb2.Code
CALLERS = 64


def message(topic: str, i: int, group: str = "") -> definition_pb2.Message:
    extra = {"message_group": group} if group else {}
    m = v2_message(topic, f"body-{i}".encode(), f"0102FC000000013D600B1777E8{i:08X}", tag="t", **extra)
    m.user_properties["n"] = str(i)
    return m


async def test_concurrent_calls_share_broker_calls_and_each_gets_its_own_entry(
    gateway: Gateway, cluster: LocalCluster
) -> None:
    topic = await make_topic(cluster, "v2_conc_many")
    answers = await asyncio.gather(*(send(gateway, message(topic, i)) for i in range(CALLERS)))
    assert [a.status.code for a in answers] == [Code.OK] * CALLERS
    coalescer = gateway.controller.coalescer
    assert coalescer is not None
    assert coalescer.stats.messages == CALLERS
    assert coalescer.stats.broker_calls < CALLERS, "concurrent one-message calls shared broker calls"
    stored = {m.properties["UNIQ_KEY"]: (q, m) for q, m in await read_all(cluster.namesrv_addr, topic)}
    assert len(stored) == CALLERS, "each message stored once"
    for i, answer in enumerate(answers):
        (entry,) = answer.entries
        _queue, m = stored[entry.message_id]
        assert entry.message_id == f"0102FC000000013D600B1777E8{i:08X}"
        assert (m.body, m.properties["n"], m.properties["TAGS"]) == (f"body-{i}".encode(), str(i), "t")
        assert entry.offset == m.queue_offset
    assert len({(q.queue_id, m.queue_offset) for q, m in stored.values()}) == CALLERS


async def test_message_groups_keep_their_order_under_concurrency(gateway: Gateway, cluster: LocalCluster) -> None:
    topic = await make_typed_topic(cluster, "v2_conc_fifo", "FIFO")
    groups = [f"g{g}" for g in range(8)]

    async def sender(g: int) -> None:  # one caller per group, one call at a time (as a FIFO producer sends)
        for k in range(12):
            answer = await send(gateway, message(topic, g * 100 + k, groups[g]))
            assert answer.status.code == Code.OK, answer.status.message

    await asyncio.gather(*(sender(g) for g in range(len(groups))))
    stored = await read_all(cluster.namesrv_addr, topic)
    for g, group in enumerate(groups):
        mine = [(q.queue_id, m.body) for q, m in stored if m.properties.get("__SHARDINGKEY") == group]
        assert len({queue for queue, _body in mine}) == 1
        assert [body for _queue, body in mine] == [f"body-{g * 100 + k}".encode() for k in range(12)]


async def test_stop_answers_every_call_and_stores_every_message(cluster: LocalCluster) -> None:
    topic = await make_topic(cluster, "v2_conc_stop")
    gw = await start_gateway(cluster)
    try:
        calls = [asyncio.ensure_future(send(gw, message(topic, i))) for i in range(CALLERS)]
        coalescer = gw.controller.coalescer
        assert coalescer is not None
        for _ in range(3000):  # every call reached the gateway's batching stage
            if coalescer.stats.units == CALLERS:
                break
            await asyncio.sleep(0.01)
        await gw.controller.stop(10)
        answers = await asyncio.gather(*calls)
    finally:
        await gw.channel.close()
    assert [a.status.code for a in answers] == [Code.OK] * CALLERS
    assert len(await read_all(cluster.namesrv_addr, topic)) == CALLERS
