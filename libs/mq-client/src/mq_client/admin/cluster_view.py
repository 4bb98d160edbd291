"""The cluster view of ``mqadmin clusterList`` (and ``mqlocal status``): one row per broker from the name server's
cluster table and each broker's runtime table (GET_BROKER_RUNTIME_INFO): its id, its own role, CommitLog max
offset, a slave's lag and the master epoch.

Mirrors org.apache.rocketmq.tools.command.cluster.ClusterListSubCommand (the rows it prints; its fetch is
DefaultMQAdminExt#examineBrokerClusterInfo plus #fetchBrokerRuntimeStats per broker). Runs on the caller's asyncio
loop; errors are the typed mq_common.errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mq_common.constants import MixAll
from mq_common.errors import MQError
from mq_common.protocol import ClusterInfo
from mq_common.response_code import ResponseCode

from mq_client.admin.admin_base import AdminBase


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """One line of clusterList (and of its JSON ``brokers``).

    ``role`` is MASTER or SLAVE by the broker id the name server lists (0: the master); ``broker_role`` what the
    broker itself reports (ASYNC_MASTER / SYNC_MASTER / SLAVE; None when it did not answer, ``error`` then says
    why); ``max_offset`` its CommitLog max offset (bytes); ``lag_bytes`` for a slave how far its CommitLog is
    behind its master's (None for a master, or when either did not answer); ``master_epoch`` the last epoch of its
    epoch file (-1: none)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    last_update_timestamp_ms: int
    role: str
    broker_role: str | None
    version: str | None
    max_offset: int | None
    lag_bytes: int | None
    master_epoch: int | None
    error: str | None


def _int_of(table: dict[str, str] | None, key: str) -> int | None:
    value = None if table is None else table.get(key)
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def cluster_rows(info: ClusterInfo, runtime: Mapping[str, dict[str, str] | MQError]) -> list[BrokerRow]:
    """clusterList's rows, sorted by cluster, broker name and id, from the name server's ``info`` and each
    broker's ``runtime`` table (by address; an MQError: that broker did not answer)."""
    rows: list[BrokerRow] = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            master = runtime.get(data.broker_addrs.get(MixAll.MASTER_ID, ""))
            master_max = _int_of(master if isinstance(master, dict) else None, "commitLogMaxOffset")
            for bid, addr in sorted(data.broker_addrs.items()):
                answer = runtime.get(addr)
                table = answer if isinstance(answer, dict) else None
                max_offset = _int_of(table, "commitLogMaxOffset")
                is_slave = bid != MixAll.MASTER_ID
                lag = None
                if is_slave and master_max is not None and max_offset is not None:
                    lag = max(0, master_max - max_offset)
                rows.append(
                    BrokerRow(
                        cluster, name, bid, addr, info.last_update_timestamp_ms(addr),
                        role="SLAVE" if is_slave else "MASTER",
                        broker_role=None if table is None else table.get("brokerRole"),
                        version=None if table is None else table.get("brokerVersionDesc"),
                        max_offset=max_offset,
                        lag_bytes=lag,
                        master_epoch=_int_of(table, "masterEpoch"),
                        error=f"{ResponseCode.name_of(answer.code)} ({answer.code}): {answer.remark}"
                        if isinstance(answer, MQError)
                        else None,
                    )
                )  # fmt: skip
    return rows


def role_text(row: BrokerRow) -> str:
    """The broker's own role, flagged when it disagrees with its id; the id's role when it did not answer."""
    if row.broker_role is None:
        return f"{row.role} (no answer)"
    if (row.broker_role == "SLAVE") != (row.role == "SLAVE"):
        return f"{row.broker_role} (id says {row.role})"
    return row.broker_role


async def fetch_cluster_rows(admin: AdminBase) -> list[BrokerRow]:
    """Ask the name server for the cluster table and every listed broker (at once) for its runtime table; the rows
    of :func:`cluster_rows`. Raises what the name server call raises (a broker that fails is a row with ``error``)."""
    info = await admin.cluster_list()
    addrs = sorted({a for data in info.broker_addr_table.values() for a in data.broker_addrs.values()})
    return cluster_rows(info, await admin.broker_runtime_infos(addrs))
