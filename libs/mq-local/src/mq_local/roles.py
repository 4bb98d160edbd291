"""Each broker's role for ``mqlocal status``: what ``mqadmin clusterList`` shows, asked the same way.

The name server's cluster table gives every registered broker's id; each broker answers GET_BROKER_RUNTIME_INFO
with its own role (``ASYNC_MASTER``/``SYNC_MASTER``/``SLAVE``) and, in controller mode, its master epoch
(mq_client.admin.cluster_view, shared with clusterList). Over TLS the cluster's ``admin`` certificate is presented;
with authentication the calls are signed by the generated super user. Blocking: runs the calls on a private loop in
a helper thread (mq_local.readiness.run_blocking), bounded by ``wait_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_client.admin.admin_client import MQAdminClient
from mq_client.admin.cluster_view import BrokerRow, fetch_cluster_rows, role_text
from mq_common.errors import MQError

from mq_local.auth_files import LocalAuthFiles
from mq_local.readiness import run_blocking
from mq_local.state import ClusterState
from mq_local.tls_files import LocalTlsFiles

ROLE_CALL_MS: Final = 2_000
ROLES_WAIT_S: Final = 10.0
assert ROLE_CALL_MS / 1000 < ROLES_WAIT_S


@dataclass(frozen=True, slots=True)
class BrokerRoleView:
    """What ``mqlocal status`` prints for one broker process: its role as clusterList writes it, its broker id and
    its master epoch (None: no epoch file, i.e. not in controller mode)."""

    role: str
    broker_id: int
    master_epoch: int | None

    @classmethod
    def of_row(cls, row: BrokerRow) -> BrokerRoleView:
        epoch = row.master_epoch if row.master_epoch is not None and row.master_epoch >= 0 else None
        return cls(role_text(row), row.broker_id, epoch)


def broker_roles(state: ClusterState, data_dir: Path, wait_s: float = ROLES_WAIT_S) -> dict[str, BrokerRoleView]:
    """Broker address (``127.0.0.1:port``) -> its role view, for every broker the name server lists. Empty when the
    name server does not answer (MQError) or the whole query takes longer than ``wait_s``."""
    tls = LocalTlsFiles.of_data_dir(data_dir).client_config() if state.tls else None
    credentials = LocalAuthFiles.of_data_dir(data_dir).super_user() if state.auth else None

    async def fetch() -> list[BrokerRow]:
        admin = MQAdminClient([state.namesrv_addr], timeout_ms=ROLE_CALL_MS, tls=tls, credentials=credentials)
        async with admin:
            return await fetch_cluster_rows(admin)

    try:
        rows = run_blocking(fetch, wait_s)
    except (MQError, TimeoutError):
        return {}
    return {row.addr: BrokerRoleView.of_row(row) for row in rows}
