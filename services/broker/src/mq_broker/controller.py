"""BrokerController: builds and runs one broker (store, topic table, consumer state, processors, gRPC server,
registration).

Mirrors org.apache.rocketmq.broker.BrokerController (#initialize, #start, #shutdown). Start order: bind the gRPC
port (so STOREHOST carries the real port), start the store (recovery; in a thread), load topics, subscription
groups and consumer offsets (``config/*.json``), serve, start the consumer offset persist task and the 10 s
scan of silent consumers, start registering. Stop order (SIGTERM): refuse new sends, unregister, stop the
server (in-flight calls finish), stop the consumer tasks and persist offsets, groups and topics, shut the store
down cleanly (``abort`` removed). A SLAVE also runs SlaveSynchronize (mq_broker.ha.slave_synchronize) from its
master, whose address the registration answers give (:attr:`BrokerController.master_addresses`). In controller mode
(``enable_controller_mode``) the broker starts read-only and mq_broker.ha.replicas_manager.ReplicasManager gives it
its role (mq_broker.controller_mode: what a master runs and what a slave runs). Runs on the service's asyncio loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from mq.broker.v1 import broker_pb2_grpc, transaction_pb2_grpc
from mq_common.auth.interceptor import signing_pool
from mq_common.auth.model import User, UserType
from mq_common.auth.signature import SignatureVerifier
from mq_common.codec import host_to_bytes
from mq_common.constants import MixAll, PermName
from mq_common.grpc_server import ServiceServer
from mq_common.logging import get_logger
from mq_common.metrics import NodeIdentity
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import BrokerRegistration
from mq_common.request_context import RequestContextInterceptor
from mq_common.tasks import cancel_and_wait
from mq_common.tls import ComponentGuard

from mq_broker.admin_processor import AdminBrokerProcessor
from mq_broker.auth.guard import BrokerAuthGuard
from mq_broker.auth.metadata_manager import AuthMetadataManager
from mq_broker.consumer.consumer_manager import SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_MS, ConsumerManager
from mq_broker.consumer.long_polling import LongPollingService
from mq_broker.consumer.offset_manager import ConsumerOffsetManager
from mq_broker.consumer.pop.service import PopService
from mq_broker.consumer.retry_dlq import RetryDlqService
from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.consumer_manage_processor import ConsumerManageProcessor
from mq_broker.controller_mode import BrokerRoleHooks
from mq_broker.grpc_api import SERVICE_NAME, BrokerServicer, request_limits
from mq_broker.ha.broker_wiring import BrokerHaWiring
from mq_broker.ha.ha_service import HAService
from mq_broker.ha.read_suggestion import ReadSuggestionPolicy
from mq_broker.ha.replicas_manager import ReplicasManager
from mq_broker.ha.runtime_info import broker_runtime_info, broker_version_desc
from mq_broker.ha.slave_synchronize import MetadataTables, SlaveSynchronize
from mq_broker.metrics import BrokerMetrics
from mq_broker.pull_processor import PullMessageProcessor
from mq_broker.registration import BrokerRegistrar, MasterAddresses, NamesrvClient
from mq_broker.schedule.services import ScheduledDelivery
from mq_broker.send_back_processor import ConsumerSendMsgBackProcessor
from mq_broker.send_processor import SendMessageProcessor
from mq_broker.settings import BrokerSettings, pop_config
from mq_broker.store.config import BrokerRole
from mq_broker.store.message_store import DefaultMessageStore, StoreStartError
from mq_broker.topic_config import TopicConfigManager
from mq_broker.transaction.admin_grpc_api import SERVICE_NAME as TRANSACTION_ADMIN_SERVICE_NAME
from mq_broker.transaction.admin_grpc_api import TransactionAdminServicer
from mq_broker.transaction.check_service import TransactionalMessageCheckService
from mq_broker.transaction.grpc_api import SERVICE_NAME as TRANSACTION_CHECK_SERVICE_NAME
from mq_broker.transaction.grpc_api import TransactionCheckServicer
from mq_broker.transaction.open_transactions import OpenTransactions, lowest_offset, min_open_offset
from mq_broker.transaction.producer_manager import ProducerManager
from mq_broker.transaction.transaction_state import TransactionState
from mq_broker.transaction.transactional_message_service import TransactionalMessageService

STORE_IP_RETRY_INTERVAL_S: Final = 1.0

log = get_logger("mq_broker.controller")


class BrokerController:
    """One broker. ``namesrv_client`` defaults to mq_common's gRPC NameServerClient over the settings' name
    servers (none: the broker registers nowhere); tests may pass their own."""

    def __init__(self, settings: BrokerSettings, namesrv_client: NamesrvClient | None = None) -> None:
        self.settings = settings
        # Name server calls signed with the inner credentials: with authentication on, a name server takes
        # RegisterBroker only from a component certificate or a super user (mq_common.auth.admin_access).
        self._channels = signing_pool(settings.tls_client_config(), settings.inner_client_credentials())
        addrs = settings.namesrv_addr_list
        if namesrv_client is None and addrs:
            namesrv_client = NameServerClient(addrs, self._channels)
        self.namesrv_client: NamesrvClient | None = namesrv_client
        self.port = 0
        self.server: ServiceServer | None = None
        self.store: DefaultMessageStore | None = None
        self.topics: TopicConfigManager | None = None
        self.subscription_groups: SubscriptionGroupManager | None = None
        self.consumer_offsets: ConsumerOffsetManager | None = None
        self.consumer_manager = ConsumerManager(channel_expired_timeout_ms=settings.channel_expired_timeout_ms)
        self.consumer_manage_processor: ConsumerManageProcessor | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self.send_processor: SendMessageProcessor | None = None
        self.servicer: BrokerServicer | None = None
        self.registrar: BrokerRegistrar | None = None
        self.long_polling: LongPollingService | None = None
        self.retry_dlq: RetryDlqService | None = None
        self.pull_processor: PullMessageProcessor | None = None
        self.pop: PopService | None = None
        self.scheduled: ScheduledDelivery | None = None
        self.transaction: TransactionalMessageService | None = None
        self.transaction_state: TransactionState | None = None
        self.transaction_check: TransactionalMessageCheckService | None = None
        self.producer_manager: ProducerManager | None = None
        self.metrics: BrokerMetrics | None = None
        self.auth_metadata: AuthMetadataManager | None = None
        # HAService, SlaveSynchronize, ReplicasManager (mq_broker.ha.broker_wiring).
        self.ha_wiring = BrokerHaWiring(settings, self._channels)
        if settings.metrics_port:
            self.metrics = BrokerMetrics(
                NodeIdentity(settings.cluster_name, "broker", settings.broker_name),
                max_topics=settings.metrics_max_topics,
                flush_disk_type=str(settings.flush_disk_type),
                max_consumer_pairs=settings.metrics_max_consumer_pairs,
            )
        self._version_desc = broker_version_desc()
        self._stopped = False

    @property
    def broker_addr(self) -> str:
        return self.settings.broker_addr(self.port)

    @property
    def master_addresses(self) -> MasterAddresses:
        """The group's master as the name servers last named it (mq_broker.registration.MasterAddresses): the one
        source of SlaveSynchronize (``master_addr``) and of the HAClient (``ha_server_addr``); empty on a master,
        before the first registration answer, and while no master is online. In controller mode the controller's
        answer names the master instead (the HAClient follows it; its broker address feeds SlaveSynchronize)."""
        registered = self.registrar.master if self.registrar is not None else MasterAddresses()
        return self.ha_wiring.master_addresses(registered)

    @property
    def ha(self) -> HAService | None:
        return self.ha_wiring.ha

    @property
    def replicas_manager(self) -> ReplicasManager | None:
        return self.ha_wiring.replicas_manager

    @property
    def slave_synchronize(self) -> SlaveSynchronize | None:
        return self.ha_wiring.slave_synchronize

    def runtime_info(self) -> dict[str, str]:
        """GetBrokerRuntimeInfo's KV table (mq_broker.ha.runtime_info). Event loop."""
        assert self.store is not None
        return broker_runtime_info(self.store, self.ha, self._version_desc)

    @property
    def controller_mode(self) -> bool:
        return self.settings.enable_controller_mode

    def _metadata_tables(self) -> MetadataTables:
        topics, groups, offsets = self.topics, self.subscription_groups, self.consumer_offsets
        assert topics is not None
        assert groups is not None
        assert offsets is not None
        config_dir = self.settings.store_path_root_dir / "config"
        return MetadataTables(topics, groups, offsets, config_dir, self.auth_metadata)

    async def start(self) -> int:
        """Start everything; returns the bound port. Raises RuntimeError (bind failure, StoreStartError, bad
        broker_ip, malformed topics.json).
        """
        observe = self.metrics.observe_rpc if self.metrics is not None else None
        s = self.settings
        limits = request_limits(
            max_send_batch_requests=s.max_send_batch_requests,
            max_topic_attributes=s.max_topic_attributes,
            max_topic_attributes_bytes=s.max_topic_attributes_bytes,
            max_concurrent_streams=s.max_concurrent_streams,
        )
        server = ServiceServer(
            [SERVICE_NAME, TRANSACTION_CHECK_SERVICE_NAME, TRANSACTION_ADMIN_SERVICE_NAME],
            [RequestContextInterceptor(observe=observe, self_observed=frozenset({"SendStream"}))],
            limits=limits,
            grpc_server=s.grpc_server,
            tls_enabled=s.tls_enabled,
        )
        try:
            await self._start_on(server)
        except BaseException:
            await server.stop(0)
            if self.metrics is not None:
                await asyncio.to_thread(self.metrics.stop_server)
            raise
        return self.port

    async def _start_on(self, server: ServiceServer) -> None:
        s = self.settings
        self.port = server.bind(s.listen_host, s.listen_port, s.tls_server_config())
        try:
            store_host = host_to_bytes(await resolve_store_ip(s), self.port)
        except ValueError as exc:
            raise RuntimeError(str(exc)) from exc
        store = DefaultMessageStore(s.message_store_config(), store_host)
        await asyncio.to_thread(store.start)  # StoreStartError is a RuntimeError
        self.store = store
        topics = TopicConfigManager(
            s.store_path_root_dir / "config" / "topics.json",
            cluster_name=s.cluster_name,
            broker_name=s.broker_name,
            auto_create_topic_enable=s.auto_create_topic_enable,
            default_topic_queue_nums=s.default_topic_queue_nums,
            auto_create_topic_max_topics=s.auto_create_topic_max_topics,
        )
        config_dir = s.store_path_root_dir / "config"
        groups = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json", auto_create_subscription_group=s.auto_create_subscription_group
        )
        offsets = ConsumerOffsetManager(
            config_dir / "consumerOffset.json", persist_interval_ms=s.flush_consumer_offset_interval_ms
        )
        try:
            for manager in (topics, groups, offsets):
                await asyncio.to_thread(manager.load)
        except ValueError as exc:
            await asyncio.to_thread(store.shutdown)
            raise StoreStartError(str(exc)) from exc
        self.topics, self.subscription_groups, self.consumer_offsets = topics, groups, offsets
        try:
            self.auth_metadata = await self._load_auth(config_dir)
        except ValueError as exc:
            await asyncio.to_thread(store.shutdown)
            raise StoreStartError(str(exc)) from exc
        self._build_processors(server, store, topics)
        self._start_metrics(store, topics)
        assert self.pop is not None
        assert self.scheduled is not None
        if not self.controller_mode:  # in controller mode POP starts when the broker becomes master
            self.pop.start()  # the in-flight table from the revive log, before any request is served
            if store.broker_role is not BrokerRole.SLAVE:
                await self.scheduled.start()
                assert self.transaction_check is not None
                self.transaction_check.start()
        wiring = self.ha_wiring
        await wiring.start_ha(store, self.port, self.metrics)
        await server.start()
        self.server = server
        offsets.start()
        self._scan_task = asyncio.create_task(self._scan_not_active_consumers())
        self._start_registration(topics)
        wiring.start_slave_synchronize(
            self._metadata_tables(), lambda: self.master_addresses.master_addr, lambda: self.broker_addr
        )
        await wiring.start_controller_mode(BrokerRoleHooks(self), lambda: self.broker_addr)

    async def _load_auth(self, config_dir: Path) -> AuthMetadataManager:
        """Users and ACLs (config/users.json, config/acls.json) plus the super users of the settings, created when
        missing (AuthenticationMetadataManagerImpl#initUser). Raises ValueError (unusable file, bad init user)."""
        s = self.settings
        metadata = AuthMetadataManager(config_dir, max_users=s.auth_max_users, max_acls=s.auth_max_acls)
        await asyncio.to_thread(metadata.load)
        inner = s.inner_client_credentials()
        inner_user = User(inner.access_key, inner.secret_key, UserType.SUPER) if inner is not None else None
        wanted = (s.init_user(), inner_user)
        await metadata.init_users(u for u in wanted if u is not None)
        return metadata

    def _auth_guard(self) -> BrokerAuthGuard:
        s = self.settings
        assert self.auth_metadata is not None
        return BrokerAuthGuard(
            self.auth_metadata,
            SignatureVerifier(s.auth_clock_skew_ms, s.auth_replay_window_ms),
            authentication_enabled=s.authentication_enabled,
            authorization_enabled=s.authorization_enabled,
            on_refusal=self.metrics.on_auth_refusal if self.metrics is not None else None,
        )

    async def _scan_not_active_consumers(self) -> None:
        """BrokerController's ClientHousekeepingService: drop silent consumer instances every 10 s."""
        while True:
            await asyncio.sleep(SCAN_NOT_ACTIVE_CHANNEL_INTERVAL_MS / 1000)
            self.consumer_manager.scan_not_active_channel()

    def _build_processors(self, server: ServiceServer, store: DefaultMessageStore, topics: TopicConfigManager) -> None:
        s = self.settings
        self.send_processor = SendMessageProcessor(
            store,
            topics,
            broker_permission=s.broker_permission,
            broker_ip=s.broker_ip,
            cluster_name=s.cluster_name,
            max_message_size_bytes=s.max_message_size_bytes,
        )
        self.scheduled = scheduled = ScheduledDelivery(s, store, topics, s.store_path_root_dir / "config", self.metrics)
        self.send_processor.schedule_hook = scheduled.hook
        self.send_processor.enable_topic_message_type_check = s.enable_topic_message_type_check
        pull, send_back = self._build_pull_side(store, topics)
        assert self.retry_dlq is not None
        self.retry_dlq.schedule_hook = scheduled.hook
        pop = self.pop = self._build_pop(store, topics)
        self.transaction_state = state = TransactionState(store, self.consumer_offsets)
        # CommitLog files holding held timers or open half messages stay (short of forced cleaning)
        store.clean_service.keep_from = lowest_offset(scheduled.min_held_offset, lambda: min_open_offset(store, state))
        self.transaction = TransactionalMessageService(store, state, transaction_timeout_ms=s.transaction_timeout_ms)
        self.transaction_check = TransactionalMessageCheckService(
            store, state, transaction_timeout_ms=s.transaction_timeout_ms,
            transaction_check_interval_ms=s.transaction_check_interval_ms,
            transaction_check_max=s.transaction_check_max,
        )  # fmt: skip
        self.send_processor.transaction_state = state
        self.transaction.metrics = self.transaction_check.metrics = self.metrics
        if self.metrics is not None:
            self.metrics.bind_half_messages(state.open_counts)
        self.producer_manager = ProducerManager(s.broker_name, store.select_one_message_by_offset)
        self.transaction_check.listeners.append(self.producer_manager.check)
        self.transaction_check.pass_listeners.append(self.producer_manager.log_unreached)
        transaction_pb2_grpc.add_TransactionCheckServicer_to_server(
            TransactionCheckServicer(self.producer_manager, self._authorize_transaction_checks), server.server
        )
        transaction_pb2_grpc.add_TransactionAdminServicer_to_server(
            TransactionAdminServicer(OpenTransactions(store, state), self._authorize_admin), server.server
        )
        admin = AdminBrokerProcessor(store, topics, s.broker_name)
        assert self.subscription_groups is not None
        assert self.consumer_offsets is not None
        self.consumer_manage_processor = ConsumerManageProcessor(
            store, topics, self.subscription_groups, self.consumer_offsets, self.consumer_manager, s.broker_name,
            inflight_counter=pop.inflight_count,
        )  # fmt: skip
        observe = self.metrics.observe_rpc if self.metrics is not None else None
        self.servicer = BrokerServicer(
            self.send_processor,
            pull,
            admin,
            observe=observe,
            consumer=self.consumer_manage_processor,
            send_back=send_back,
            pop=pop,
            auth_metadata=self.auth_metadata,
            auth_guard=self._auth_guard(),
            component_identity=ComponentGuard.from_settings(self.settings).component_name,
            metadata_tables=self._metadata_tables(),
            runtime_info=self.runtime_info,
            timer=scheduled.processor,
            transaction=self.transaction,
        )
        broker_pb2_grpc.add_BrokerServicer_to_server(self.servicer, server.server)

    def _authorize_admin(self, context: Any, rpc: str) -> None:
        """Whether the caller of ``context`` may call the admin RPC ``rpc`` (auth on). Raises MQError 16."""
        assert self.servicer is not None
        self.servicer._admin_caller(context, rpc)  # the Broker service's own admin check

    def _authorize_transaction_checks(self, context: Any, groups: frozenset[str]) -> None:
        """Who may register for ``groups``' transaction checks: Pub on each group (auth on). Raises MQError 16."""
        assert self.servicer is not None
        self.servicer.require_pub_on_groups(context, groups)

    def _build_pull_side(
        self, store: DefaultMessageStore, topics: TopicConfigManager
    ) -> tuple[PullMessageProcessor, ConsumerSendMsgBackProcessor]:
        """Long polling woken by the store's dispatch, the pull processor, and send-back to %RETRY%/%DLQ%."""
        s = self.settings
        groups, offsets = self.subscription_groups, self.consumer_offsets
        assert groups is not None
        assert offsets is not None
        self.long_polling = LongPollingService(max_parked=s.max_pull_polling_size)
        store.message_arriving_listener = self.long_polling.notify_message_arriving
        self.retry_dlq = RetryDlqService(store, topics, groups)
        self.pull_processor = pull = PullMessageProcessor(
            store,
            topics,
            broker_permission=s.broker_permission,
            broker_ip=s.broker_ip,
            groups=groups,
            offsets=offsets,
            long_polling=self.long_polling,
            suspend_max_time_ms=s.broker_suspend_max_time_ms,
            is_master=s.broker_id == MixAll.MASTER_ID,
            read_suggestion=ReadSuggestionPolicy(
                broker_id=s.broker_id,
                slave_read_enable=s.slave_read_enable,
                access_message_in_memory_max_ratio_percent=s.access_message_in_memory_max_ratio_percent,
                max_phy_offset=lambda: store.commit_log.max_offset,
                master_online=lambda: self.master_addresses.master_online,
            ),
        )
        send_back = ConsumerSendMsgBackProcessor(
            store, groups, self.retry_dlq, broker_permission=s.broker_permission, broker_ip=s.broker_ip
        )
        return pull, send_back

    def _build_pop(self, store: DefaultMessageStore, topics: TopicConfigManager) -> PopService:
        """POP over the consumer state and the pull side's long polling and send-back (started in _start_on)."""
        assert self.subscription_groups is not None
        assert self.consumer_offsets is not None
        assert self.long_polling is not None
        assert self.retry_dlq is not None
        return PopService(
            pop_config(self.settings), store=store, topics=topics, groups=self.subscription_groups,
            offsets=self.consumer_offsets, long_polling=self.long_polling, retry_dlq=self.retry_dlq,
        )  # fmt: skip

    def _start_metrics(self, store: DefaultMessageStore, topics: TopicConfigManager) -> None:
        """Hook the metrics into the store and the send path and serve /metrics (RuntimeError: port busy)."""
        metrics = self.metrics
        if metrics is None:
            return
        metrics.bind(store, topics)
        if store.flush_service is not None:
            store.flush_service.observer = metrics
        assert self.send_processor is not None
        self.send_processor.metrics = metrics
        if self.pull_processor is not None:
            self.pull_processor.metrics = metrics
        if self.retry_dlq is not None:
            self.retry_dlq.on_send_to_dlq = metrics.on_send_to_dlq
        if self.pop is not None and self.consumer_offsets is not None:
            self.pop.pop_processor.metrics = metrics
            pop = self.pop
            metrics.bind_fifo(pop.context.order_info)
            metrics.bind_consumers(
                self.consumer_offsets, pop.inflight_by_group_topic, inflight_in_queue=pop.inflight_count
            )
        try:
            metrics.start_server(self.settings.listen_host, self.settings.metrics_port)
        except OSError as exc:
            raise RuntimeError(f"cannot serve metrics on port {self.settings.metrics_port}: {exc}") from exc

    def _start_registration(self, topics: TopicConfigManager) -> None:
        s = self.settings
        if self.namesrv_client is None:
            return
        self.registrar = BrokerRegistrar(
            self.namesrv_client,
            s.namesrv_addr_list,
            self.build_registration,
            interval_ms=s.register_broker_interval_ms,
            timeout_ms=s.register_broker_timeout_ms,
        )
        self.registrar.add_master_listener(self.ha_wiring.on_master_changed)
        topics.on_change = self.registrar.trigger
        if self.send_processor is not None:
            self.send_processor.route_published = self.registrar.next_round
        self.registrar.start()

    def build_registration(self) -> BrokerRegistration:
        """The REGISTER_BROKER payload: identity, advertised address, whole topic table, data version.

        A broker that is not both readable and writable advertises every topic's perm masked by its own
        (BrokerController#registerBrokerAll), so routes stop sending to it.
        """
        s = self.settings
        topics = self.topics
        assert topics is not None
        table = dict(topics.topic_config_table)
        rw = PermName.PERM_READ | PermName.PERM_WRITE
        if s.broker_permission & rw != rw:
            table = {name: replace(tc, perm=tc.perm & s.broker_permission) for name, tc in table.items()}
        broker_id, data_version = s.broker_id, topics.data_version
        manager = self.replicas_manager
        if manager is not None:  # controller mode: id 0 while master; the master epoch orders the registrations
            broker_id = manager.registered_broker_id
            data_version = replace(data_version, state_version=max(0, manager.master_epoch))
        return BrokerRegistration(
            cluster_name=s.cluster_name,
            broker_name=s.broker_name,
            broker_id=broker_id,
            broker_addr=self.broker_addr,
            topic_configs=table,
            data_version=data_version,
            ha_server_addr=self.ha_wiring.ha_server_addr(),
        )

    async def stop(self) -> None:
        """Stop taking sends, unregister, stop serving, persist topics, shut the store down. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        await self.ha_wiring.stop_role_changes()
        if self.send_processor is not None:
            self.send_processor.stop_accepting()
        if self.servicer is not None:
            self.servicer.close_send_streams()
        if self.registrar is not None:
            await self.registrar.stop()
        if self.long_polling is not None:  # held pulls answer now, within the grace period
            self.long_polling.close()
        if self.server is not None:
            await self.server.stop(self.settings.shutdown_grace_ms / 1000)
        if self.pop is not None:
            await self.pop.stop()
        if self.scheduled is not None:
            await self.scheduled.stop()
        if self.transaction_check is not None:
            await self.transaction_check.stop()
        await self.ha_wiring.stop_slave_synchronize()
        await self._stop_consumer_state()
        if self.topics is not None:
            await self.topics.wait_persisted()
            await asyncio.to_thread(self.topics.persist)
        await self.ha_wiring.stop_ha()
        if self.store is not None:
            await asyncio.to_thread(self.store.shutdown)
        await self._channels.close()
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop_server)
        log.info("broker_stopped", broker_name=self.settings.broker_name, port=self.port)

    async def _stop_consumer_state(self) -> None:
        """Stop the scan and the offset persist task; write offsets and groups one last time (errors logged: the
        store must still shut down cleanly)."""
        await cancel_and_wait(self._scan_task)
        try:
            if self.consumer_offsets is not None:
                await self.consumer_offsets.stop()
            if self.subscription_groups is not None:
                await self.subscription_groups.wait_persisted()
                await asyncio.to_thread(self.subscription_groups.persist)
        except OSError as exc:
            log.error("consumer_state_persist_failed", error=str(exc))


async def resolve_store_ip(settings: BrokerSettings, retry_interval_s: float = STORE_IP_RETRY_INTERVAL_S) -> str:
    """``settings.store_ip()``, retried every ``retry_interval_s`` for up to broker_ip_resolve_wait_ms while the
    name does not resolve (a Kubernetes pod's DNS record appears shortly after the pod starts). Event loop; the
    lookups run in a worker thread. Raises ValueError when it still does not resolve.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.broker_ip_resolve_wait_ms / 1000
    while True:
        try:
            return await asyncio.to_thread(settings.store_ip)
        except ValueError as exc:
            left_s = deadline - loop.time()
            if left_s <= 0:
                raise
            log.warning("broker_ip_unresolved", broker_ip=settings.broker_ip, error=str(exc), wait_left_s=left_s)
            await asyncio.sleep(min(retry_interval_s, left_s))
