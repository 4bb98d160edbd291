"""TopicRouteManager: cache, name server lookup, TBW102 fallback, single flight, periodic refresh."""

from __future__ import annotations

import asyncio

import pytest
from mq_client.producer.route_manager import TopicRouteManager
from mq_client.producer.testing import FixedStartRandom, InMemoryNameServer, make_route
from mq_common.errors import RemotingError, RemotingTimeoutError, TopicNotExistError
from mq_common.protocol import MessageQueue, TopicRouteData
from mq_common.response_code import ResponseCode


def manager(
    ns: InMemoryNameServer, *, default_topic_queue_nums: int = 4, poll_name_server_interval_ms: int = 30_000
) -> TopicRouteManager:
    return TopicRouteManager(
        ns,
        default_topic_queue_nums=default_topic_queue_nums,
        poll_name_server_interval_ms=poll_name_server_interval_ms,
        rng=FixedStartRandom(0),
    )


async def test_lookup_then_cache() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-b": 2, "broker-a": 1}, addrs={"broker-a": "127.0.0.1:1"})})
    routes = manager(ns)
    info = await routes.find_publish_info("T", 1000)
    assert info.message_queues == (
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    )
    assert not info.from_default_topic
    assert await routes.find_publish_info("T", 1000) is info
    assert ns.queries == ["T"]
    assert routes.find_broker_address_in_publish("broker-a") == "127.0.0.1:1"
    assert routes.find_broker_address_in_publish("broker-b") == "broker-b:10911"
    assert routes.find_broker_address_in_publish("broker-x") is None


async def test_unknown_topic_uses_tbw102_with_default_queue_nums() -> None:
    ns = InMemoryNameServer({"TBW102": make_route({"broker-a": 8, "broker-b": 2})})
    routes = manager(ns, default_topic_queue_nums=4)
    info = await routes.find_publish_info("NewTopic", 1000)
    assert info.from_default_topic
    assert [(q.broker_name, q.queue_id) for q in info.message_queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
        ("broker-a", 3),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    assert all(q.topic == "NewTopic" for q in info.message_queues)
    assert ns.queries == ["NewTopic", "TBW102"]


async def test_no_route_at_all() -> None:
    routes = manager(InMemoryNameServer())
    with pytest.raises(TopicNotExistError) as info:
        await routes.find_publish_info("Nowhere", 1000)
    assert info.value.remark == "No route info of this topic: Nowhere"
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_name_server_unreachable_keeps_the_transport_error_class() -> None:
    ns = InMemoryNameServer()
    ns.error = RemotingError("no name server answered: 127.0.0.1:9876: UNAVAILABLE")
    with pytest.raises(RemotingError) as info:
        await manager(ns).find_publish_info("T", 1000)
    assert "No route info of this topic: T" in info.value.remark
    assert "UNAVAILABLE" in info.value.remark


async def test_concurrent_lookups_share_one_query() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 4})})
    routes = manager(ns)
    infos = await asyncio.gather(*(routes.find_publish_info("T", 1000) for _ in range(20)))
    assert all(i is infos[0] for i in infos)
    assert ns.queries == ["T"]


class SlowNameServer(InMemoryNameServer):
    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_lookup_bounded_by_the_callers_budget() -> None:
    routes = manager(SlowNameServer())
    with pytest.raises(RemotingTimeoutError, match="lookup took over 50 ms"):
        await routes.find_publish_info("T", 50)
    await routes.stop()


async def test_refresh_switches_a_default_routed_topic_to_its_own_route_keeping_the_index() -> None:
    ns = InMemoryNameServer({"TBW102": make_route({"broker-a": 8})})
    routes = manager(ns)
    first = await routes.find_publish_info("T", 1000)
    first.select_one_message_queue()
    first.select_one_message_queue()
    await routes.refresh_all()  # still unknown: the default route stays
    assert routes.publish_info("T") is first
    ns.routes["T"] = make_route({"broker-a": 2, "broker-c": 2})
    await routes.refresh_all()
    second = routes.publish_info("T")
    assert second is not None
    assert second is not first
    assert not second.from_default_topic
    assert {q.broker_name for q in second.message_queues} == {"broker-a", "broker-c"}
    assert second.send_which_queue is first.send_which_queue
    assert routes.find_broker_address_in_publish("broker-c") == "broker-c:10911"


async def test_refresh_without_change_keeps_the_publish_info() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 4})})
    routes = manager(ns)
    info = await routes.find_publish_info("T", 1000)
    ns.routes["T"] = make_route({"broker-a": 4})  # equal value, new object
    assert not await routes.update_topic_route("T")
    assert routes.publish_info("T") is info
    ns.routes["T"] = make_route({"broker-a": 8})
    assert await routes.update_topic_route("T")
    new = routes.publish_info("T")
    assert new is not None
    assert len(new.message_queues) == 8


async def test_refresh_failure_keeps_the_old_route() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 4})})
    routes = manager(ns)
    info = await routes.find_publish_info("T", 1000)
    ns.error = RemotingError("down")
    await routes.refresh_all()
    assert routes.publish_info("T") is info


async def test_periodic_refresh_task_runs_and_stops() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 4})})
    routes = manager(ns, poll_name_server_interval_ms=10)
    await routes.find_publish_info("T", 1000)
    routes.start()
    ns.routes["T"] = make_route({"broker-a": 4, "broker-b": 4})
    for _ in range(200):  # bounded: up to ~2 s
        info = routes.publish_info("T")
        if info is not None and len(info.message_queues) == 8:
            break
        await asyncio.sleep(0.01)
    info = routes.publish_info("T")
    assert info is not None
    assert len(info.message_queues) == 8
    await routes.stop()
    queries = len(ns.queries)
    await asyncio.sleep(0.05)
    assert len(ns.queries) == queries


async def _settle(routes: TopicRouteManager) -> None:
    """Wait (bounded) for the failure-driven refresh tasks the manager started."""
    for _ in range(200):
        if not routes._failure_refreshes:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("failure-driven route refresh did not end")


async def test_a_broker_failure_refreshes_the_topics_it_serves_once_per_interval() -> None:
    ns = InMemoryNameServer(
        {
            "T1": make_route({"broker-a": 2}, addrs={"broker-a": "127.0.0.1:1"}),
            "T2": make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": "127.0.0.1:1"}),
            "T3": make_route({"broker-b": 2}),
        }
    )
    routes = manager(ns)
    for topic in ("T1", "T2", "T3"):
        await routes.find_publish_info(topic, 1000)
    ns.queries.clear()
    changed: list[str] = []
    routes.master_changed_listener = changed.append
    # broker-a's group failed over: its slave now serves as the master under the same broker name.
    ns.routes["T1"] = make_route({"broker-a": 2}, addrs={"broker-a": "127.0.0.1:2"})
    ns.routes["T2"] = make_route({"broker-a": 2, "broker-b": 2}, addrs={"broker-a": "127.0.0.1:2"})
    routes.broker_unreachable("broker-a")
    routes.broker_unreachable("broker-a")  # the same failure seen by another send: no second refresh
    await _settle(routes)
    assert sorted(ns.queries) == ["T1", "T2"]
    assert routes.find_broker_address_in_publish("broker-a") == "127.0.0.1:2"
    assert changed == ["broker-a"]
    routes.broker_unreachable("broker-a")  # within FAILURE_REFRESH_MIN_INTERVAL_MS of the last one
    await _settle(routes)
    assert sorted(ns.queries) == ["T1", "T2"]
    routes.broker_unreachable("broker-x")  # serves no cached topic
    await _settle(routes)
    assert sorted(ns.queries) == ["T1", "T2"]


async def test_a_failure_driven_refresh_that_fails_keeps_the_route() -> None:
    ns = InMemoryNameServer({"T": make_route({"broker-a": 2})})
    routes = manager(ns)
    info = await routes.find_publish_info("T", 1000)
    ns.error = RemotingError("down")
    routes.broker_unreachable("broker-a")
    await _settle(routes)
    assert routes.publish_info("T") is info
