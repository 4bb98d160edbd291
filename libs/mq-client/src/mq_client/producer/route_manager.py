"""The producer's route cache: topic -> TopicPublishInfo, broker name -> addresses, refreshed from the name
servers. Mirrors DefaultMQProducerImpl#tryToFindTopicPublishInfo and MQClientInstance's topicRouteTable,
brokerAddrTable, #updateTopicRouteInfoFromNameServer and its pollNameServerInterval (30 s) scheduled task.

A send that fails on a broker (an isolating failure: the broker is unreachable or refused) makes the manager
re-fetch the routes of that broker's topics at once, at most every ``FAILURE_REFRESH_MIN_INTERVAL_MS`` per broker
name, so a broker group whose master failed over (a slave promoted, registered under the same broker name) is
followed within seconds instead of at the next 30 s poll; a changed master address is reported to
``master_changed_listener`` (the producer forgets that broker's fault item). RocketMQ's client waits for the poll.

Lookup order for a topic: the local cache; then the name server; when the name server answers
TOPIC_NOT_EXIST, the route of the default topic (TBW102) with ``min(default_topic_queue_nums, its read
queues)`` queues per broker, so the broker auto-creates the topic on the first send. Concurrent lookups of one
topic share one name server query. Everything runs on the producer's one asyncio loop.

It is also the gateway's one route view (RocketMQ 5 proxy's TopicRouteService / MessageQueueView): :meth:`route`
answers a topic's own TopicRouteData (never TBW102's: the v2 API does not auto-create) to v1, v2 and the producer
alike, from the entry the refresh keeps, looked up again when older than ``poll_name_server_interval_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import Final, Protocol

from mq_common.constants import MixAll
from mq_common.errors import MQClientError, MQError, RemotingError, RemotingTimeoutError, TopicNotExistError
from mq_common.logging import get_logger
from mq_common.protocol import TopicRouteData
from mq_common.response_code import ResponseCode

from mq_client.producer.topic_publish_info import (
    SendWhichQueue,
    TopicPublishInfo,
    default_topic_route,
    topic_route_data_changed,
    topic_route_data_to_publish_info,
)

_log = get_logger("mq_client.producer.route_manager")

FAILURE_REFRESH_MIN_INTERVAL_MS: Final = 1_000


class NameServerLookup(Protocol):
    """The part of :class:`mq_common.namesrv_client.NameServerClient` the producer uses."""

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        """Route of ``topic``; raises TopicNotExistError (17) or RemotingError."""
        ...


class TopicRouteManager:
    """Route cache + name server lookups + periodic refresh for one producer.

    ``rng`` seeds each new topic's round-robin start (ThreadLocalIndex's random start).
    """

    def __init__(
        self,
        namesrv: NameServerLookup,
        *,
        create_topic_key: str = MixAll.DEFAULT_TOPIC,
        default_topic_queue_nums: int = 4,
        mq_client_api_timeout_ms: int = 3000,
        poll_name_server_interval_ms: int = 30_000,
        rng: random.Random | None = None,
    ) -> None:
        self._namesrv = namesrv
        self._create_topic_key = create_topic_key
        self._default_topic_queue_nums = default_topic_queue_nums
        self._api_timeout_ms = mq_client_api_timeout_ms
        self._poll_interval_ms = poll_name_server_interval_ms
        self._rng = rng or random.Random()
        self._publish_info: dict[str, TopicPublishInfo] = {}
        self._routes: dict[str, TopicRouteData] = {}
        # Topic -> when its OWN route (not TBW102's) was last fetched, loop time in s: what route() may answer.
        self._own_route_at_s: dict[str, float] = {}
        self._route_lookups: dict[str, asyncio.Task[None]] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._lookups: dict[str, asyncio.Task[TopicPublishInfo]] = {}
        self._refresh_task: asyncio.Task[None] | None = None
        # Per broker name: the failure-driven refresh running now, and when the last one started (monotonic ms).
        self._failure_refreshes: dict[str, asyncio.Task[None]] = {}
        self._failure_refreshed_at_ms: dict[str, float] = {}
        # Told a broker name whose master address changed in a fetched route. Event loop.
        self.master_changed_listener: Callable[[str], None] | None = None

    # ---- queries -------------------------------------------------------------------------------------

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The cached publish info of ``topic`` (None when never looked up)."""
        return self._publish_info.get(topic)

    def topics(self) -> list[str]:
        """Topics in the cache."""
        return list(self._publish_info)

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master address (id 0) of ``broker_name``. Mirrors MQClientInstance#findBrokerAddressInPublish."""
        addrs = self._broker_addrs.get(broker_name)
        return None if addrs is None else addrs.get(MixAll.MASTER_ID)

    async def route(self, topic: str) -> TopicRouteData:
        """``topic``'s own TopicRouteData: the cached one when fetched less than poll_name_server_interval_ms ago,
        else fetched (concurrent callers share one name server query, bounded by mq_client_api_timeout_ms) and
        kept for the producer too. Raises TopicNotExistError (17) when the name server has no route of the topic
        itself (no TBW102 fallback), RemotingError / RemotingTimeoutError when no name server answered."""
        fetched_at_s = self._own_route_at_s.get(topic)
        if (
            fetched_at_s is not None
            and asyncio.get_running_loop().time() - fetched_at_s < self._poll_interval_ms / 1000
        ):
            return self._routes[topic]
        task = self._route_lookups.get(topic)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._fetch_own(topic), name=f"route-{topic}")
            self._route_lookups[topic] = task
            task.add_done_callback(lambda t: self._route_lookup_done(topic, t))
        await asyncio.shield(task)
        return self._routes[topic]

    async def _fetch_own(self, topic: str) -> None:
        await self.update_topic_route(topic)

    def _route_lookup_done(self, topic: str, task: asyncio.Task[None]) -> None:
        if self._route_lookups.get(topic) is task:
            del self._route_lookups[topic]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter re-raises it

    def invalidate(self, topic: str) -> None:
        """Make the next :meth:`route` of ``topic`` ask the name server (e.g. a broker refused a call for it)."""
        self._own_route_at_s.pop(topic, None)

    async def master_addr(self, topic: str, broker_name: str) -> str:
        """The master address (broker id 0) of ``broker_name`` in ``topic``'s route (:meth:`route`). Raises
        TopicNotExistError (17) without a route, MQClientError(BROKER_NOT_EXIST 211) when the route has no such
        broker or no master (the topic's route is then looked up again on the next call)."""
        data = (await self.route(topic)).broker_data(broker_name)
        addr = data.master_addr() if data is not None else None
        if addr is None:
            self.invalidate(topic)
            raise MQClientError(
                f"broker {broker_name!r} has no master in the route of topic {topic!r}", ResponseCode.BROKER_NOT_EXIST
            )
        return addr

    async def find_publish_info(self, topic: str, timeout_ms: int) -> TopicPublishInfo:
        """The publish info of ``topic``: cached if it has writable queues, else looked up (within
        ``timeout_ms``). The result may still have no queue (``ok()`` false) when the route has none writable.

        Raises TopicNotExistError (17) "No route info of this topic: T" when neither the topic nor TBW102 has
        a route; RemotingError / RemotingTimeoutError when no name server answered in time.
        """
        info = self._publish_info.get(topic)
        if info is not None and info.ok():
            return info
        task = self._lookups.get(topic)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._lookup(topic), name=f"route-lookup-{topic}")
            self._lookups[topic] = task
            task.add_done_callback(lambda t: self._lookup_done(topic, t))
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000.0):
                return await asyncio.shield(task)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"No route info of this topic: {topic}, name server lookup took over {timeout_ms} ms"
            ) from None

    def _lookup_done(self, topic: str, task: asyncio.Task[TopicPublishInfo]) -> None:
        if self._lookups.get(topic) is task:
            del self._lookups[topic]
        if not task.cancelled():
            task.exception()  # retrieved: a caller that timed out never awaits it

    async def _lookup(self, topic: str) -> TopicPublishInfo:
        try:
            await self.update_topic_route(topic)
        except TopicNotExistError:
            try:
                await self.update_topic_route(topic, is_default=True)
            except TopicNotExistError:
                raise TopicNotExistError(f"No route info of this topic: {topic}") from None
        except RemotingError as exc:
            raise type(exc)(f"No route info of this topic: {topic}, {exc.remark}") from exc
        info = self._publish_info.get(topic)
        assert info is not None, "update_topic_route stores the publish info"
        return info

    # ---- updates -------------------------------------------------------------------------------------

    async def update_topic_route(self, topic: str, *, is_default: bool = False) -> bool:
        """Fetch ``topic``'s route (``is_default``: TBW102's, adapted) and store it when it changed or the
        cached publish info has no queue. Returns True when the cache was updated.

        Mirrors MQClientInstance#updateTopicRouteInfoFromNameServer. Raises TopicNotExistError / RemotingError.
        """
        if is_default:
            raw = await self._namesrv.get_route_info_by_topic(self._create_topic_key, self._api_timeout_ms)
            route = default_topic_route(raw, self._default_topic_queue_nums)
            self._own_route_at_s.pop(topic, None)
        else:
            route = await self._namesrv.get_route_info_by_topic(topic, self._api_timeout_ms)
            self._own_route_at_s[topic] = asyncio.get_running_loop().time()
        old_info = self._publish_info.get(topic)
        changed = topic_route_data_changed(self._routes.get(topic), route)
        if not changed and old_info is not None and old_info.ok() and old_info.from_default_topic == is_default:
            return False
        for bd in route.broker_datas:
            old_addrs = self._broker_addrs.get(bd.broker_name)
            self._broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
            old_master = None if old_addrs is None else old_addrs.get(MixAll.MASTER_ID)
            if old_master is not None and old_master != bd.broker_addrs.get(MixAll.MASTER_ID):
                _log.info("broker_master_changed", broker_name=bd.broker_name, old_master=old_master)
                if self.master_changed_listener is not None:
                    self.master_changed_listener(bd.broker_name)
        counter = old_info.send_which_queue if old_info is not None else SendWhichQueue(rng=self._rng)
        info = topic_route_data_to_publish_info(topic, route, counter, from_default_topic=is_default)
        self._routes[topic] = route
        self._publish_info[topic] = info
        _log.info(
            "topic_route_updated",
            topic=topic,
            from_default_topic=is_default,
            queues=len(info.message_queues),
            brokers=sorted({mq.broker_name for mq in info.message_queues}),
        )
        return True

    async def refresh_all(self) -> None:
        """Re-fetch every cached topic's own route; failures are logged and the old route kept.

        Mirrors MQClientInstance#updateTopicRouteInfoFromNameServer() (the 30 s task). A topic still routed
        through TBW102 switches to its own route once the name server knows it.
        """
        for topic in list(self._publish_info):
            try:
                await self.update_topic_route(topic)
            except TopicNotExistError:
                continue
            except MQError as exc:
                _log.warning("topic_route_refresh_failed", topic=topic, error=str(exc))

    def broker_unreachable(self, broker_name: str) -> None:
        """A send to ``broker_name`` failed: re-fetch the routes of the cached topics it serves, in a task,
        unless one runs or started less than FAILURE_REFRESH_MIN_INTERVAL_MS ago. Event loop; never raises."""
        now_ms = asyncio.get_running_loop().time() * 1000.0
        last_ms = self._failure_refreshed_at_ms.get(broker_name)
        if broker_name in self._failure_refreshes or (
            last_ms is not None and now_ms - last_ms < FAILURE_REFRESH_MIN_INTERVAL_MS
        ):
            return
        topics = [
            t for t, route in self._routes.items() if any(bd.broker_name == broker_name for bd in route.broker_datas)
        ]
        if not topics:
            return
        self._failure_refreshed_at_ms[broker_name] = now_ms
        task = asyncio.get_running_loop().create_task(
            self._refresh_topics(topics), name=f"route-failover-{broker_name}"
        )
        self._failure_refreshes[broker_name] = task
        task.add_done_callback(lambda _: self._failure_refreshes.pop(broker_name, None))

    async def _refresh_topics(self, topics: list[str]) -> None:
        for topic in topics:
            try:
                await self.update_topic_route(topic)
            except MQError as exc:
                _log.warning("topic_route_refresh_failed", topic=topic, error=str(exc))

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic refresh task on the running loop (every poll_name_server_interval_ms)."""
        if self._refresh_task is None:
            self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="route-refresh")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval_ms / 1000.0)
            try:
                await self.refresh_all()
            except Exception as exc:  # the task must outlive any one bad refresh
                _log.error("topic_route_refresh_crashed", error=repr(exc))

    async def stop(self) -> None:
        """Stop the refresh task and cancel in-flight lookups."""
        running = [*self._lookups.values(), *self._route_lookups.values(), *self._failure_refreshes.values()]
        tasks = [t for t in [self._refresh_task, *running] if t]
        self._refresh_task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, MQError):
                await task
