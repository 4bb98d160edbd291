"""The admin client's base: channels, the name server calls and the broker targets every operation starts from.

Mirrors the name server part of org.apache.rocketmq.tools.admin.DefaultMQAdminExt (examineBrokerClusterInfo,
fetchAllTopicList, examineTopicRouteInfo), its fetchBrokerRuntimeStats and CommandUtil#fetchMasterAddrByClusterName.
The operations build on it: mq_client.admin.consumer_admin (consumer side) and mq_client.admin.admin_client (topics,
messages, sends). Runs on the caller's asyncio loop; errors are the typed mq_common.errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from types import TracebackType
from typing import Final, Self, TypeVar

from mq_common.auth.interceptor import signing_interceptors
from mq_common.auth.settings import Credentials
from mq_common.channels import ChannelPool
from mq_common.constants import MixAll
from mq_common.errors import MQClientError, MQError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import ClusterInfo, TopicRouteData
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig

from mq_client.broker_client import BrokerClient
from mq_client.consumer import PullConsumer
from mq_client.consumer_admin_calls import ConsumerAdminCalls

DEFAULT_GATEWAY_ADDR: Final = "127.0.0.1:8081"
DEFAULT_ADMIN_TIMEOUT_MS: Final = 5000
CLUSTER_NOT_FOUND_REMARK: Final = (
    "Make sure the specified clusterName exists or the name server connected to is correct."
)
_T = TypeVar("_T")


class AdminBase:
    """Channels, clients and name server queries of the admin client (see MQAdminClient, which extends it).

    ``namesrv_addrs`` are tried with failover; ``gateway_addr`` is the producer gateway used for sends;
    ``timeout_ms`` bounds each RPC. Use as ``async with ...`` or call :meth:`close`. The admin's pulls use
    RocketMQ's tools group (MixAll.TOOLS_CONSUMER_GROUP).
    """

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        *,
        gateway_addr: str = DEFAULT_GATEWAY_ADDR,
        timeout_ms: int = DEFAULT_ADMIN_TIMEOUT_MS,
        tls: TlsClientConfig | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        """``tls``: TLS for every channel (None: plaintext); ``credentials``: sign every call (SigningInterceptor),
        as a cluster with authentication on requires of admin calls. Raises MQClientError (RPC_ADDR_IS_NULL) when
        ``namesrv_addrs`` is empty."""
        self._pool = ChannelPool(tls, signing_interceptors(credentials))
        self._namesrv = NameServerClient(namesrv_addrs, self._pool)
        self._broker = BrokerClient(self._pool)
        self._calls = ConsumerAdminCalls(self._pool)
        self._consumer = PullConsumer(
            namesrv_addrs, MixAll.TOOLS_CONSUMER_GROUP, pool=self._pool, route_timeout_ms=timeout_ms
        )
        self.gateway_addr = gateway_addr
        self.timeout_ms = timeout_ms

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every channel."""
        await self._consumer.close()
        await self._pool.close()

    async def cluster_list(self) -> ClusterInfo:
        """Brokers per cluster with their last heartbeat. Mirrors DefaultMQAdminExt#examineBrokerClusterInfo."""
        return await self._namesrv.get_broker_cluster_info(self.timeout_ms)

    async def broker_runtime_infos(self, addrs: Sequence[str]) -> dict[str, dict[str, str] | MQError]:
        """Each broker's runtime KV table (GET_BROKER_RUNTIME_INFO), asked at once, by address; a broker that fails
        (no answer: RemotingError; a refusal such as NO_PERMISSION 16) maps to its MQError. Mirrors
        DefaultMQAdminExt#fetchBrokerRuntimeStats as ClusterListSubCommand calls it for every broker."""
        calls = [self._broker.get_broker_runtime_info(addr, self.timeout_ms) for addr in addrs]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        tables: dict[str, dict[str, str] | MQError] = {}
        for addr, outcome in zip(addrs, outcomes, strict=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, MQError):
                raise outcome
            tables[addr] = outcome
        return tables

    async def topic_list(self) -> list[str]:
        """Every topic with a route, sorted. Mirrors DefaultMQAdminExt#fetchAllTopicList."""
        return await self._namesrv.get_all_topic_list(self.timeout_ms)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """``topic``'s route. Mirrors #examineTopicRouteInfo. Raises TopicNotExistError (17)."""
        return await self._namesrv.get_route_info_by_topic(topic, self.timeout_ms)

    async def resolve_broker_addrs(self, broker_addr: str | None = None, cluster_name: str | None = None) -> list[str]:
        """``[broker_addr]``, or the master addresses of ``cluster_name`` sorted (exactly one must be given): the
        ``-b`` / ``-c`` targets of the update/delete verbs. Mirrors CommandUtil#fetchMasterAddrByClusterName.

        Raises MQClientError INVALID_PARAMETER (29) unless exactly one is given, MQClientError BROKER_NOT_EXIST
        (211) when the cluster has no master, RemotingError when no name server answers."""
        if (broker_addr is None) == (cluster_name is None):
            raise MQClientError(
                "set exactly one of brokerAddr (-b) and clusterName (-c)", ResponseCode.INVALID_PARAMETER
            )
        if broker_addr is not None:
            return [broker_addr]
        assert cluster_name is not None
        addrs = sorted((await self.cluster_list()).master_addrs_of_cluster(cluster_name))
        if not addrs:
            raise MQClientError(f"{CLUSTER_NOT_FOUND_REMARK} cluster: {cluster_name}", ResponseCode.BROKER_NOT_EXIST)
        return addrs

    async def route_addrs(self, topic: str) -> list[str]:
        """The address (master first) of every broker group of ``topic``'s route, sorted. Raises
        TopicNotExistError (17) without a route, RemotingError when no name server answers."""
        route = await self.topic_route(topic)
        return sorted({a for b in route.broker_datas if (a := b.select_broker_addr()) is not None})

    async def all_master_addrs(self) -> list[str]:
        """The master address of every broker group of every cluster, sorted (BROKER_NOT_EXIST 211 when none)."""
        info = await self.cluster_list()
        addrs = sorted({a for cluster in info.cluster_addr_table for a in info.master_addrs_of_cluster(cluster)})
        if not addrs:
            raise MQClientError("no master broker registered in the name server", ResponseCode.BROKER_NOT_EXIST)
        return addrs


async def gather_answers(calls: Sequence[Awaitable[_T]], *, ignore_code: int) -> list[_T]:
    """Await ``calls`` (one per broker) at once; the answers, in order. An MQError with ``ignore_code`` (the
    broker's "none here") counts as no answer; other errors are raised (the first) only when every call failed
    with one. Other exceptions propagate."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    answers: list[_T] = []
    errors: list[MQError] = []
    for outcome in outcomes:
        if isinstance(outcome, MQError):
            if outcome.code != ignore_code:
                errors.append(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            answers.append(outcome)
    if errors and len(errors) == len(outcomes):
        raise errors[0]
    return answers
