"""Controller-mode clusters for the failover tests: one broker group of two replicas (SYNC_MASTER, SYNC_FLUSH) with
etcd and a controller, real processes; sends through a DefaultMQProducer that remember every acknowledged message;
read-back from the group's current master; the controller's view of the group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc
from mq.common.v1 import common_pb2
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendStatus
from mq_common.auth.interceptor import signing_pool
from mq_common.constants import MessageConst
from mq_common.controller_client import ControllerClient
from mq_common.errors import MQError
from mq_common.protocol.controller import ReplicaInfo
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import read_all, spec_for_tests

GROUP: Final = "broker-a"
PEER: Final = "broker-a-s1"
DEADLINE_S: Final = 60.0
FAILOVER_TARGET_S: Final = 10.0
CONTROLLER_MODE_ENV: Final = {
    "MQ_BROKER_IN_SYNC_REPLICAS": "2",
    "MQ_BROKER_HA_SEND_HEARTBEAT_INTERVAL_MS": "1000",
    "MQ_BROKER_HA_HOUSEKEEPING_INTERVAL_MS": "5000",
    "MQ_BROKER_REGISTER_BROKER_INTERVAL_MS": "2000",
    "MQ_BROKER_SLAVE_SYNCHRONIZE_INTERVAL_MS": "1000",
}


def start_group(data_dir: Path, *, auth: bool = False, broker_env: Mapping[str, str] | None = None) -> LocalCluster:
    """A name server, etcd, a controller, and broker-a (id 1, the first master) with broker-a-s1 (id 2); not started
    (use it as a context manager). ``auth``: authentication and authorisation on (mq_local's generated init super
    user signs admin calls: ``spec.admin_credentials``). ``broker_env``: settings over CONTROLLER_MODE_ENV."""
    spec = spec_for_tests(
        data_dir,
        broker_groups=1,
        controller=True,
        controller_port=free_port(),
        replicas_per_broker_group=2,
        broker_role="SYNC_MASTER",
        broker_env={**CONTROLLER_MODE_ENV, **(broker_env or {})},
        auth=auth,
    )
    return LocalCluster(spec)


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, deadline_s: float = DEADLINE_S) -> float:
    """Poll ``condition`` until true; returns the seconds it took. Raises AssertionError past the deadline."""
    start = time.monotonic()
    while not await condition():
        if time.monotonic() - start > deadline_s:
            raise AssertionError(f"not within {deadline_s:.0f} s: {what}")
        await asyncio.sleep(0.1)
    return time.monotonic() - start


def commit_log_bytes(store: Path) -> bytes:
    """The CommitLog files' bytes up to the last non-zero byte (a preallocated tail is zeros on both sides)."""
    files = sorted((store / "commitlog").iterdir()) if (store / "commitlog").is_dir() else []
    return b"".join(f.read_bytes() for f in files).rstrip(b"\0")


async def wait_topic_on(cluster: LocalCluster, name: str, topic: str) -> None:
    """Until replica ``name`` persisted ``topic`` (SlaveSynchronize copied it from the master)."""
    path = cluster.spec.broker_store_dir(name) / "config" / "topics.json"

    async def known() -> bool:
        return path.is_file() and topic in path.read_text(encoding="utf-8")

    await wait_for(known, f"{name} knows topic {topic}")


async def replica_info(cluster: LocalCluster) -> ReplicaInfo | None:
    """The controller's view of the group (signed by the init super user in an auth cluster); None when refused."""
    pool = signing_pool(cluster.spec.tls_client, cluster.spec.admin_credentials)
    try:
        return await ControllerClient([cluster.spec.controller_addr], pool).get_replica_info(GROUP)
    except MQError:
        return None
    finally:
        await pool.close()


async def wait_sync_state_set(cluster: LocalCluster, size: int) -> ReplicaInfo:
    """Until the controller's SyncStateSet of the group has ``size`` members (and a master)."""
    found: list[ReplicaInfo] = []

    async def reached() -> bool:
        info = await replica_info(cluster)
        if info is not None and info.has_master and len(info.sync_state_set) == size:
            found.append(info)
            return True
        return False

    await wait_for(reached, f"a SyncStateSet of {size}")
    return found[-1]


async def wait_master(cluster: LocalCluster, name: str) -> float:
    """Until the name server lists process ``name`` as the group's master."""

    async def listed() -> bool:
        return await asyncio.to_thread(cluster.current_master, GROUP) == name

    return await wait_for(listed, f"{name} is the master")


@dataclass
class AckedSends:
    """A producer (and optionally the cluster's gateway) and every message it got SEND_OK for: UNIQ_KEY -> body."""

    producer: DefaultMQProducer
    topic: str
    acked: dict[str, bytes] = field(default_factory=dict)
    gateway: gateway_pb2_grpc.ProducerGatewayStub | None = None

    async def send(self, body: bytes) -> bool:
        """One send; True (and remembered) on SEND_OK, False on any other outcome or error."""
        try:
            result = await self.producer.send(Message(self.topic, body))
        except MQError:
            return False
        if result.send_status is not SendStatus.SEND_OK:
            return False
        self.acked[result.msg_id] = body
        return True

    async def send_through_gateway(self, body: bytes) -> bool:
        """One send through the gateway (v1 Send); True (and remembered) on SEND_OK."""
        assert self.gateway is not None
        request = gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=self.topic, body=body))
        try:
            result = (await self.gateway.Send(request, timeout=10)).result
        except grpc.RpcError:
            return False
        if result.code != 0 or result.send_status != common_pb2.SEND_STATUS_SEND_OK:
            return False
        self.acked[result.msg_id] = body
        return True

    async def first_gateway_ok_after(self, prefix: str) -> float:
        """Send through the gateway until one is acknowledged; the seconds it took."""
        return await _first_ok(self.send_through_gateway, f"{prefix} through the gateway")

    async def send_many(self, count: int, prefix: str) -> None:
        for i in range(count):
            assert await self.send(f"{prefix}-{i}".encode()), f"{prefix}-{i} not acknowledged"

    async def first_ok_after(self, prefix: str) -> float:
        """Send until one is acknowledged; the seconds it took."""
        return await _first_ok(self.send, prefix)

    async def missing(self, cluster: LocalCluster) -> dict[str, bytes]:
        """Acknowledged messages the group's current master does not serve byte-identical (UNIQ_KEY -> body)."""
        stored = {
            m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""): m.body
            for _queue, m in await read_all(cluster.namesrv_addr, self.topic)
        }
        return {k: v for k, v in self.acked.items() if stored.get(k) != v}


async def _first_ok(send: Callable[[bytes], Awaitable[bool]], prefix: str) -> float:
    """Call ``send`` with bodies ``<prefix>-<n>`` until it returns True; the seconds it took."""
    n = 0

    async def one() -> bool:
        nonlocal n
        n += 1
        return await send(f"{prefix}-{n}".encode())

    return await wait_for(one, f"a SEND_OK ({prefix})")


async def producer_for(cluster: LocalCluster, topic: str, group: str) -> AckedSends:
    config = ProducerConfig(producer_group=group, send_msg_timeout_ms=3_000, retry_times_when_send_failed=2)
    producer = DefaultMQProducer.connect(config, [cluster.namesrv_addr])
    await producer.start()
    return AckedSends(producer, topic)
