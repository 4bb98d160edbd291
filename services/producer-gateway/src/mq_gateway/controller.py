"""Wires the gateway together: the producer core, the gRPC server, start and graceful stop.

Mirrors the 5.x proxy's ProxyStartup/ProducerProcessor wiring. Everything runs on one asyncio loop.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mq_client.auth_admin_calls import AuthAdminCalls
from mq_client.broker_client import BrokerClient
from mq_client.producer import DefaultMQProducer, ProducerConfig, ProducerHooks, TopicAccessList, load_hook
from mq_client.producer.kernel import BrokerTransport
from mq_client.producer.route_manager import NameServerLookup
from mq_common.auth.interceptor import signing_pool
from mq_common.auth.metadata import AuthMetadataProvider, CachingAuthMetadataProvider
from mq_common.channels import DEFAULT_RPC_TIMEOUT_MS, ChannelPool
from mq_common.grpc_server import ServiceServer
from mq_common.logging import get_logger
from mq_common.metrics import NodeIdentity
from mq_common.namesrv_client import NameServerClient
from mq_common.request_context import RequestContextInterceptor
from mq_common.settings import config_from_settings

from mq_gateway.auth import BrokerAuthMetadataProvider, GatewayAuth
from mq_gateway.auth_metrics import AuthMetrics
from mq_gateway.coalescer import CoalescingBrokerTransport
from mq_gateway.grpc_api import SERVICE_NAME, ProducerGatewayServicer, add_to_server, request_limits
from mq_gateway.metrics import GatewayMetrics, ObservedNameServer, ObservedTransport
from mq_gateway.settings import GatewaySettings
from mq_gateway.v2 import servicer as v2_servicer
from mq_gateway.v2.consumer import ConsumerActivity, ConsumerActivityConfig
from mq_gateway.v2.limits import V2Limits
from mq_gateway.v2.metrics import V2RpcMetrics
from mq_gateway.v2.recall import RecallMessageActivity
from mq_gateway.v2.route import RouteActivity
from mq_gateway.v2.send import SendMessageActivity
from mq_gateway.v2.telemetry import TelemetryService
from mq_gateway.v2.transaction_checks import TransactionCheckRelay
from mq_gateway.v2.transactions import TransactionActivities

# The 5.x proxy's grpcMaxInboundMessageSize: a v2 batch of 4 MiB bodies; the handlers enforce the body limit.
MAX_GRPC_MESSAGE_BYTES: Final = 130 * 1024 * 1024

log = get_logger("mq_gateway.controller")


def producer_config(settings: GatewaySettings) -> ProducerConfig:
    """The producer core's config from the gateway settings: every ProducerConfig field they have, by name."""
    return config_from_settings(ProducerConfig, settings)


def v2_limits(settings: GatewaySettings) -> V2Limits:
    """The v2 limits from the gateway settings: every V2Limits field they have, by name."""
    return config_from_settings(V2Limits, settings)


def consumer_config(settings: GatewaySettings) -> ConsumerActivityConfig:
    """The v2 consumer side's limits from the gateway settings: every ConsumerActivityConfig field they have, by name
    (the rest keep the proxy's defaults)."""
    return config_from_settings(ConsumerActivityConfig, settings)


def channel_pool(settings: GatewaySettings) -> ChannelPool:
    """A channel pool over the gateway's outbound TLS settings (plaintext when off) whose calls are signed with
    inner_client_authentication_credentials when set."""
    return signing_pool(settings.tls_client_config(), settings.inner_client_credentials())


def producer_hooks(settings: GatewaySettings) -> ProducerHooks:
    """The topic allow/deny list (when either is set) then the ``hook_plugins``, in that order.
    Raises ValueError / ImportError / TypeError for a plugin that cannot be built."""
    plugins: list[object] = []
    if settings.topic_allow_list or settings.topic_deny_list:
        plugins.append(TopicAccessList(settings.topic_allow_list, settings.topic_deny_list))
    plugins.extend(load_hook(spec) for spec in settings.hook_plugins)
    return ProducerHooks.of(plugins)


class GatewayController:
    """The gateway's parts. Create, ``await start()``, later ``await stop()``; one loop.

    Serves mq.gateway.v1 and apache.rocketmq.v2.MessagingService (``self.v2``; its consumer RPCs go to
    ``consumer``, default a ConsumerActivity over the producer's route view ``producer.routes``, shared by v1, v2
    and the producer, and a channel pool of its own, configured by :func:`consumer_config`) on one server with
    130 MiB message limits.
    ``producer`` given: used as it is (no coalescing, no hooks from the settings). Otherwise one is built from
    the settings over ``namesrv`` / ``transport`` (default: gRPC to ``settings.namesrv_addrs()`` and a
    BrokerClient sending over one Broker.SendStream per broker), the transport wrapped in a
    CoalescingBrokerTransport (``self.coalescer``: the gateway's one batching stage, below queue selection), with
    :func:`producer_hooks`. v1 Send / SendBatch and v2 SendMessage hand each request's messages to the producer as
    one call.
    With authentication_enabled or authorization_enabled, both APIs check every call (``self.auth``, a
    GatewayAuth over ``auth_provider``, default users and ACLs from the cluster's master brokers, cached for
    auth_cache_refresh_ms); the gateway's own calls are signed with inner_client_authentication_credentials.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        producer: DefaultMQProducer | None = None,
        *,
        namesrv: NameServerLookup | None = None,
        transport: BrokerTransport | None = None,
        consumer: v2_servicer.ConsumerActivities | None = None,
        auth_provider: AuthMetadataProvider | None = None,
    ) -> None:
        self.settings = settings
        self._pool: ChannelPool | None = None
        self._auth_pool: ChannelPool | None = None
        self.coalescer: CoalescingBrokerTransport | None = None
        self.metrics: GatewayMetrics | None = None
        if settings.metrics_port:
            node_id = f"{settings.listen_host}:{settings.listen_port}"
            self.metrics = GatewayMetrics(
                NodeIdentity(settings.cluster_name, "proxy", node_id), max_topics=settings.metrics_max_topics
            )
        self.producer = producer or self._build_producer(namesrv, transport)
        observe = self.metrics.observe_rpc if self.metrics is not None else None
        interceptor = RequestContextInterceptor(
            observe=observe, generate=True, self_observed_prefixes=(v2_servicer.METHOD_PREFIX,)
        )
        limits = request_limits(
            max_batch_messages=settings.max_batch_messages, max_concurrent_streams=settings.max_concurrent_streams
        )
        self.server = ServiceServer(
            [SERVICE_NAME, v2_servicer.SERVICE_NAME],
            [interceptor],
            max_message_bytes=MAX_GRPC_MESSAGE_BYTES,
            limits=limits,
            grpc_server=settings.grpc_server,
            tls_enabled=settings.tls_enabled,
        )
        self.auth = self._build_auth(auth_provider)
        self.v2 = self._build_v2(consumer)
        v2_servicer.add_to_server(self.v2, self.server.server)
        assert self._pool is not None
        self.transaction_checks: TransactionCheckRelay = TransactionCheckRelay(
            self.v2.telemetry.sessions,
            self.producer.routes,
            self._pool,
            f"{settings.listen_host}:{settings.listen_port}@{id(self):x}",
        )
        servicer = ProducerGatewayServicer(
            self.producer,
            max_send_timeout_ms=settings.max_send_msg_timeout_ms,
            max_batch_messages=settings.max_batch_messages,
            metrics=self.metrics,
            auth=self.auth,
        )
        add_to_server(servicer, self.server.server)

    def _build_auth(self, provider: AuthMetadataProvider | None) -> GatewayAuth | None:
        settings = self.settings
        if not (settings.authentication_enabled or settings.authorization_enabled):
            return None
        if provider is None:
            pool = self._auth_pool = channel_pool(settings)
            namesrv = NameServerClient(settings.namesrv_addrs(), pool)

            async def masters() -> list[str]:
                return (await namesrv.get_broker_cluster_info()).master_addrs_of_cluster(settings.cluster_name)

            provider = BrokerAuthMetadataProvider(AuthAdminCalls(pool), masters, DEFAULT_RPC_TIMEOUT_MS)
        cached = CachingAuthMetadataProvider(provider, settings.auth_cache_refresh_ms, settings.auth_cache_max_entries)
        observer = AuthMetrics(self.metrics, settings.metrics_max_topics) if self.metrics is not None else None
        return GatewayAuth(settings, cached, observer)

    def _build_v2(self, consumer: v2_servicer.ConsumerActivities | None) -> v2_servicer.MessagingServiceServicer:
        settings = self.settings
        self._pool = channel_pool(settings)
        routes = self.producer.routes  # the one route view of v1, v2 and the producer
        if consumer is None:
            consumer = ConsumerActivity(routes, self._pool, consumer_config(settings))
        limits = v2_limits(settings)
        route = RouteActivity(routes, settings.listen_host, lambda: self.server.port)
        return v2_servicer.MessagingServiceServicer(
            route,
            SendMessageActivity(self.producer, routes, route.message_types, limits),
            TelemetryService(limits, consumer.subscription_group_config),
            consumer,
            metrics=V2RpcMetrics(self.metrics) if self.metrics is not None else None,
            send_timeout_ms=settings.send_msg_timeout_ms,
            auth=self.auth,
            recall=RecallMessageActivity(self.producer),
            transactions=TransactionActivities(self.producer),
        )

    def _build_producer(self, namesrv: NameServerLookup | None, transport: BrokerTransport | None) -> DefaultMQProducer:
        settings = self.settings
        pool = channel_pool(settings)
        broker_client: BrokerClient | None = None
        if transport is None:
            broker_client = transport = BrokerClient(pool)
        inner: BrokerTransport = transport
        lookup: NameServerLookup = namesrv if namesrv is not None else NameServerClient(settings.namesrv_addrs(), pool)
        if self.metrics is not None:
            inner = ObservedTransport(inner, self.metrics, producer_config(settings).retry_response_codes)
            lookup = ObservedNameServer(lookup, self.metrics)
        coalescer = self.coalescer = CoalescingBrokerTransport(
            inner,
            linger_ms=settings.coalesce_linger_ms,
            max_batch_bytes=settings.coalesce_max_batch_bytes,
            max_batch_messages=settings.coalesce_max_batch_messages,
            max_message_batch_bytes=settings.max_message_size_bytes,
        )

        async def close() -> None:
            await coalescer.close()
            if broker_client is not None:
                await broker_client.close()
            await pool.close()

        return DefaultMQProducer(
            producer_config(settings),
            lookup,
            coalescer,
            hooks=producer_hooks(settings),
            on_shutdown=close,
            recaller=broker_client if broker_client is not None else BrokerClient(pool),  # RecallMessage (v1, v2)
        )

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self.server.port

    @property
    def addr(self) -> str:
        """``"host:port"`` clients use (after :meth:`start`)."""
        return f"{self.settings.listen_host}:{self.server.port}"

    async def start(self) -> int:
        """Start the producer, bind ``listen_host:listen_port``, serve. Returns the bound port.

        Raises RuntimeError when the port cannot be bound; MQClientError for a bad producer group."""
        await self.producer.start()
        try:
            port = self.server.bind(
                self.settings.listen_host, self.settings.listen_port, self.settings.tls_server_config()
            )
            self._start_metrics()
            await self.server.start()
            self.transaction_checks.start()
        except BaseException:
            await self.producer.shutdown()
            if self.metrics is not None:
                await asyncio.to_thread(self.metrics.stop_server)
            raise
        return port

    def _start_metrics(self) -> None:
        """Bind the producer gauges and serve /metrics. Raises RuntimeError when the port cannot be bound."""
        if self.metrics is None:
            return
        self.metrics.bind(self.producer)
        try:
            self.metrics.start_server(self.settings.listen_host, self.settings.metrics_port)
        except OSError as exc:
            raise RuntimeError(f"cannot serve metrics on port {self.settings.metrics_port}: {exc}") from exc

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking calls, let in-flight ones finish (``grace_s``, default shutdown_grace_ms), then shut the
        producer down (route refresh task, channels)."""
        grace = self.settings.shutdown_grace_ms / 1000.0 if grace_s is None else grace_s
        await self.transaction_checks.stop()
        await self.server.stop(grace)
        await self.v2.consumer.close()
        await self.producer.shutdown()
        for pool in (self._pool, self._auth_pool):
            if pool is not None:
                await pool.close()
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop_server)
        log.info("gateway_stopped", port=self.server.port)
