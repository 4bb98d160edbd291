"""TopicRouteCache: one name server lookup per topic and TTL, shared by concurrent misses, bounded, and the
master address of a broker named by a receipt handle."""

from __future__ import annotations

import asyncio

import pytest
from mq_common.errors import MQClientError, TopicNotExistError
from mq_common.protocol import BrokerData, QueueData, TopicRouteData
from mq_common.response_code import ResponseCode
from mq_gateway.v2.routes import TopicRouteCache


def _route(addr: str) -> TopicRouteData:
    return TopicRouteData(
        (QueueData("broker-a", 4, 4, 6),),
        (BrokerData("DefaultCluster", "broker-a", {0: addr, 1: "127.0.0.9:10911"}),),
    )


class CountingLookup:
    """A name server that answers from a dict after yielding to the loop, counting lookups per topic."""

    def __init__(self, routes: dict[str, TopicRouteData]) -> None:
        self.routes = routes
        self.calls: dict[str, int] = {}

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        self.calls[topic] = self.calls.get(topic, 0) + 1
        await asyncio.sleep(0)
        if topic not in self.routes:
            raise TopicNotExistError(f"no route for {topic}")
        return self.routes[topic]


async def test_concurrent_misses_share_one_lookup_and_hits_use_the_cache() -> None:
    lookup = CountingLookup({"T": _route("127.0.0.1:10911")})
    cache = TopicRouteCache(lookup)
    routes = await asyncio.gather(*(cache.route("T") for _ in range(50)))
    assert all(r is routes[0] for r in routes)
    assert await cache.master_addr("T", "broker-a") == "127.0.0.1:10911"
    assert lookup.calls == {"T": 1}


async def test_expired_and_invalidated_entries_are_looked_up_again() -> None:
    lookup = CountingLookup({"T": _route("127.0.0.1:10911")})
    cache = TopicRouteCache(lookup, route_ttl_ms=1)
    await cache.route("T")
    await asyncio.sleep(0.01)
    lookup.routes["T"] = _route("127.0.0.2:10911")
    assert await cache.master_addr("T", "broker-a") == "127.0.0.2:10911"
    cache.invalidate("T")
    await cache.route("T")
    assert lookup.calls == {"T": 3}


async def test_unknown_topic_raises_for_every_waiter_and_is_not_cached() -> None:
    lookup = CountingLookup({})
    cache = TopicRouteCache(lookup)
    results = await asyncio.gather(*(cache.route("nope") for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, TopicNotExistError) for r in results)
    with pytest.raises(TopicNotExistError):
        await cache.route("nope")
    assert lookup.calls == {"nope": 2}


async def test_unknown_broker_is_broker_not_exist_and_the_cache_is_bounded() -> None:
    lookup = CountingLookup({f"T{i}": _route("127.0.0.1:10911") for i in range(5)})
    cache = TopicRouteCache(lookup, max_topics=2)
    with pytest.raises(MQClientError) as raised:
        await cache.master_addr("T0", "broker-z")
    assert raised.value.code == ResponseCode.BROKER_NOT_EXIST
    for i in range(5):
        await cache.route(f"T{i}")
    await cache.route("T4")
    await cache.route("T0")
    assert lookup.calls["T4"] == 1
    assert lookup.calls["T0"] == 3
