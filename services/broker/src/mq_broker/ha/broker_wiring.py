"""The HA side of one broker, as BrokerController starts and stops it: the HAService (replication port), the
static role of a master/slave pair, SlaveSynchronize, and in controller mode the ReplicasManager.

Mirrors the HA parts of org.apache.rocketmq.broker.BrokerController (#initialize's HA service,
#startBasicService's SlaveSynchronize schedule, #changeSpecialServiceStatus via ReplicasManager, the HA address
of the registration). BrokerController keeps the start/stop order; :class:`BrokerHaWiring` holds the pieces.
Event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mq_common.channels import ChannelPool
from mq_common.controller_client import ControllerClient

from mq_broker.ha.ha_service import HAService
from mq_broker.ha.replicas_manager import ControllerModeConfig, ReplicasManager, RoleHooks
from mq_broker.ha.slave_synchronize import MetadataTables, SlaveSynchronize, build_slave_synchronize
from mq_broker.ha.sync_state_set import GroupIdentity
from mq_broker.ha.tls import HaTls
from mq_broker.metrics import BrokerMetrics
from mq_broker.registration import MasterAddresses
from mq_broker.settings import BrokerSettings
from mq_broker.store.config import BrokerRole
from mq_broker.store.message_store import DefaultMessageStore


class BrokerHaWiring:
    """HA of one broker over ``settings``; ``channels`` (signed with the inner credentials) reaches the
    controllers. ``ha``, ``replicas_manager`` and ``slave_synchronize`` stay None until started (and for the
    roles that do not run them)."""

    def __init__(self, settings: BrokerSettings, channels: ChannelPool) -> None:
        self.settings = settings
        self._channels = channels
        self.ha: HAService | None = None
        self.replicas_manager: ReplicasManager | None = None
        self.slave_synchronize: SlaveSynchronize | None = None
        self._slave_pool: ChannelPool | None = None

    @property
    def controller_mode(self) -> bool:
        return self.settings.enable_controller_mode

    def ha_server_addr(self) -> str:
        """The HA address the broker advertises (RegisterBroker's haServerAddr); "" before the HA port is bound."""
        return self.settings.ha_server_addr(self.ha.port) if self.ha is not None else ""

    def master_addresses(self, registered: MasterAddresses) -> MasterAddresses:
        """The group's master: in controller mode the controller's answer (empty while this broker is master),
        else ``registered``, the name servers' last answer (mq_broker.registration.MasterAddresses)."""
        manager = self.replicas_manager
        if manager is not None:
            return MasterAddresses(manager.master_addr if not manager.is_master else "")
        return registered

    async def start_ha(self, store: DefaultMessageStore, broker_port: int, metrics: BrokerMetrics | None) -> None:
        """Listen on the HA port and take the static role (a SLAVE replicates from ha_master_address, or from the
        address the name servers answer). Raises RuntimeError when the port cannot be bound (the store is then
        shut down)."""
        s = self.settings
        server_tls, client_tls = s.tls_server_config(), s.tls_client_config()
        tls = None
        if server_tls is not None and client_tls is not None:
            tls = HaTls(server_tls, client_tls, s.component_identity_names)
        ha = HAService(store, tls)
        port = s.ha_port_to_bind(broker_port)
        try:
            await ha.start(s.listen_host, port)
        except OSError as exc:
            await ha.shutdown()
            await asyncio.to_thread(store.shutdown)
            raise RuntimeError(f"cannot listen on the HA port {port}: {exc}") from exc
        self.ha = ha
        if s.broker_role is BrokerRole.SLAVE and not self.controller_mode:
            await ha.change_to_slave(s.ha_master_address or None)
        if metrics is not None:
            metrics.bind_ha(ha)

    def start_slave_synchronize(
        self, tables: MetadataTables, master_addr: Callable[[], str], broker_addr: Callable[[], str]
    ) -> None:
        """A SLAVE copies its master's metadata periodically (RuntimeError: unreadable TLS files). In controller
        mode it is built for every broker and started by the role hooks while the broker is a slave."""
        if self.settings.broker_role is not BrokerRole.SLAVE and not self.controller_mode:
            return
        assert self.ha is not None, "start_ha first"
        commit_log = self.ha.store.commit_log
        try:
            self.slave_synchronize, self._slave_pool = build_slave_synchronize(
                self.settings,
                tables,
                master_addr=master_addr,
                broker_addr=broker_addr,
                commit_log_max_offset=lambda: commit_log.max_offset,
            )
        except OSError as exc:
            raise RuntimeError(f"cannot build SlaveSynchronize: {exc}") from exc
        if not self.controller_mode:
            self.slave_synchronize.start()

    async def start_controller_mode(self, hooks: RoleHooks, broker_addr: Callable[[], str]) -> None:
        """Controller mode: start read-only and let the controller give the role (mq_broker.ha.replicas_manager)."""
        s, ha = self.settings, self.ha
        if not self.controller_mode or ha is None:
            return
        config = ControllerModeConfig(
            GroupIdentity(s.cluster_name, s.broker_name, s.broker_id),
            master_role=s.broker_role,
            heartbeat_interval_ms=s.controller_heartbeat_interval_ms,
            lease_ms=s.controller_lease_ms,
            not_catchup_ms=s.ha_max_time_slave_not_catchup_ms,
        )
        client = ControllerClient(s.controller_addr_list, self._channels)
        self.replicas_manager = ReplicasManager(
            config, ha, client, hooks, lambda: (broker_addr(), s.ha_server_addr(ha.port))
        )
        await self.replicas_manager.start()

    def on_master_changed(self, master: MasterAddresses) -> None:
        """The name servers named another master: a SLAVE without a static ha_master_address follows its HA
        address (RegisterBrokerResult.haServerAddr); in controller mode the controller names it instead."""
        ha = self.ha
        if ha is None or self.settings.ha_master_address or ha.store.broker_role is not BrokerRole.SLAVE:
            return
        if self.controller_mode:  # the controller names the master (ReplicasManager)
            return
        if master.ha_server_addr:
            ha.client.change_master(master.ha_server_addr)

    async def stop_role_changes(self) -> None:
        """First of a broker's stop: no heartbeat to the controller, no role change from now on."""
        if self.replicas_manager is not None:
            await self.replicas_manager.shutdown()

    async def stop_slave_synchronize(self) -> None:
        if self.slave_synchronize is not None:
            await self.slave_synchronize.stop()
        if self._slave_pool is not None:
            await self._slave_pool.close()

    async def stop_ha(self) -> None:
        """Close the HA port and connections (before the store shuts down)."""
        if self.ha is not None:
            await self.ha.shutdown()
