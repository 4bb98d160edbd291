"""Create a topic on every master of a cluster and wait until the name server routes it.

Mirrors ``mqadmin updateTopic -c <cluster>`` (MQAdminClient.update_topic: one UPDATE_AND_CREATE_TOPIC per
master of the cluster), then polls the route until every master's queues show. Runs on the caller's loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

from mq_client.admin.admin_client import MQAdminClient
from mq_common.auth.settings import Credentials
from mq_common.errors import MQClientError, MQError
from mq_common.protocol import TopicConfig, TopicRouteData
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientConfig

ROUTE_WAIT_S: Final = 30.0
_POLL_S: Final = 0.1


async def create_topic_on_cluster(
    namesrv_addr: str,
    config: TopicConfig,
    cluster_name: str = "DefaultCluster",
    route_wait_s: float = ROUTE_WAIT_S,
    tls: TlsClientConfig | None = None,
    credentials: Credentials | None = None,
) -> TopicRouteData:
    """Create ``config`` on each master of ``cluster_name``; return the route once it lists every master.

    Raises MQClientError (BROKER_NOT_EXIST) when the cluster has no master, MQClientError (SYSTEM_ERROR)
    when the route does not show up within ``route_wait_s``, the broker's error (error_for_code) when a
    create fails, RemotingError on transport failure. ``tls``: the admin client's TLS (None: plaintext);
    ``credentials``: a super user's, when the brokers have authentication on (NO_PERMISSION 16 without).
    """
    async with MQAdminClient([namesrv_addr], tls=tls, credentials=credentials) as admin:
        addrs = await admin.update_topic(config, cluster_name=cluster_name)
        info = await admin.cluster_list()
        brokers = {name for name, data in info.broker_addr_table.items() if data.master_addr() in addrs}
        return await _wait_route(admin, config, brokers, route_wait_s)


async def _wait_route(admin: MQAdminClient, config: TopicConfig, brokers: set[str], wait_s: float) -> TopicRouteData:
    deadline = time.monotonic() + wait_s
    last = ""
    while time.monotonic() < deadline:
        try:
            route = await admin.topic_route(config.topic_name)
        except MQError as exc:
            last = str(exc)
        else:
            listed = {q.broker_name for q in route.queue_datas if q.write_queue_nums == config.write_queue_nums}
            if brokers <= listed:
                return route
            last = f"route lists {sorted(listed)}"
        await asyncio.sleep(_POLL_S)
    raise MQClientError(
        f"topic {config.topic_name} not routed on {sorted(brokers)} within {wait_s:.0f} s ({last})",
        ResponseCode.SYSTEM_ERROR,
    )
