"""A minimal pull consumer: list a topic's queues, pull messages of one queue from an offset.

Mirrors org.apache.rocketmq.client.consumer.DefaultMQPullConsumer (fetchSubscribeMessageQueues, pull, minOffset,
maxOffset, searchOffset: MQAdminImpl's queue calls) and DefaultLitePullConsumer's pull path (long polling,
commit offset piggy-backed), plus PullAPIWrapper#processPullResult's client-side tag filter and its choice of
broker (mq_client.consumer.pull_node: the master, the slave a pull answer suggested, a slave while the master is
away; commit offsets go to masters only). Offsets are the caller's business (no offset store, no rebalance:
mq_client.consumer.lite_pull_consumer builds those on top). Runs on the caller's asyncio loop; one PullConsumer
per loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self

from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import MQClientError, RemotingError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import (
    ConsumerSendMsgBackRequestHeader,
    MessageQueue,
    PullResult,
    TopicQueueOffset,
    TopicRouteData,
)
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig

from mq_client.broker_client import BrokerClient
from mq_client.consumer.pull_node import FindBrokerResult, PullNodeTable
from mq_client.consumer_calls import ConsumerBrokerCalls

DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
SUB_ALL: Final = "*"
# DefaultMQPullConsumer: consumerPullTimeoutMillis 10 s; MessageStoreConfig.maxTransferCountOnMessageInMemory.
DEFAULT_PULL_TIMEOUT_MS: Final = 10_000
MAX_PULL_NUMS: Final = 1024


def parse_subscription(subscription: str) -> frozenset[str]:
    """Tags of a subscription expression; empty set means every tag. Mirrors FilterAPI#buildSubscriptionData.

    ``"*"`` or blank -> all; ``"TagA || TagB"`` -> {"TagA", "TagB"}.
    """
    expr = subscription.strip()
    if not expr or expr == SUB_ALL:
        return frozenset()
    return frozenset(t.strip() for t in expr.split("||") if t.strip())


def filter_by_tags(messages: Sequence[MessageExt], tags: frozenset[str]) -> tuple[MessageExt, ...]:
    """Keep messages whose TAGS property is in ``tags`` (all when ``tags`` is empty)."""
    if not tags:
        return tuple(messages)
    return tuple(m for m in messages if m.tags is not None and m.tags in tags)


@dataclass(frozen=True, slots=True)
class _PullArgs:
    mq: MessageQueue
    offset: int
    max_nums: int
    subscription: str
    commit_offset: int | None
    suspend_timeout_ms: int
    timeout_ms: int


class PullConsumer:
    """Pull messages from chosen queues. Mirrors DefaultMQPullConsumer / DefaultLitePullConsumer#pull.

    Routes come from the name servers (failover as in NameServerClient) and are cached per topic; a
    transport failure on a broker refreshes the topic's route and retries once if the broker's address
    changed. Not safe to share between loops.
    """

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        consumer_group: str = DEFAULT_CONSUMER_GROUP,
        *,
        pool: ChannelPool | None = None,
        pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS,
        route_timeout_ms: int = 3000,
        tls: TlsClientConfig | None = None,
    ) -> None:
        """``tls`` makes the own ChannelPool (when ``pool`` is None) a TLS one. Raises MQClientError
        (RPC_ADDR_IS_NULL) when ``namesrv_addrs`` is empty."""
        self._own_pool = pool is None
        self._pool = ChannelPool(tls) if pool is None else pool
        self._namesrv = NameServerClient(namesrv_addrs, self._pool)
        self._broker = BrokerClient(self._pool)
        self._calls = ConsumerBrokerCalls(self._pool)
        self.consumer_group = consumer_group
        self.pull_timeout_ms = pull_timeout_ms
        self.route_timeout_ms = route_timeout_ms
        self._routes: dict[str, TopicRouteData] = {}
        self.pull_nodes = PullNodeTable()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def refresh_route(self, topic: str) -> TopicRouteData:
        """Fetch ``topic``'s route from the name servers and cache it.

        Raises TopicNotExistError (17) or RemotingError when no name server answered."""
        route = await self._namesrv.get_route_info_by_topic(topic, self.route_timeout_ms)
        self._routes[topic] = route
        return route

    async def route(self, topic: str) -> TopicRouteData:
        """``topic``'s cached route, fetched when not cached (raises like :meth:`refresh_route`)."""
        route = self._routes.get(topic)
        return route if route is not None else await self.refresh_route(topic)

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``: ``read_queue_nums`` per broker group in a fresh route, sorted.

        Mirrors DefaultMQPullConsumer#fetchSubscribeMessageQueues. Raises TopicNotExistError (17) when the
        name server has no route, MQClientError (TOPIC_NOT_EXIST) when the route has no readable queue."""
        queues = (await self.refresh_route(topic)).read_queues(topic)
        if not queues:
            raise MQClientError(f"Can not find Message Queue for this topic, {topic}", ResponseCode.TOPIC_NOT_EXIST)
        return queues

    async def find_broker_addr(self, broker_name: str, topic: str, *, refresh: bool = False) -> str:
        """The address (master first) of ``broker_name`` in ``topic``'s route.

        Raises MQClientError (BROKER_NOT_EXIST, 211) when the route has no such broker group."""
        route = await (self.refresh_route(topic) if refresh else self.route(topic))
        addr = route.find_broker_addr(broker_name)
        if addr is None and not refresh:
            addr = (await self.refresh_route(topic)).find_broker_addr(broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist", ResponseCode.BROKER_NOT_EXIST)
        return addr

    async def find_master_addr(self, broker_name: str, topic: str) -> str:
        """The master's address of ``broker_name`` (route refreshed once when the cached one has none): where
        offsets are committed. Raises MQClientError (BROKER_NOT_EXIST, 211) while the group has no master online."""
        data = (await self.route(topic)).broker_data(broker_name)
        addr = data.master_addr() if data is not None else None
        if addr is None:
            data = (await self.refresh_route(topic)).broker_data(broker_name)
            addr = data.master_addr() if data is not None else None
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] has no master online", ResponseCode.BROKER_NOT_EXIST)
        return addr

    async def find_pull_broker(self, mq: MessageQueue, *, refresh: bool = False) -> FindBrokerResult:
        """Where to pull ``mq`` from now (:attr:`pull_nodes`' suggestion, findBrokerAddressInSubscribe's
        fallbacks); the route is refreshed once when it has no address. Raises MQClientError (BROKER_NOT_EXIST)."""
        route = await (self.refresh_route(mq.topic) if refresh else self.route(mq.topic))
        found = self.pull_nodes.select(mq, route.broker_data(mq.broker_name))
        if found is None and not refresh:
            return await self.find_pull_broker(mq, refresh=True)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist", ResponseCode.BROKER_NOT_EXIST)
        return found

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        subscription: str = SUB_ALL,
        *,
        commit_offset: int | None = None,
        suspend_timeout_ms: int = 0,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Pull at most ``max_nums`` messages of ``mq`` starting at queue ``offset``.

        ``subscription`` is ``"*"`` or ``"TagA || TagB"``; the broker filters by tag hash and this method
        again by tag (messages of other tags are dropped, ``next_begin_offset`` still moves past them).
        ``commit_offset``: also commit this offset of the consumer group (PullSysFlag's commitOffset);
        ``suspend_timeout_ms`` > 0: long polling, the broker holds the call up to that long when nothing is
        there (PullSysFlag's suspend); ``timeout_ms``: the call's deadline (default ``pull_timeout_ms``; with
        long polling it must exceed ``suspend_timeout_ms``, as consumerTimeoutMillisWhenSuspend does).
        Bodies stored compressed are inflated. The broker is chosen per queue as mq_client.consumer.pull_node says
        (``commit_offset`` is dropped when that is a slave); the answer's suggestion is kept for the next pull.
        Raises MQClientError (INVALID_PARAMETER) for a negative
        offset or ``max_nums`` outside 1..1024, MQClientError (BROKER_NOT_EXIST) for an unknown broker, the
        broker's error (error_for_code) for other non-pull codes, RemotingError/RemotingTimeoutError.
        """
        if offset < 0:
            raise MQClientError(f"offset < 0: {offset}", ResponseCode.INVALID_PARAMETER)
        if not 0 < max_nums <= MAX_PULL_NUMS:
            raise MQClientError(
                f"maxNums out of range [1, {MAX_PULL_NUMS}]: {max_nums}", ResponseCode.INVALID_PARAMETER
            )
        tags = parse_subscription(subscription)
        request = _PullArgs(
            mq, offset, max_nums, subscription, commit_offset, suspend_timeout_ms, timeout_ms or self.pull_timeout_ms
        )
        found = await self.find_pull_broker(mq)
        try:
            result = await self._pull_from(found, request)
        except RemotingError:
            again = await self.find_pull_broker(mq, refresh=True)
            if again.broker_addr == found.broker_addr:
                raise
            result = await self._pull_from(again, request)
        self.pull_nodes.update(mq, result.suggest_which_broker_id)
        if not tags:
            return result
        return dataclasses.replace(result, messages=filter_by_tags(result.messages, tags))

    async def _pull_from(self, found: FindBrokerResult, args: _PullArgs) -> PullResult:
        return await self._broker.pull_message(
            found.broker_addr,
            args.mq.topic,
            args.mq.queue_id,
            args.offset,
            args.max_nums,
            subscription=args.subscription.strip() or SUB_ALL,
            timeout_ms=args.timeout_ms,
            consumer_group=self.consumer_group or DEFAULT_CONSUMER_GROUP,
            commit_offset=None if found.slave else args.commit_offset,
            suspend_timeout_ms=args.suspend_timeout_ms,
        )

    async def queue_offsets(self, mq: MessageQueue) -> TopicQueueOffset:
        """``mq``'s min/max offsets (max: one past the last message) from its broker's GetTopicStats; an empty
        queue the broker does not list counts as 0/0. Mirrors MQAdminImpl#minOffset / #maxOffset. Raises
        MQClientError (BROKER_NOT_EXIST), error_for_code(...) (TOPIC_NOT_EXIST 17), transport errors."""
        addr = await self.find_broker_addr(mq.broker_name, mq.topic)
        for stats in await self._broker.get_topic_stats(addr, mq.topic, self.route_timeout_ms):
            if stats.queue_id == mq.queue_id:
                return stats
        return TopicQueueOffset(mq.broker_name, mq.queue_id, 0, 0, 0)

    async def max_offset(self, mq: MessageQueue) -> int:
        """One past ``mq``'s last message. Mirrors DefaultMQPullConsumer#maxOffset; raises like
        :meth:`queue_offsets`."""
        return (await self.queue_offsets(mq)).max_offset

    async def min_offset(self, mq: MessageQueue) -> int:
        """``mq``'s first offset still stored. Mirrors #minOffset; raises like :meth:`queue_offsets`."""
        return (await self.queue_offsets(mq)).min_offset

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (max offset when all are older).
        Mirrors DefaultMQPullConsumer#searchOffset; raises error_for_code(...) and transport errors."""
        addr = await self.find_broker_addr(mq.broker_name, mq.topic)
        return await self._calls.search_offset_by_timestamp(
            addr, mq.topic, mq.queue_id, timestamp_ms, self.route_timeout_ms
        )

    async def send_message_back(
        self,
        msg: MessageExt,
        delay_level: int = 0,
        broker_name: str | None = None,
        max_reconsume_times: int | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: give ``msg`` back for this consumer group, to the broker ``broker_name`` (route
        lookup) or, when None, the broker at the message's store host. It comes again through
        ``%RETRY%<group>`` with reconsume_times + 1, or goes to ``%DLQ%<group>`` once past
        ``max_reconsume_times`` (None: the group's retryMaxTimes) or at once for ``delay_level`` < 0. Mirrors
        DefaultMQPullConsumer#sendMessageBack / MQClientAPIImpl#consumerSendMessageBack.

        Raises the broker's error (error_for_code, e.g. SUBSCRIPTION_GROUP_NOT_EXIST 26, SYSTEM_ERROR for an
        offset that holds no message), MQClientError (BROKER_NOT_EXIST), transport errors."""
        if broker_name is None:
            host, port = msg.store_host
            addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        else:
            addr = await self.find_broker_addr(broker_name, msg.topic)
        header = ConsumerSendMsgBackRequestHeader(
            group=self.consumer_group,
            offset=msg.commit_log_offset,
            delay_level=delay_level,
            origin_msg_id=msg.uniq_key or msg.offset_msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self._broker.consumer_send_msg_back(addr, header, self.pull_timeout_ms)

    async def close(self) -> None:
        """Close the channels (only when this consumer created the pool) and forget cached routes."""
        self._routes.clear()
        if self._own_pool:
            await self._pool.close()
