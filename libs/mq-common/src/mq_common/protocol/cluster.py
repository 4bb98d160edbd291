"""The brokers a name server knows (no protobuf here).

Mirrors org.apache.rocketmq.remoting.protocol.body.ClusterInfo and
org.apache.rocketmq.namesrv.routeinfo.BrokerLiveInfo (which RocketMQ keeps inside the name server; here it
also travels in GetBrokerClusterInfo so ``mqadmin clusterList`` can show each broker's last heartbeat).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mq_common.protocol.registration import DataVersion
from mq_common.protocol.route import BrokerData


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address. Mirrors org.apache.rocketmq.namesrv.routeinfo.BrokerLiveInfo.

    Times are ms since the epoch; expired when ``last_update_timestamp_ms + heartbeat_timeout_ms < now``.
    """

    broker_addr: str
    last_update_timestamp_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str = ""

    def is_expired(self, now_ms: int) -> bool:
        return self.last_update_timestamp_ms + self.heartbeat_timeout_ms < now_ms


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Snapshot of a name server's broker tables. Mirrors org.apache.rocketmq.remoting.protocol.body.ClusterInfo.

    ``broker_addr_table``: broker name -> BrokerData; ``cluster_addr_table``: cluster name -> broker names
    (sorted); ``broker_live_table``: broker address -> BrokerLiveInfo.
    """

    broker_addr_table: Mapping[str, BrokerData]
    cluster_addr_table: Mapping[str, tuple[str, ...]]
    broker_live_table: Mapping[str, BrokerLiveInfo]

    def master_addrs_of_cluster(self, cluster: str) -> list[str]:
        """Master addresses of every broker group of ``cluster`` (CommandUtil#fetchMasterAddrByClusterName)."""
        addrs: list[str] = []
        for name in self.cluster_addr_table.get(cluster, ()):
            data = self.broker_addr_table.get(name)
            master = None if data is None else data.master_addr()
            if master is not None:
                addrs.append(master)
        return addrs

    def last_update_timestamp_ms(self, broker_addr: str) -> int:
        """When ``broker_addr`` last registered (ms since the epoch), 0 when it is not in the live table."""
        live = self.broker_live_table.get(broker_addr)
        return 0 if live is None else live.last_update_timestamp_ms
