"""The broker's runtime KV table (GET_BROKER_RUNTIME_INFO), what ``mqadmin clusterList`` prints per broker.

Mirrors org.apache.rocketmq.broker.processor.AdminBrokerProcessor#prepareRuntimeInfo with
DefaultMessageStore#getRuntimeInfo (the store's part) and, flattened into the same table, the HA state RocketMQ
serves as HARuntimeInfo (GET_BROKER_HA_STATUS). Every value is a string, as in RocketMQ's KVTable:

=========================  ==========================================================================================
key                        value
=========================  ==========================================================================================
``brokerVersionDesc``      ``mqbroker <version>``
``brokerRole``             the store's current role: ``ASYNC_MASTER``, ``SYNC_MASTER`` or ``SLAVE``
``brokerActive``           ``true`` on a master (RocketMQ: the master-only services run), else ``false``
``commitLogMinOffset``     the CommitLog's min physical offset (bytes)
``commitLogMaxOffset``     the CommitLog's max physical offset (bytes; what the broker holds)
``commitLogDiskRatio``     used fraction of the CommitLog's partition at the last clean round (-1.0 unknown)
``dispatchBehindBytes``    CommitLog bytes not yet dispatched to the ConsumeQueues
``masterEpoch``            the last epoch of the CommitLog's epoch file (controller mode), -1 without one
``haInSyncSlaveNums``      master: connected slaves within ``ha_max_gap_not_in_sync_bytes``
``haConnectionInfo``       master: JSON list, one object per connected slave: ``addr`` (its HA peer ``host:port``),
                           ``slaveAckOffset``, ``diff`` (bytes behind), ``inSync`` (HAConnectionRuntimeInfo's names)
``haMasterAddr``           slave: the HA address it replicates from (empty: none known)
``haClientConnected``      slave: ``true`` while its HA connection is open
=========================  ==========================================================================================

Runs on the broker's event loop (reads counters only, no I/O).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from mq_broker.ha.ha_service import HAService
from mq_broker.store.config import BrokerRole
from mq_broker.store.message_store import DefaultMessageStore

DISTRIBUTION: Final = "mq-broker"


def broker_version_desc() -> str:
    """``"mqbroker <version>"`` of the installed mq-broker distribution (``"mqbroker unknown"`` when not installed)."""
    try:
        return f"mqbroker {version(DISTRIBUTION)}"
    except PackageNotFoundError:
        return "mqbroker unknown"


def broker_runtime_info(store: DefaultMessageStore, ha: HAService | None, version_desc: str) -> dict[str, str]:
    """The KV table of the module docstring for ``store`` and (when it listens) its HAService ``ha``."""
    commit_log = store.commit_log
    master_max = commit_log.max_offset
    role = store.broker_role
    table = {
        "brokerVersionDesc": version_desc,
        "brokerRole": str(role),
        "brokerActive": _bool(role is not BrokerRole.SLAVE),
        "commitLogMinOffset": str(commit_log.min_offset),
        "commitLogMaxOffset": str(master_max),
        "commitLogDiskRatio": str(store.clean_service.last_usage.commit_log_ratio),
        "dispatchBehindBytes": str(max(0, master_max - store.dispatched_offset)),
        "masterEpoch": str(store.epoch_file.last_epoch()),
    }
    if ha is None:
        return table
    if role is BrokerRole.SLAVE:
        table["haMasterAddr"] = ha.client.master_ha_addr or ""
        table["haClientConnected"] = _bool(ha.client.connected)
        return table
    max_gap = store.group_transfer.max_gap_bytes
    connections = [
        {
            "addr": c.slave,
            "slaveAckOffset": c.acked_offset,
            "diff": c.lag_bytes(master_max),
            "inSync": c.acked_offset >= 0 and master_max - c.acked_offset < max_gap,
        }
        for c in sorted(ha.connections.values(), key=lambda c: c.slave)
    ]
    table["haInSyncSlaveNums"] = str(ha.in_sync_slaves())
    table["haConnectionInfo"] = json.dumps(connections, separators=(",", ":"))
    return table


def _bool(value: bool) -> str:
    return "true" if value else "false"
