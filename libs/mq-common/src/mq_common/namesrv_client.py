"""The one name server client: route and cluster queries with failover, broker (un)registration (an edge module).

Mirrors MQClientAPIImpl's name server calls and org.apache.rocketmq.broker.out.BrokerOuterAPI. Used by the
broker's registrar and by mq_client (route manager, consumer, admin). Runs on the caller's asyncio loop.

Errors: a gRPC status -> mq_common.grpc_errors.transport_error; a non-zero ``code`` ->
mq_common.errors.error_for_code(code, remark).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc

from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool, seconds
from mq_common.errors import TopicNotExistError, error_for_code
from mq_common.failover import Failover
from mq_common.grpc_errors import invoke
from mq_common.protocol.cluster import ClusterInfo
from mq_common.protocol.convert import (
    cluster_info_from_proto,
    registration_to_proto,
    route_from_proto,
    unregister_request_to_proto,
)
from mq_common.protocol.registration import BrokerRegistration, RegisterBrokerResult
from mq_common.protocol.route import TopicRouteData
from mq_common.response_code import ResponseCode

_R = TypeVar("_R")


def check_code(code: int, remark: str, broker_name: str = "") -> None:
    """Raise error_for_code(code, remark, broker_name) unless ``code`` is SUCCESS (0)."""
    if code != ResponseCode.SUCCESS:
        raise error_for_code(code, remark, broker_name)


class NameServerClient:
    """Calls to a list of name servers. Mirrors MQClientAPIImpl's name server calls.

    Each query tries the name servers in turn, starting from the last one that answered; a transport
    failure (RemotingError) moves on to the next, each attempt with its own ``timeout_ms``. A business
    answer from any name server is final. (Un)registration goes to one given name server (a broker
    registers to each of them); a topic deletion goes to every name server. Raises MQClientError
    (RPC_ADDR_IS_NULL, -1002) when ``namesrv_addrs`` has no address.
    """

    def __init__(self, namesrv_addrs: Sequence[str], pool: ChannelPool) -> None:
        self._failover_addrs = Failover(namesrv_addrs, "name server")
        self._addrs: tuple[str, ...] = self._failover_addrs.addrs
        self._pool = pool

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        return self._addrs

    @property
    def current_addr(self) -> str:
        """The name server tried first by the next query (the last one that answered)."""
        return self._addrs[self._failover_addrs.index]

    def _stub(self, addr: str) -> namesrv_pb2_grpc.NameServerAsyncStub:
        return namesrv_pb2_grpc.NameServerStub(self._pool.get(addr))

    async def _failover(
        self,
        attempt: Callable[[namesrv_pb2_grpc.NameServerAsyncStub, str, float], Awaitable[_R]],
        timeout_ms: int,
    ) -> _R:
        return await self._failover_addrs.call(lambda addr: attempt(self._stub(addr), addr, seconds(timeout_ms)))

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC. Raises TopicNotExistError (17) when the name server has no route,
        RemotingError/RemotingTimeoutError when no name server answered."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, timeout_s: float) -> TopicRouteData:
            request = namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic)
            resp = await invoke(stub.GetRouteInfoByTopic(request, timeout=timeout_s), addr)
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                raise TopicNotExistError(resp.remark)
            check_code(resp.code, resp.remark)
            return route_from_proto(resp.route)

        return await self._failover(attempt, timeout_ms)

    async def get_broker_cluster_info(self, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO. Raises RemotingError when no name server answered."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, timeout_s: float) -> ClusterInfo:
            request = namesrv_pb2.GetBrokerClusterInfoRequest()
            resp = await invoke(stub.GetBrokerClusterInfo(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark)
            return cluster_info_from_proto(resp)

        return await self._failover(attempt, timeout_ms)

    async def get_all_topic_list(self, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic with a route, sorted. Raises RemotingError."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, timeout_s: float) -> list[str]:
            request = namesrv_pb2.GetAllTopicListRequest()
            resp = await invoke(stub.GetAllTopicList(request, timeout=timeout_s), addr)
            check_code(resp.code, resp.remark)
            return sorted(resp.topic_list)

        return await self._failover(attempt, timeout_ms)

    async def register_broker(
        self, namesrv_addr: str, registration: BrokerRegistration, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> RegisterBrokerResult:
        """REGISTER_BROKER to one name server (no failover).

        Raises InvalidParameterError (29) for a refused request, RemotingError on transport failure."""
        request = registration_to_proto(registration)
        stub = self._stub(namesrv_addr)
        resp = await invoke(stub.RegisterBroker(request, timeout=seconds(timeout_ms)), namesrv_addr)
        check_code(resp.code, resp.remark)
        return RegisterBrokerResult(ha_server_addr=resp.ha_server_addr, master_addr=resp.master_addr)

    async def unregister_broker(
        self, namesrv_addr: str, registration: BrokerRegistration, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> None:
        """UNREGISTER_BROKER of ``registration``'s broker at one name server. Raises like :meth:`register_broker`."""
        request = unregister_request_to_proto(registration)
        stub = self._stub(namesrv_addr)
        resp = await invoke(stub.UnregisterBroker(request, timeout=seconds(timeout_ms)), namesrv_addr)
        check_code(resp.code, resp.remark)

    async def delete_topic_in_namesrv(
        self, topic: str, cluster_name: str | None = None, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> tuple[str, ...]:
        """DELETE_TOPIC_IN_NAMESRV at every name server, all at once; the addresses asked, in order.

        Without ``cluster_name`` the whole route goes, else the QueueData of that cluster's brokers; an unknown
        topic is no error. Mirrors MQClientAPIImpl#deleteTopicInNameServer called for each name server
        (DefaultMQAdminExt#deleteTopicInNameServer), except that every name server is asked even when one
        fails. Then raises the first failure in address order: error_for_code's MQBrokerError with the name
        server's code (INVALID_PARAMETER 29 for an illegal topic name), RemotingError/RemotingTimeoutError for a
        name server that did not answer.
        """
        request = namesrv_pb2.DeleteTopicInNamesrvRequest(topic=topic, cluster_name=cluster_name or "")

        async def delete_at(addr: str) -> None:
            resp = await invoke(self._stub(addr).DeleteTopicInNamesrv(request, timeout=seconds(timeout_ms)), addr)
            check_code(resp.code, resp.remark)

        outcomes = await asyncio.gather(*(delete_at(a) for a in self._addrs), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return self._addrs
