"""The name server's route table.

Mirrors org.apache.rocketmq.namesrv.routeinfo.RouteInfoManager. Tables:

- ``topic_queue_table``:  topic -> broker name -> QueueData
- ``broker_addr_table``:  broker name -> (cluster, broker id -> address)
- ``cluster_addr_table``: cluster name -> broker names
- ``broker_live_table``:  (cluster, broker address) -> BrokerLiveInfo (last update timestamp, heartbeat timeout)

Every method runs on the name server's one asyncio loop and never awaits, so no lock is needed (RocketMQ's
ReadWriteLock guards the same tables against its request thread pools). Time comes from an injectable
clock returning ms since the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mq_common.constants import DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS
from mq_common.errors import TopicNotExistError
from mq_common.logging import get_logger
from mq_common.protocol import (
    BrokerData,
    BrokerLiveInfo,
    BrokerRegistration,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    TopicRouteData,
)

from mq_namesrv.model import (
    is_master,
    require_broker_id,
    require_name,
    require_topic,
    validate_addr,
    validate_registration,
)

log = get_logger("mq_namesrv.route_info_manager")

Clock = Callable[[], int]
NO_TOPIC_ROUTE_REMARK: Final = "No topic route info in name server for the topic: "
# A broker's stateVersion is its master epoch (BrokerController#changeToMaster: DataVersion#nextVersion(epoch)),
# raised by one per election; two addresses of one broker id whose versions differ by more than this are not
# an old and a new master but a forged version (see RouteInfoManager._is_stale).
MAX_STATE_VERSION_STEP: Final = 1024


def system_clock_ms() -> int:
    """Wall clock in ms since the epoch (what BrokerLiveInfo#lastUpdateTimestamp holds)."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _BrokerGroup:
    """Mutable BrokerData held in broker_addr_table."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def snapshot(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(sorted(self.broker_addrs.items())))


class RouteInfoManager:
    """Topic routes and broker liveness. Mirrors org.apache.rocketmq.namesrv.routeinfo.RouteInfoManager.

    ``broker_channel_expired_ms`` is used for registrations that carry no heartbeat timeout
    (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, 120000 ms).
    """

    def __init__(
        self,
        clock: Clock = system_clock_ms,
        broker_channel_expired_ms: int = DEFAULT_BROKER_HEARTBEAT_TIMEOUT_MS,
    ) -> None:
        assert broker_channel_expired_ms > 0
        self._clock = clock
        self._default_timeout_ms = broker_channel_expired_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, _BrokerGroup] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[tuple[str, str], BrokerLiveInfo] = {}

    # ----------------------------------------------------------------------------------------------- register

    def register_broker(self, reg: BrokerRegistration) -> RegisterBrokerResult:
        """Add or refresh a broker and, for a master, its topics' QueueData. Mirrors #registerBroker.

        Topic configs are (re)applied when the broker registers first, when its DataVersion changed, or
        when a topic has no QueueData of this broker yet (#isTopicConfigChanged). A registration whose
        broker id is held by another live address wins or is ignored by state version (see
        :meth:`_is_stale`; the live entry of an ignored address is dropped). Raises InvalidParameterError (29)
        for a malformed registration (a negative state version included).
        Returns the master's address and HA address for a slave whose master is live.
        """
        validate_registration(reg)
        self.cluster_addr_table.setdefault(reg.cluster_name, set()).add(reg.broker_name)
        group = self.broker_addr_table.get(reg.broker_name)
        register_first = group is None
        if group is None:
            group = _BrokerGroup(reg.cluster_name, reg.broker_name)
            self.broker_addr_table[reg.broker_name] = group
        # Switch slave to master: one address holds only one broker id.
        for bid in [b for b, a in group.broker_addrs.items() if a == reg.broker_addr and b != reg.broker_id]:
            del group.broker_addrs[bid]
        if self._is_stale(reg, group):
            self.broker_live_table.pop((reg.cluster_name, reg.broker_addr), None)
            return RegisterBrokerResult()
        old_addr = group.broker_addrs.get(reg.broker_id)
        group.broker_addrs[reg.broker_id] = reg.broker_addr
        register_first = register_first or not old_addr
        if is_master(reg.broker_id):
            self._apply_topic_configs(reg, register_first)
        key = (reg.cluster_name, reg.broker_addr)
        prev = self.broker_live_table.get(key)
        self.broker_live_table[key] = BrokerLiveInfo(
            broker_addr=reg.broker_addr,
            last_update_timestamp_ms=self._clock(),
            heartbeat_timeout_ms=reg.heartbeat_timeout_ms or self._default_timeout_ms,
            data_version=reg.data_version,
            ha_server_addr=reg.ha_server_addr,
        )
        if prev is None:
            log.info(
                "broker_registered",
                cluster=reg.cluster_name,
                broker_name=reg.broker_name,
                broker_id=reg.broker_id,
                broker_addr=reg.broker_addr,
                topics=len(reg.topic_configs),
            )
        return self._register_result(reg, group)

    def _is_stale(self, reg: BrokerRegistration, group: _BrokerGroup) -> bool:
        """True when ``reg`` must not take the broker id from the live address that holds it.

        RocketMQ (#registerBroker) ignores a registration whose stateVersion (master epoch) is lower than the
        live holder's, so that a deposed master cannot take its id back; an equal or higher version takes
        over. Epochs move by one per election, so this manager bounds the comparison: a newcomer more than
        MAX_STATE_VERSION_STEP above the holder is ignored (a forged jump such as 2^63-1 cannot lock the real
        broker out), and a holder more than MAX_STATE_VERSION_STEP above the newcomer is treated as forged and
        the newcomer takes over (an impostor that registered first with a huge version loses at the real
        broker's next heartbeat). The holder's own re-registrations are never compared. Without mutual TLS a
        stranger can still take an id with a plausible version; mq_common.tls.ComponentGuard refuses strangers.
        """
        old_addr = group.broker_addrs.get(reg.broker_id)
        if old_addr is None or old_addr == reg.broker_addr:
            return False
        old_live = self.broker_live_table.get((reg.cluster_name, old_addr))
        if old_live is None:
            return False
        gap = reg.data_version.state_version - old_live.data_version.state_version
        if gap < -MAX_STATE_VERSION_STEP or 0 <= gap <= MAX_STATE_VERSION_STEP:
            return False
        log.warning(
            "broker_register_conflict_ignored",
            cluster=reg.cluster_name,
            broker_name=reg.broker_name,
            broker_id=reg.broker_id,
            old_broker_addr=old_addr,
            old_state_version=old_live.data_version.state_version,
            broker_addr=reg.broker_addr,
            state_version=reg.data_version.state_version,
        )
        return True

    def _apply_topic_configs(self, reg: BrokerRegistration, register_first: bool) -> None:
        changed = register_first or self.is_broker_topic_config_changed(
            reg.cluster_name, reg.broker_addr, reg.data_version
        )
        for name, config in reg.topic_configs.items():
            queue_map = self.topic_queue_table.get(name)
            if changed or queue_map is None or reg.broker_name not in queue_map:
                self._create_and_update_queue_data(reg.broker_name, name, QueueData.of(reg.broker_name, config))

    def _create_and_update_queue_data(self, broker_name: str, topic: str, queue_data: QueueData) -> None:
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            self.topic_queue_table[topic] = {broker_name: queue_data}
            log.info("topic_registered", topic=topic, broker_name=broker_name, queue_data=str(queue_data))
            return
        existed = queue_map.get(broker_name)
        if existed != queue_data:
            if existed is not None:
                log.info("topic_changed", topic=topic, broker_name=broker_name, old=str(existed), new=str(queue_data))
            queue_map[broker_name] = queue_data

    def _register_result(self, reg: BrokerRegistration, group: _BrokerGroup) -> RegisterBrokerResult:
        if is_master(reg.broker_id):
            return RegisterBrokerResult()
        master_addr = group.broker_addrs.get(0)
        master_live = None if master_addr is None else self.broker_live_table.get((reg.cluster_name, master_addr))
        if master_addr is None or master_live is None:
            return RegisterBrokerResult()
        return RegisterBrokerResult(ha_server_addr=master_live.ha_server_addr, master_addr=master_addr)

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        """The DataVersion last registered by this broker, or None. Mirrors #queryBrokerTopicConfig."""
        live = self.broker_live_table.get((cluster_name, broker_addr))
        return None if live is None else live.data_version

    def is_broker_topic_config_changed(self, cluster_name: str, broker_addr: str, data_version: DataVersion) -> bool:
        """True when ``data_version`` differs from the registered one. Mirrors #isBrokerTopicConfigChanged."""
        return self.query_broker_topic_config(cluster_name, broker_addr) != data_version

    # --------------------------------------------------------------------------------------------- unregister

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> bool:
        """Remove one broker address; drop its group, cluster entry and QueueData when it was the last one.

        Mirrors #unRegisterBroker. Returns True when the address was live. Raises InvalidParameterError (29)
        for a blank name or malformed address.
        """
        require_name("clusterName", cluster_name)
        require_name("brokerName", broker_name)
        require_broker_id(broker_id)
        validate_addr(broker_addr)
        was_live = self.broker_live_table.pop((cluster_name, broker_addr), None) is not None
        group = self.broker_addr_table.get(broker_name)
        removed_group = False
        if group is not None:
            for bid in [b for b, a in group.broker_addrs.items() if a == broker_addr]:
                del group.broker_addrs[bid]
            if not group.broker_addrs:
                del self.broker_addr_table[broker_name]
                removed_group = True
        if removed_group:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)
        log.info(
            "broker_unregistered",
            cluster=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            broker_addr=broker_addr,
            was_live=was_live,
            broker_group_removed=removed_group,
        )
        return was_live

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queue_map = self.topic_queue_table[topic]
            queue_map.pop(broker_name, None)
            if not queue_map:
                del self.topic_queue_table[topic]
                log.info("topic_removed", topic=topic, last_broker_name=broker_name)

    # ------------------------------------------------------------------------------------------- delete topic

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> tuple[str, ...]:
        """Drop ``topic``'s route; the broker names whose QueueData was removed, sorted.

        Without ``cluster_name`` (None or "") the whole topic goes (Mirrors #deleteTopic(topic)); with it,
        only the QueueData of that cluster's brokers, and the topic when none is left (Mirrors
        #deleteTopic(topic, clusterName)). An unknown topic or cluster changes nothing (RocketMQ answers
        SUCCESS). Raises InvalidParameterError (29) for an illegal topic name (TopicValidator) or a cluster
        name with whitespace. A broker that registers the topic again brings its QueueData back.
        """
        require_topic(topic)
        if cluster_name:
            require_name("clusterName", cluster_name)
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            return ()
        if cluster_name:
            brokers = self.cluster_addr_table.get(cluster_name, set())
            removed = tuple(sorted(n for n in brokers if queue_map.pop(n, None) is not None))
        else:
            removed = tuple(sorted(queue_map))
            queue_map.clear()
        if not queue_map:
            del self.topic_queue_table[topic]
        log.info(
            "topic_deleted",
            topic=topic,
            cluster=cluster_name or None,
            broker_names=list(removed),
            route_left=bool(queue_map),
        )
        return removed

    def scan_not_active_broker(self) -> list[str]:
        """Unregister every broker whose last registration is older than its heartbeat timeout.

        Mirrors #scanNotActiveBroker + #onChannelDestroy. Returns the expired addresses.
        """
        now = self._clock()
        expired = [key for key, live in self.broker_live_table.items() if live.is_expired(now)]
        for cluster_name, broker_addr in expired:
            live = self.broker_live_table[(cluster_name, broker_addr)]
            log.warning(
                "broker_expired",
                cluster=cluster_name,
                broker_addr=broker_addr,
                last_update_timestamp_ms=live.last_update_timestamp_ms,
                heartbeat_timeout_ms=live.heartbeat_timeout_ms,
            )
            found = self._find_broker(cluster_name, broker_addr)
            if found is None:
                del self.broker_live_table[(cluster_name, broker_addr)]
                continue
            self.unregister_broker(cluster_name, broker_addr, found[0], found[1])
        return [addr for _, addr in expired]

    def _find_broker(self, cluster_name: str, broker_addr: str) -> tuple[str, int] | None:
        """(broker name, broker id) of ``broker_addr`` in ``cluster_name``. Mirrors #setupUnRegisterRequest."""
        for group in self.broker_addr_table.values():
            if group.cluster != cluster_name:
                continue
            for bid, addr in group.broker_addrs.items():
                if addr == broker_addr:
                    return group.broker_name, bid
        return None

    # ------------------------------------------------------------------------------------------------ queries

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData:
        """The route of ``topic``: its QueueData and the BrokerData of those brokers, sorted by broker name.

        Mirrors #pickupTopicRouteData. Raises TopicNotExistError (TOPIC_NOT_EXIST, 17) with RocketMQ's
        remark when no QueueData or no live broker group serves the topic.
        """
        queue_map = self.topic_queue_table.get(topic)
        broker_datas = []
        if queue_map:
            broker_datas = [g.snapshot() for n in sorted(queue_map) if (g := self.broker_addr_table.get(n)) is not None]
        if not queue_map or not broker_datas:
            raise TopicNotExistError(NO_TOPIC_ROUTE_REMARK + topic)
        return TopicRouteData(
            queue_datas=tuple(queue_map[n] for n in sorted(queue_map)),
            broker_datas=tuple(broker_datas),
        )

    def get_all_cluster_info(self) -> ClusterInfo:
        """A snapshot of broker_addr_table, cluster_addr_table (names sorted) and the live table by address.

        Mirrors #getAllClusterInfo."""
        return ClusterInfo(
            broker_addr_table={n: g.snapshot() for n, g in sorted(self.broker_addr_table.items())},
            cluster_addr_table={c: tuple(sorted(ns)) for c, ns in sorted(self.cluster_addr_table.items())},
            broker_live_table={addr: live for (_, addr), live in sorted(self.broker_live_table.items())},
        )

    def get_all_topic_list(self) -> list[str]:
        """Every topic with QueueData, sorted. Mirrors #getAllTopicList."""
        return sorted(self.topic_queue_table)
