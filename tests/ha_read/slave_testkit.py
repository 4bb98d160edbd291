"""A broker group of a master and a slave made of real processes, before replication exists: the slave is a broker
started with MQ_BROKER_BROKER_ROLE=SLAVE, MQ_BROKER_BROKER_ID=1 and the same broker name on a COPY of the master's
cleanly stopped store (a byte-identical CommitLog, what replication produces). Name servers expire a silent broker
after 6 s here (RocketMQ: 120 s) so that a killed master leaves the routes within a test."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendStatus
from mq_common.channels import ChannelPool
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import TopicRouteData
from mq_local.cluster import BROKER_MODULE, LocalCluster, broker_env
from mq_local.ports import LOCAL_HOST, free_port
from mq_local.processes import ManagedProcess
from mq_local.readiness import wait_serving
from mq_local.testing import make_topic, spec_for_tests

DEADLINE_S: Final = 90.0
BROKER: Final = "broker-a"
SLAVE_ID: Final = 1
FAST_BROKER_ENV: Final = {
    "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "1000",
    "MQ_BROKER_SLAVE_READ_ENABLE": "true",
    # Every pull that leaves newer CommitLog bytes behind counts as "no longer in memory" (deterministic).
    "MQ_BROKER_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT": "0",
    "MQ_BROKER_SLAVE_SYNCHRONIZE_INTERVAL_MS": "500",
}
FAST_NAMESRV_ENV: Final = {
    "MQ_NAMESRV_BROKER_CHANNEL_EXPIRED_MS": "6000",
    "MQ_NAMESRV_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "500",
}


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` every 0.2 s until true; fail naming ``what`` after ``deadline_s``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not await condition():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


@dataclass
class MasterSlaveGroup:
    """The cluster (its broker-a is the master) and the slave process of broker-a."""

    cluster: LocalCluster
    slave: ManagedProcess
    topic: str

    @property
    def master_addr(self) -> str:
        return self.cluster.broker_addrs[BROKER]

    @property
    def slave_addr(self) -> str:
        return f"{LOCAL_HOST}:{self.slave.port}"

    def stop(self) -> None:
        self.slave.stop()
        self.cluster.stop()


def start_cluster(data_dir: Path) -> LocalCluster:
    """Name server, one broker group (broker-a, the master) and the gateway, with the fast settings above."""
    spec = spec_for_tests(
        data_dir,
        broker_groups=1,
        flush_disk_type="SYNC_FLUSH",
        broker_env=FAST_BROKER_ENV,
        namesrv_env=FAST_NAMESRV_ENV,
        start_wait_s=DEADLINE_S,
    )
    return LocalCluster(spec).start()


async def make_filled_topic(cluster: LocalCluster, hint: str, messages: int) -> str:
    """A new topic of 1 queue holding ``messages`` messages ``m-0`` ... (each SEND_OK)."""
    topic = await make_topic(cluster, hint, queues=1)
    producer = DefaultMQProducer.connect(ProducerConfig(producer_group=f"{hint}_producer"), [cluster.namesrv_addr])
    await producer.start()
    try:
        for i in range(messages):
            result = await producer.send(Message(topic, f"m-{i}".encode()))
            assert result.send_status is SendStatus.SEND_OK
    finally:
        await producer.shutdown()
    return topic


def add_slave(cluster: LocalCluster, topic: str) -> MasterSlaveGroup:
    """Stop the master cleanly, copy its store, restart it, start the slave on the copy; wait until it serves.
    Blocking (call through asyncio.to_thread)."""
    spec = cluster.spec
    cluster.stop_broker(BROKER)
    slave_store = spec.data_dir / f"{BROKER}-s{SLAVE_ID}" / "store"
    shutil.copytree(spec.broker_store_dir(BROKER), slave_store)
    cluster.start_broker(BROKER)
    port = free_port()
    env = broker_env(spec, 0)
    env.update(
        {
            "MQ_BROKER_LISTEN_PORT": str(port),
            "MQ_BROKER_STORE_PATH_ROOT_DIR": str(slave_store),
            "MQ_BROKER_BROKER_ID": str(SLAVE_ID),
            "MQ_BROKER_BROKER_ROLE": "SLAVE",
        }
    )
    slave = ManagedProcess(f"{BROKER}-s{SLAVE_ID}", BROKER_MODULE, env, port, spec.data_dir / "slave.log")
    slave.start()
    if not wait_serving(f"{LOCAL_HOST}:{port}", time.monotonic() + DEADLINE_S, slave.running):
        slave.stop()
        raise AssertionError(f"the slave did not serve; log:\n{slave.log_tail()}")
    return MasterSlaveGroup(cluster, slave, topic)


async def route_of(namesrv_addr: str, topic: str) -> TopicRouteData:
    pool = ChannelPool()
    try:
        return await NameServerClient([namesrv_addr], pool).get_route_info_by_topic(topic, 3000)
    finally:
        await pool.close()


async def wait_route_ids(namesrv_addr: str, topic: str, ids: set[int]) -> TopicRouteData:
    """Wait until ``topic``'s route lists exactly broker ids ``ids`` for broker-a; returns that route."""
    found: list[TopicRouteData] = []

    async def listed() -> bool:
        route = await route_of(namesrv_addr, topic)
        data = route.broker_data(BROKER)
        found[:] = [route]
        return data is not None and set(data.broker_addrs) == ids

    await wait_for(listed, f"broker ids {sorted(ids)} in the route of {topic}")
    return found[0]
