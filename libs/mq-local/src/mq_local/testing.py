"""Helpers for tests that run a real local cluster: free ports, small store files, topics, read-back.

``spec_for_tests(tmp_path)`` gives a ClusterSpec with free ports on 127.0.0.1 and broker settings that
keep a test's disk use small (64 MiB CommitLog files, 10,000-unit ConsumeQueue files).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mq_client.auth_admin_calls import AuthAdminCalls
from mq_client.consumer import PullConsumer
from mq_common.auth.interceptor import signing_interceptors
from mq_common.auth.model import Acl, User
from mq_common.auth.settings import Credentials
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.protocol import MessageQueue, PullStatus, TopicConfig
from mq_common.tls import TlsClientConfig

from mq_local.cluster import ClusterSpec, LocalCluster
from mq_local.ports import PortLayout, free_port
from mq_local.topics import create_topic_on_cluster

TEST_COMMIT_LOG_FILE_BYTES: Final = 64 * 1024 * 1024
TEST_BROKER_ENV: Final[Mapping[str, str]] = {
    "MQ_BROKER_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES": str(TEST_COMMIT_LOG_FILE_BYTES),
    "MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS": "10000",
}


def spec_for_tests(data_dir: Path, broker_groups: int = 2, **overrides: Any) -> ClusterSpec:
    """A spec on free ports with small store files; ``overrides`` replace ClusterSpec fields.

    ``broker_env`` in ``overrides`` is merged over TEST_BROKER_ENV; ``tls=True`` starts a TLS cluster (clients
    then use ``spec.tls_client``); ``auth=True`` one with authentication and authorisation on (admin calls then
    sign with ``spec.admin_credentials``; make_topic does).
    """
    broker_env = {**TEST_BROKER_ENV, **overrides.pop("broker_env", {})}
    overrides.setdefault("controller_port", free_port())  # not the fixed 9878: tests may run side by side
    return ClusterSpec(data_dir=data_dir, ports=PortLayout.free(broker_groups), broker_env=broker_env, **overrides)


def unique_topic(hint: str) -> str:
    """A legal, unique topic name derived from ``hint`` (e.g. a test name)."""
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', hint)[:60]}_{uuid.uuid4().hex[:8]}"


async def make_topic(cluster: LocalCluster, hint: str, queues: int = 4) -> str:
    """Create a unique topic with ``queues`` write/read queues on every broker; return its name once routed."""
    name = unique_topic(hint)
    config = TopicConfig(name, read_queue_nums=queues, write_queue_nums=queues)
    spec = cluster.spec
    await create_topic_on_cluster(
        cluster.namesrv_addr, config, spec.cluster_name, tls=spec.tls_client, credentials=spec.admin_credentials
    )
    return name


async def add_user(cluster: LocalCluster, user: User, acl: Acl | None = None) -> None:
    """Create ``user`` and its ``acl`` on every broker of an auth cluster (``spec.auth``), signed by the init super
    user. Raises the broker's error (error_for_code; NO_PERMISSION 16 "The user is existed" for a known name)."""
    credentials = cluster.spec.admin_credentials
    if credentials is None:
        raise ValueError("add_user needs a cluster started with auth=True")
    pool = ChannelPool(cluster.spec.tls_client)
    try:
        calls = AuthAdminCalls(pool, (credentials.access_key, credentials.secret_key))
        for addr in cluster.broker_addrs.values():
            await calls.create_user(addr, user)
            if acl is not None:
                await calls.create_acl(addr, acl)
    finally:
        await pool.close()


async def read_all(
    namesrv_addr: str,
    topic: str,
    max_pulls_per_queue: int = 10_000,
    tls: TlsClientConfig | None = None,
    credentials: Credentials | None = None,
) -> list[tuple[MessageQueue, MessageExt]]:
    """Every stored message of every readable queue of ``topic``, in queue then offset order.

    Bounded by ``max_pulls_per_queue`` pulls of up to 1024 messages per queue. Raises TopicNotExistError (17)
    without a route, RemotingError when a broker of the route does not answer. ``tls``: a TLS cluster's
    client config (LocalCluster.spec.tls_client); ``credentials``: an auth cluster's super user
    (LocalCluster.spec.admin_credentials) that signs the pulls.
    """
    out: list[tuple[MessageQueue, MessageExt]] = []
    pool = ChannelPool(tls, signing_interceptors(credentials))
    try:
        async with PullConsumer([namesrv_addr], "mq_local_read_all", pool=pool) as consumer:
            for queue in await consumer.fetch_subscribe_message_queues(topic):
                offset = 0
                for _ in range(max_pulls_per_queue):
                    result = await consumer.pull(queue, offset, 1024)
                    if result.status is not PullStatus.FOUND:
                        break
                    out.extend((queue, m) for m in result.messages)
                    offset = result.next_begin_offset
    finally:
        await pool.close()
    return out
