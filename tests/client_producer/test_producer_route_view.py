"""TopicRouteManager as the gateway's one route view (``route``, ``master_addr``, ``invalidate``): one name server
lookup per topic and poll interval, shared by concurrent misses; a topic's own route only (never TBW102's); the
master address of a broker named by a receipt handle; one entry shared with the producer's publish info."""

from __future__ import annotations

import asyncio

import pytest
from mq_client.producer.route_manager import TopicRouteManager
from mq_common.errors import MQClientError, TopicNotExistError
from mq_common.protocol import BrokerData, QueueData, TopicRouteData
from mq_common.response_code import ResponseCode


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
    cache = TopicRouteManager(lookup)
    routes = await asyncio.gather(*(cache.route("T") for _ in range(50)))
    assert all(r is routes[0] for r in routes)
    assert await cache.master_addr("T", "broker-a") == "127.0.0.1:10911"
    assert lookup.calls == {"T": 1}


async def test_expired_and_invalidated_entries_are_looked_up_again() -> None:
    lookup = CountingLookup({"T": _route("127.0.0.1:10911")})
    cache = TopicRouteManager(lookup, poll_name_server_interval_ms=1)
    await cache.route("T")
    await asyncio.sleep(0.01)
    lookup.routes["T"] = _route("127.0.0.2:10911")
    assert await cache.master_addr("T", "broker-a") == "127.0.0.2:10911"
    cache.invalidate("T")
    await cache.route("T")
    assert lookup.calls == {"T": 3}


async def test_unknown_topic_raises_for_every_waiter_and_is_not_cached() -> None:
    lookup = CountingLookup({})
    cache = TopicRouteManager(lookup)
    results = await asyncio.gather(*(cache.route("nope") for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, TopicNotExistError) for r in results)
    with pytest.raises(TopicNotExistError):
        await cache.route("nope")
    assert lookup.calls == {"nope": 2}


async def test_unknown_broker_is_broker_not_exist_and_the_route_is_looked_up_again() -> None:
    lookup = CountingLookup({"T0": _route("127.0.0.1:10911")})
    cache = TopicRouteManager(lookup)
    with pytest.raises(MQClientError) as raised:
        await cache.master_addr("T0", "broker-z")
    assert raised.value.code == ResponseCode.BROKER_NOT_EXIST
    await cache.route("T0")
    assert lookup.calls == {"T0": 2}


async def test_the_producer_and_the_route_view_share_one_entry() -> None:
    """A route the view fetched serves the producer's queue selection without another lookup, and the reverse."""
    lookup = CountingLookup({"T": _route("127.0.0.1:10911"), "U": _route("127.0.0.1:10911")})
    cache = TopicRouteManager(lookup)
    await cache.route("T")
    info = await cache.find_publish_info("T", 1000)
    assert [mq.queue_id for mq in info.message_queues] == [0, 1, 2, 3]
    await cache.find_publish_info("U", 1000)
    await cache.route("U")
    assert lookup.calls == {"T": 1, "U": 1}


async def test_a_topic_sent_to_through_tbw102_has_no_route_of_its_own() -> None:
    """The producer may send to an unknown topic over TBW102's route (the broker creates it); the route view
    still answers TopicNotExistError for it (the v2 API does not auto-create), until the topic exists."""
    lookup = CountingLookup({"TBW102": _route("127.0.0.1:10911")})
    cache = TopicRouteManager(lookup)
    info = await cache.find_publish_info("New", 1000)
    assert info.from_default_topic
    with pytest.raises(TopicNotExistError):
        await cache.route("New")
    lookup.routes["New"] = _route("127.0.0.1:10911")
    assert (await cache.route("New")).broker_datas[0].broker_name == "broker-a"
    assert not (await cache.find_publish_info("New", 1000)).from_default_topic
