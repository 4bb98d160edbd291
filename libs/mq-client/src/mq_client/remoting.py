"""The client adapter: gRPC channels, name server / broker / gateway calls, proto <-> domain translation.

With mq_client.send_stream, the only mq_client modules that touch generated protobuf types. Everything here
runs on the caller's asyncio loop (channels belong to the loop that created them).

Error mapping (Mirrors NettyRemotingClient#invokeSync + MQClientAPIImpl's response handling):
- a gRPC status -> mq_client.grpc_errors.transport_error (RemotingTimeoutError, InvalidParameterError,
  RemotingError);
- a non-zero business ``code`` -> mq_common.errors.error_for_code(code, remark, broker_name), raised, except
  for sends, whose per-message codes are returned in BrokerSendResponse.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

import grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.codec import MessageDecodeError, MessageExt, iter_messages
from mq_common.errors import (
    InvalidParameterError,
    MQClientError,
    RemotingError,
    TopicNotExistError,
    error_for_code,
)
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.request_context import outgoing_metadata
from mq_common.response_code import ResponseCode

from mq_client.grpc_errors import transport_error
from mq_client.route import (
    BrokerData,
    ClusterInfo,
    PullStatus,
    QueueData,
    TopicConfig,
    TopicQueueOffset,
    TopicRouteData,
)
from mq_client.send_stream import BrokerSendStream

__all__ = [
    "BrokerClient",
    "BrokerRegistration",
    "BrokerSendRequest",
    "BrokerSendResponse",
    "ChannelPool",
    "GatewayMessage",
    "GatewaySendResult",
    "NameServerClient",
    "PullResult",
    "QueryResult",
    "RegisterBrokerResult",
    "TopicQueueOffset",
    "gateway_send",
]

_R = TypeVar("_R")
DEFAULT_RPC_TIMEOUT_MS: Final = 3000
# gRPC's default reconnect backoff grows to 120 s, during which calls to a restarted peer fail fast with
# UNAVAILABLE; RocketMQ's client reconnects on the next invoke, so cap the backoff low.
MAX_RECONNECT_BACKOFF_MS: Final = 3000
CLIENT_CHANNEL_OPTIONS: Final[list[tuple[str, int]]] = [
    *CHANNEL_OPTIONS,
    ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
]

_PULL_STATUS_FROM_PROTO: Final[Mapping[int, PullStatus]] = {
    broker_pb2.PULL_STATUS_FOUND: PullStatus.FOUND,
    broker_pb2.PULL_STATUS_NO_NEW_MSG: PullStatus.NO_NEW_MSG,
    broker_pb2.PULL_STATUS_NO_MATCHED_MSG: PullStatus.NO_MATCHED_MSG,
    broker_pb2.PULL_STATUS_OFFSET_ILLEGAL: PullStatus.OFFSET_ILLEGAL,
}
# PullAPIWrapper#processPullResult: response codes that carry a pull status instead of an error.
_PULL_STATUS_FROM_CODE: Final[Mapping[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class ChannelPool:
    """One grpc.aio channel per ``"host:port"`` (CLIENT_CHANNEL_OPTIONS), created lazily on first use.

    Mirrors NettyRemotingClient's channelTables. Use and close it on one asyncio loop.
    """

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, addr: str) -> grpc.aio.Channel:
        """The channel to ``addr`` (``"host:port"``), creating it if needed. Never blocks; never raises for a
        dead peer (calls on it fail with UNAVAILABLE). Raises InvalidParameterError for an empty address."""
        channel = self._channels.get(addr)
        if channel is None:
            if not addr:
                raise InvalidParameterError("broker or name server address is empty")
            channel = grpc.aio.insecure_channel(addr, options=CLIENT_CHANNEL_OPTIONS)
            self._channels[addr] = channel
        return channel

    async def close_channel(self, addr: str) -> None:
        """Close and forget the channel to ``addr`` (no-op when there is none)."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        """Close every channel; in-flight calls are cancelled. The pool may be reused afterwards."""
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await channel.close()


async def _invoke(call: Awaitable[_R], addr: str) -> _R:
    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise transport_error(exc, addr) from exc


def _check(code: int, remark: str, broker_name: str = "") -> None:
    if code != ResponseCode.SUCCESS:
        raise error_for_code(code, remark, broker_name)


def _seconds(timeout_ms: int) -> float:
    return max(timeout_ms, 1) / 1000.0


# ---------------------------------------------------------------------------------------------------------
# Name server
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What a broker tells a name server. Mirrors RegisterBrokerRequestHeader + TopicConfigSerializeWrapper.

    ``data_version`` is (state_version, timestamp_ms, counter); ``heartbeat_timeout_ms`` 0 means 120000.
    """

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    topic_configs: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: tuple[int, int, int] = (0, 0, 0)
    ha_server_addr: str = ""
    heartbeat_timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """Mirrors org.apache.rocketmq.remoting.protocol.namesrv.RegisterBrokerResult."""

    ha_server_addr: str
    master_addr: str


def topic_config_to_proto(config: TopicConfig) -> common_pb2.TopicConfig:
    """Domain TopicConfig -> mq.common.v1.TopicConfig."""
    return common_pb2.TopicConfig(
        topic_name=config.topic_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        topic_sys_flag=config.topic_sys_flag,
        order=config.order,
    )


def broker_data_from_proto(msg: namesrv_pb2.BrokerData) -> BrokerData:
    """mq.namesrv.v1.BrokerData -> BrokerData (broker_addrs copied into a plain dict)."""
    return BrokerData(cluster=msg.cluster, broker_name=msg.broker_name, broker_addrs=dict(msg.broker_addrs))


def route_from_proto(msg: namesrv_pb2.TopicRouteData) -> TopicRouteData:
    """mq.namesrv.v1.TopicRouteData -> TopicRouteData (order kept)."""
    return TopicRouteData(
        queue_datas=tuple(
            QueueData(
                broker_name=q.broker_name,
                read_queue_nums=q.read_queue_nums,
                write_queue_nums=q.write_queue_nums,
                perm=q.perm,
                topic_sys_flag=q.topic_sys_flag,
            )
            for q in msg.queue_datas
        ),
        broker_datas=tuple(broker_data_from_proto(b) for b in msg.broker_datas),
        order_topic_conf=msg.order_topic_conf,
    )


def cluster_info_from_proto(msg: namesrv_pb2.GetBrokerClusterInfoResponse) -> ClusterInfo:
    """GetBrokerClusterInfoResponse -> ClusterInfo (broker names of a cluster sorted)."""
    return ClusterInfo(
        broker_addr_table={name: broker_data_from_proto(b) for name, b in msg.broker_addr_table.items()},
        cluster_addr_table={name: tuple(sorted(v.broker_names)) for name, v in msg.cluster_addr_table.items()},
        broker_live_table={addr: live.last_update_timestamp_ms for addr, live in msg.broker_live_table.items()},
    )


class NameServerClient:
    """Calls to a list of name servers with failover. Mirrors MQClientAPIImpl's name server calls.

    Each query tries the name servers in turn, starting from the last one that answered; a transport
    failure (RemotingError) moves on to the next, each attempt with its own ``timeout_ms``. A business
    answer from any name server is final. Runs on the caller's asyncio loop.
    """

    def __init__(self, namesrv_addrs: Sequence[str], pool: ChannelPool) -> None:
        addrs = [a.strip() for a in namesrv_addrs if a.strip()]
        if not addrs:
            raise MQClientError("No name server address, please set it", ResponseCode.RPC_ADDR_IS_NULL)
        self._addrs: tuple[str, ...] = tuple(addrs)
        self._pool = pool
        self._index = 0

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        return self._addrs

    @property
    def current_addr(self) -> str:
        """The name server tried first by the next query (the last one that answered)."""
        return self._addrs[self._index]

    def _stub(self, addr: str) -> namesrv_pb2_grpc.NameServerAsyncStub:
        return namesrv_pb2_grpc.NameServerStub(self._pool.get(addr))

    async def _failover(
        self,
        attempt: Callable[[namesrv_pb2_grpc.NameServerAsyncStub, str, float], Awaitable[_R]],
        timeout_ms: int,
    ) -> _R:
        errors: list[str] = []
        for step in range(len(self._addrs)):
            index = (self._index + step) % len(self._addrs)
            addr = self._addrs[index]
            try:
                result = await attempt(self._stub(addr), addr, _seconds(timeout_ms))
            except RemotingError as exc:
                errors.append(exc.remark)
                continue
            self._index = index
            return result
        raise RemotingError("no name server answered: " + "; ".join(errors))

    async def get_route_info_by_topic(self, topic: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC. Raises TopicNotExistError (17) when the name server has no route,
        RemotingError/RemotingTimeoutError when no name server answered."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, seconds: float) -> TopicRouteData:
            request = namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic)
            resp = await _invoke(stub.GetRouteInfoByTopic(request, timeout=seconds), addr)
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                raise TopicNotExistError(resp.remark)
            _check(resp.code, resp.remark)
            return route_from_proto(resp.route)

        return await self._failover(attempt, timeout_ms)

    async def get_broker_cluster_info(self, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO. Raises RemotingError when no name server answered."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, seconds: float) -> ClusterInfo:
            request = namesrv_pb2.GetBrokerClusterInfoRequest()
            resp = await _invoke(stub.GetBrokerClusterInfo(request, timeout=seconds), addr)
            _check(resp.code, resp.remark)
            return cluster_info_from_proto(resp)

        return await self._failover(attempt, timeout_ms)

    async def get_all_topic_list(self, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic with a route, sorted. Raises RemotingError."""

        async def attempt(stub: namesrv_pb2_grpc.NameServerAsyncStub, addr: str, seconds: float) -> list[str]:
            request = namesrv_pb2.GetAllTopicListRequest()
            resp = await _invoke(stub.GetAllTopicList(request, timeout=seconds), addr)
            _check(resp.code, resp.remark)
            return sorted(resp.topic_list)

        return await self._failover(attempt, timeout_ms)

    async def register_broker(
        self, namesrv_addr: str, registration: BrokerRegistration, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> RegisterBrokerResult:
        """REGISTER_BROKER to one name server (a broker registers to each of them; no failover).

        Raises InvalidParameterError (29) for a refused request, RemotingError on transport failure."""
        request = namesrv_pb2.RegisterBrokerRequest(
            cluster_name=registration.cluster_name,
            broker_name=registration.broker_name,
            broker_id=registration.broker_id,
            broker_addr=registration.broker_addr,
            ha_server_addr=registration.ha_server_addr,
            topic_config_table={k: topic_config_to_proto(v) for k, v in registration.topic_configs.items()},
            data_version=common_pb2.DataVersion(
                state_version=registration.data_version[0],
                timestamp_ms=registration.data_version[1],
                counter=registration.data_version[2],
            ),
            heartbeat_timeout_ms=registration.heartbeat_timeout_ms,
        )
        stub = self._stub(namesrv_addr)
        resp = await _invoke(stub.RegisterBroker(request, timeout=_seconds(timeout_ms)), namesrv_addr)
        _check(resp.code, resp.remark)
        return RegisterBrokerResult(ha_server_addr=resp.ha_server_addr, master_addr=resp.master_addr)

    async def unregister_broker(
        self,
        namesrv_addr: str,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> None:
        """UNREGISTER_BROKER at one name server. Raises like :meth:`register_broker`."""
        request = namesrv_pb2.UnregisterBrokerRequest(
            cluster_name=cluster_name, broker_name=broker_name, broker_id=broker_id, broker_addr=broker_addr
        )
        stub = self._stub(namesrv_addr)
        resp = await _invoke(stub.UnregisterBroker(request, timeout=_seconds(timeout_ms)), namesrv_addr)
        _check(resp.code, resp.remark)


# ---------------------------------------------------------------------------------------------------------
# Broker
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerSendRequest:
    """One message to store. Mirrors SendMessageRequestHeader + body.

    ``properties`` is RocketMQ's property string (mq_common.codec.encode_properties); ``born_host`` is
    ``"ip:port"`` or empty (the broker then uses the peer address).
    """

    producer_group: str
    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp_ms: int
    flag: int
    properties: str
    body: bytes
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    reconsume_times: int = 0
    born_host: str = ""


@dataclass(frozen=True, slots=True)
class BrokerSendResponse:
    """A broker's answer to one BrokerSendRequest. Mirrors SendMessageResponseHeader.

    ``code`` 0 = SUCCESS; FLUSH_DISK_TIMEOUT (10), FLUSH_SLAVE_TIMEOUT (12), SLAVE_NOT_AVAILABLE (11) are
    stored-but-not-durable outcomes; any other non-zero code means the message was not stored.
    """

    code: int
    remark: str
    msg_id: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class BrokerBatchRequest:
    """One MessageBatch for one queue. Mirrors SEND_BATCH_MESSAGE's SendMessageRequestHeader + body.

    ``body`` holds every message, encoded by mq_common.batch_codec (MessageDecoder#encodeMessages);
    ``properties`` are the batch's own, appended by the broker to each message's. ``message_count``: how many
    messages ``body`` holds (0: not said); ``queue_free``: no sharding key pins ``queue_id``, any queue of this
    broker will do. Neither goes to the broker: with both, a coalescing transport may merge this batch with others
    for the same broker and topic (mq_gateway.batch_merger).
    """

    producer_group: str
    topic: str
    queue_id: int
    born_timestamp_ms: int
    body: bytes
    properties: str = ""
    sys_flag: int = 0
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    born_host: str = ""
    message_count: int = 0
    queue_free: bool = False


@dataclass(frozen=True, slots=True)
class BrokerBatchResponse:
    """A broker's answer to one BrokerBatchRequest: the code for the whole batch; when stored, the offset msg
    ids joined with commas, the queue, the first queue offset and the number of messages."""

    code: int
    remark: str
    msg_id: str
    queue_id: int
    queue_offset: int
    message_count: int


@dataclass(frozen=True, slots=True)
class PullResult:
    """Mirrors org.apache.rocketmq.client.consumer.PullResult.

    ``messages`` are decoded v1 records (compressed bodies inflated); empty unless ``status`` is FOUND.
    ``next_begin_offset`` is the queue offset to pull from next; ``min_offset``/``max_offset`` bound the
    queue (max is one past the last message).
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...]


def _fill_batch_request(target: broker_pb2.SendMessageBatchRequest, request: BrokerBatchRequest) -> None:
    """Set the fields of ``target`` (a new SendMessageBatchRequest, maybe inside a SendStreamRequest) from
    ``request``."""
    target.producer_group = request.producer_group
    target.topic = request.topic
    target.default_topic = request.default_topic
    target.default_topic_queue_nums = request.default_topic_queue_nums
    target.queue_id = request.queue_id
    target.sys_flag = request.sys_flag
    target.born_timestamp_ms = request.born_timestamp_ms
    target.properties = request.properties
    target.born_host = request.born_host
    target.body = request.body


def _send_request_to_proto(request: BrokerSendRequest) -> broker_pb2.SendMessageRequest:
    return broker_pb2.SendMessageRequest(
        producer_group=request.producer_group,
        topic=request.topic,
        default_topic=request.default_topic,
        default_topic_queue_nums=request.default_topic_queue_nums,
        queue_id=request.queue_id,
        sys_flag=request.sys_flag,
        born_timestamp_ms=request.born_timestamp_ms,
        flag=request.flag,
        properties=request.properties,
        reconsume_times=request.reconsume_times,
        body=request.body,
        born_host=request.born_host,
    )


def _send_response_from_proto(resp: broker_pb2.SendMessageResponse) -> BrokerSendResponse:
    return BrokerSendResponse(
        code=resp.code, remark=resp.remark, msg_id=resp.msg_id, queue_id=resp.queue_id, queue_offset=resp.queue_offset
    )


def pull_result_from_proto(resp: broker_pb2.PullMessageResponse, broker_name: str = "") -> PullResult:
    """PullMessageResponse -> PullResult. Mirrors PullAPIWrapper#processPullResponse.

    SUCCESS uses ``status`` (FOUND when unset); PULL_NOT_FOUND -> NO_NEW_MSG, PULL_RETRY_IMMEDIATELY ->
    NO_MATCHED_MSG, PULL_OFFSET_MOVED -> OFFSET_ILLEGAL; other codes raise error_for_code(...). Raises
    MQClientError (SYSTEM_ERROR) when the message bytes do not decode (CRC checked).
    """
    if resp.code == ResponseCode.SUCCESS and resp.status != broker_pb2.PULL_STATUS_UNSPECIFIED:
        status = _PULL_STATUS_FROM_PROTO[resp.status]
    elif resp.code in _PULL_STATUS_FROM_CODE:
        status = _PULL_STATUS_FROM_CODE[resp.code]
    else:
        raise error_for_code(resp.code, resp.remark, broker_name)
    messages: tuple[MessageExt, ...] = ()
    if status is PullStatus.FOUND and resp.message_bytes:
        try:
            messages = tuple(iter_messages(resp.message_bytes))
        except MessageDecodeError as exc:
            raise MQClientError(f"pulled message bytes do not decode: {exc}", ResponseCode.SYSTEM_ERROR) from exc
    return PullResult(
        status=status,
        next_begin_offset=resp.next_begin_offset,
        min_offset=resp.min_offset,
        max_offset=resp.max_offset,
        messages=messages,
    )


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Messages found by key. Mirrors org.apache.rocketmq.client.QueryResult (plus the broker's index end)."""

    messages: tuple[MessageExt, ...]
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0


def _decode_query_messages(blob: bytes, addr: str) -> tuple[MessageExt, ...]:
    try:
        return tuple(iter_messages(blob))
    except MessageDecodeError as exc:
        raise MQClientError(f"{addr}: queried message bytes do not decode: {exc}", ResponseCode.SYSTEM_ERROR) from exc


class BrokerClient:
    """Calls to brokers by address. Mirrors MQClientAPIImpl's broker calls. Runs on the caller's loop.

    With ``send_stream`` the three send calls go as frames of one SendStream per broker address
    (mq_client.send_stream: about half the broker's gRPC cost of a unary call); a frame-level refusal comes
    back as every message's code, like a business code. Otherwise each is a unary call.
    Transport failures raise RemotingError / RemotingTimeoutError (see the module docstring).
    """

    def __init__(self, pool: ChannelPool, *, send_stream: bool = False) -> None:
        self._pool = pool
        self._stubs: dict[str, tuple[grpc.aio.Channel, broker_pb2_grpc.BrokerAsyncStub]] = {}
        self._send_streams: dict[str, BrokerSendStream] | None = {} if send_stream else None

    def _stub(self, addr: str) -> broker_pb2_grpc.BrokerAsyncStub:
        """The stub of ``addr``'s current channel (one per channel: a stub builds a callable per method)."""
        channel = self._pool.get(addr)
        cached = self._stubs.get(addr)
        if cached is None or cached[0] is not channel:
            cached = self._stubs[addr] = (channel, broker_pb2_grpc.BrokerStub(channel))
        return cached[1]

    def _send_stream(self, addr: str) -> BrokerSendStream | None:
        streams = self._send_streams
        if streams is None:
            return None
        stream = streams.get(addr)
        if stream is None:
            stream = streams[addr] = BrokerSendStream(lambda: self._stub(addr).SendStream(), addr)
        return stream

    async def send_message(self, addr: str, request: BrokerSendRequest, timeout_ms: int) -> BrokerSendResponse:
        """SEND_MESSAGE: one message; the business code is returned, not raised."""
        if self._send_stream(addr) is not None:
            return (await self.send_batch(addr, (request,), timeout_ms))[0]
        call = self._stub(addr).SendMessage(
            _send_request_to_proto(request), timeout=_seconds(timeout_ms), metadata=outgoing_metadata()
        )
        return _send_response_from_proto(await _invoke(call, addr))

    async def send_batch(
        self, addr: str, requests: Sequence[BrokerSendRequest], timeout_ms: int
    ) -> list[BrokerSendResponse]:
        """SendBatch: one RPC (or frame); one response per request, in request order; business codes returned.

        Raises RemotingError when the broker answers with a different number of responses."""
        batch = broker_pb2.SendBatchRequest(requests=[_send_request_to_proto(r) for r in requests])
        stream = self._send_stream(addr)
        if stream is not None:
            answer = await stream.send(broker_pb2.SendStreamRequest(batch=batch), timeout_ms)
            if answer.code != ResponseCode.SUCCESS:
                return [BrokerSendResponse(answer.code, answer.remark, "", 0, 0)] * len(requests)
            resp = answer.batch
        else:
            call = self._stub(addr).SendBatch(batch, timeout=_seconds(timeout_ms), metadata=outgoing_metadata())
            resp = await _invoke(call, addr)
        if len(resp.responses) != len(requests):
            raise RemotingError(f"{addr}: {len(resp.responses)} responses for {len(requests)} sends")
        return [_send_response_from_proto(r) for r in resp.responses]

    async def send_message_batch(self, addr: str, request: BrokerBatchRequest, timeout_ms: int) -> BrokerBatchResponse:
        """SEND_BATCH_MESSAGE: one MessageBatch, one queue, one RPC (or frame); the business code is returned."""
        stream = self._send_stream(addr)
        if stream is not None:
            # filled inside the frame: the body is copied once into it, not into a request and again into the frame
            frame = broker_pb2.SendStreamRequest()
            _fill_batch_request(frame.message_batch, request)
            answer = await stream.send(frame, timeout_ms)
            if answer.code != ResponseCode.SUCCESS:
                return BrokerBatchResponse(answer.code, answer.remark, "", 0, 0, 0)
            resp = answer.message_batch
        else:
            proto = broker_pb2.SendMessageBatchRequest()
            _fill_batch_request(proto, request)
            call = self._stub(addr).SendMessageBatch(proto, timeout=_seconds(timeout_ms), metadata=outgoing_metadata())
            resp = await _invoke(call, addr)
        return BrokerBatchResponse(
            resp.code, resp.remark, resp.msg_id, resp.queue_id, resp.queue_offset, resp.message_count
        )

    async def close(self) -> None:
        """End every send stream (waiting sends get RemotingError). Channels belong to the pool."""
        streams = list((self._send_streams or {}).values())
        if self._send_streams is not None:
            self._send_streams.clear()
        for stream in streams:
            await stream.close()

    async def pull_message(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        subscription: str = "*",
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
        consumer_group: str = "",
    ) -> PullResult:
        """PULL_MESSAGE from one queue at ``queue_offset``, at most ``max_msg_nums`` messages.

        Raises like :func:`pull_result_from_proto` plus transport errors."""
        request = broker_pb2.PullMessageRequest(
            consumer_group=consumer_group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=queue_offset,
            max_msg_nums=max_msg_nums,
            subscription=subscription,
        )
        resp = await _invoke(self._stub(addr).PullMessage(request, timeout=_seconds(timeout_ms)), addr)
        return pull_result_from_proto(resp)

    async def create_topic(self, addr: str, config: TopicConfig, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """UPDATE_AND_CREATE_TOPIC: create or replace. Raises error_for_code(...) on a non-zero code."""
        request = broker_pb2.CreateTopicRequest(topic_config=topic_config_to_proto(config))
        resp = await _invoke(self._stub(addr).CreateTopic(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def update_topic(self, addr: str, config: TopicConfig, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS) -> None:
        """UpdateTopic: like create_topic, but raises TOPIC_NOT_EXIST (17) for an unknown topic."""
        request = broker_pb2.UpdateTopicRequest(topic_config=topic_config_to_proto(config))
        resp = await _invoke(self._stub(addr).UpdateTopic(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)

    async def get_topic_stats(
        self, addr: str, topic: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[TopicQueueOffset]:
        """GET_TOPIC_STATS_INFO: min/max offset per queue of ``topic`` on this broker.

        Raises error_for_code(...) (e.g. TOPIC_NOT_EXIST 17) on a non-zero code."""
        request = broker_pb2.GetTopicStatsRequest(topic=topic)
        resp = await _invoke(self._stub(addr).GetTopicStats(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return [
            TopicQueueOffset(
                broker_name=o.broker_name,
                queue_id=o.queue_id,
                min_offset=o.min_offset,
                max_offset=o.max_offset,
                last_update_timestamp_ms=o.last_update_timestamp_ms,
            )
            for o in resp.offsets
        ]

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int = 64,
        begin_timestamp_ms: int = 0,
        end_timestamp_ms: int = 0,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> QueryResult:
        """QUERY_MESSAGE: messages of ``topic`` whose KEYS or UNIQ_KEY is ``key``, stored within the range
        (``end_timestamp_ms`` 0: no upper bound), newest first, CRC checked. Mirrors MQClientAPIImpl#queryMessage.

        Raises error_for_code(...): MQBrokerError QUERY_NOT_FOUND (22) when nothing matches,
        InvalidParameterError (29) for a bad topic/key/range; MQClientError (SYSTEM_ERROR) when the bytes do not
        decode; transport errors."""
        request = broker_pb2.QueryMessageRequest(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp_ms=begin_timestamp_ms,
            end_timestamp_ms=end_timestamp_ms,
        )
        resp = await _invoke(self._stub(addr).QueryMessage(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return QueryResult(
            _decode_query_messages(resp.message_bytes, addr),
            resp.index_last_update_timestamp_ms,
            resp.index_last_update_phy_offset,
        )

    async def query_message_by_unique_key(
        self, addr: str, topic: str, uniq_key: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> list[MessageExt]:
        """QUERY_MESSAGE with UNIQUE_MSG_QUERY_FLAG: the messages of ``topic`` with that UNIQ_KEY, newest first.

        Raises like :meth:`query_message`."""
        request = broker_pb2.QueryMessageByUniqueKeyRequest(topic=topic, uniq_key=uniq_key)
        resp = await _invoke(self._stub(addr).QueryMessageByUniqueKey(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        return list(_decode_query_messages(resp.message_bytes, addr))

    async def view_message_by_id(
        self, addr: str, offset_msg_id: str, timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    ) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker that stored it. Mirrors MQClientAPIImpl#viewMessage.

        Raises QUERY_NOT_FOUND (22) when no message starts at that offset, InvalidParameterError (29) for a
        malformed id or one stored by another broker, SYSTEM_ERROR (1) for a damaged record."""
        request = broker_pb2.ViewMessageByIdRequest(offset_msg_id=offset_msg_id)
        resp = await _invoke(self._stub(addr).ViewMessageById(request, timeout=_seconds(timeout_ms)), addr)
        _check(resp.code, resp.remark)
        messages = _decode_query_messages(resp.message_bytes, addr)
        if len(messages) != 1:
            raise MQClientError(f"{addr}: ViewMessageById answered {len(messages)} messages", ResponseCode.SYSTEM_ERROR)
        return messages[0]


# ---------------------------------------------------------------------------------------------------------
# Producer gateway (used by mqadmin sendMessage)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GatewayMessage:
    """A message for ProducerGateway.Send. Mirrors org.apache.rocketmq.common.message.Message."""

    topic: str
    body: bytes
    tag: str = ""
    keys: tuple[str, ...] = ()
    sharding_key: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0


@dataclass(frozen=True, slots=True)
class GatewaySendResult:
    """Mirrors org.apache.rocketmq.client.producer.SendResult; ``send_status`` is SendStatus' name."""

    send_status: str
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int


async def gateway_send(
    pool: ChannelPool,
    addr: str,
    message: GatewayMessage,
    producer_group: str = "",
    send_timeout_ms: int = 0,
    timeout_ms: int = 10_000,
) -> GatewaySendResult:
    """ProducerGateway.Send at ``addr``; ``send_timeout_ms`` 0 means the gateway's default (3000 ms).

    Raises error_for_code(code, remark, broker_name) when the gateway reports a failed send, and
    RemotingError / RemotingTimeoutError / InvalidParameterError on transport failure."""
    request = gateway_pb2.SendRequest(
        message=gateway_pb2.Message(
            topic=message.topic,
            body=message.body,
            tag=message.tag,
            keys=list(message.keys),
            sharding_key=message.sharding_key,
            properties=dict(message.properties),
            flag=message.flag,
        ),
        producer_group=producer_group,
        send_timeout_ms=send_timeout_ms,
    )
    stub: gateway_pb2_grpc.ProducerGatewayAsyncStub = gateway_pb2_grpc.ProducerGatewayStub(pool.get(addr))
    resp = await _invoke(stub.Send(request, timeout=_seconds(timeout_ms)), addr)
    result = resp.result
    _check(result.code, result.remark, result.broker_name)
    status = common_pb2.SendStatus.Name(result.send_status).removeprefix("SEND_STATUS_")
    return GatewaySendResult(
        send_status=status,
        msg_id=result.msg_id,
        offset_msg_id=result.offset_msg_id,
        broker_name=result.broker_name,
        queue_id=result.queue_id,
        queue_offset=result.queue_offset,
    )
