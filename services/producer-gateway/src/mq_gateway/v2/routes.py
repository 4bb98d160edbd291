"""Topic routes for the v2 handlers: a bounded cache over the name server, shared by every v2 RPC.

QueryRoute, QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration and the pull API all need a topic's
TopicRouteData (queue data per broker, master addresses); a gateway replica keeps no other state, so any replica can
serve any receipt handle: the handle names its broker, the route names the broker's address. Entries live
``route_ttl_ms`` (the 30 s poll interval of RocketMQ clients); concurrent misses of one topic share one lookup.
Runs on the gateway's asyncio loop. Mirrors org.apache.rocketmq.proxy.service.route.TopicRouteService.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Final

from mq_client.producer.route_manager import NameServerLookup
from mq_common.errors import MQClientError, TopicNotExistError
from mq_common.protocol import TopicRouteData
from mq_common.response_code import ResponseCode

DEFAULT_ROUTE_TTL_MS: Final = 30_000
DEFAULT_MAX_TOPICS: Final = 10_000
LOOKUP_TIMEOUT_MS: Final = 3_000


class TopicRouteCache:
    """Cached ``topic -> TopicRouteData``; at most ``max_topics`` entries (least recently used dropped)."""

    def __init__(
        self,
        lookup: NameServerLookup,
        *,
        route_ttl_ms: int = DEFAULT_ROUTE_TTL_MS,
        max_topics: int = DEFAULT_MAX_TOPICS,
    ) -> None:
        assert route_ttl_ms > 0
        assert max_topics > 0
        self._lookup = lookup
        self._ttl_s = route_ttl_ms / 1000.0
        self._max_topics = max_topics
        self._routes: OrderedDict[str, tuple[float, TopicRouteData]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[TopicRouteData]] = {}

    async def route(self, topic: str) -> TopicRouteData:
        """The route of ``topic`` (from the cache when younger than the TTL). Raises TopicNotExistError (17) when
        the name server has none, RemotingError when no name server answers."""
        now = time.monotonic()
        entry = self._routes.get(topic)
        if entry is not None and now - entry[0] < self._ttl_s:
            self._routes.move_to_end(topic)
            return entry[1]
        pending = self._pending.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[TopicRouteData] = asyncio.get_running_loop().create_future()
        self._pending[topic] = future
        try:
            route = await self._lookup.get_route_info_by_topic(topic, LOOKUP_TIMEOUT_MS)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: waiters re-raise it, nobody else needs to
            raise
        finally:
            del self._pending[topic]
        future.set_result(route)
        self._store(topic, route)
        return route

    def _store(self, topic: str, route: TopicRouteData) -> None:
        self._routes[topic] = (time.monotonic(), route)
        self._routes.move_to_end(topic)
        while len(self._routes) > self._max_topics:
            self._routes.popitem(last=False)

    def invalidate(self, topic: str) -> None:
        """Forget ``topic``'s route (the next call looks it up again), e.g. after a broker refused a call."""
        self._routes.pop(topic, None)

    async def master_addr(self, topic: str, broker_name: str) -> str:
        """The master address (broker id 0) of ``broker_name`` in ``topic``'s route. Raises TopicNotExistError (17)
        without a route, MQClientError(BROKER_NOT_EXIST 211) when the route has no such broker or no master."""
        route = await self.route(topic)
        data = route.broker_data(broker_name)
        addr = data.master_addr() if data is not None else None
        if addr is None:
            self.invalidate(topic)
            raise MQClientError(
                f"broker {broker_name!r} has no master in the route of topic {topic!r}", ResponseCode.BROKER_NOT_EXIST
            )
        return addr


__all__ = ["DEFAULT_ROUTE_TTL_MS", "TopicNotExistError", "TopicRouteCache"]
