"""Real etcd + real ``mqcontroller`` processes for the controller's tests, and heartbeat helpers.

:func:`controllers` starts a LocalEtcd (1 or 3 members) and ``count`` controller processes sharing it (one key
prefix; optionally over mutual TLS to etcd), waits for grpc.health SERVING, and stops every process it started (by
PID) on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mq_common.channels import ChannelPool
from mq_common.controller_client import ControllerClient
from mq_common.protocol.controller import BrokerHeartbeat, HeartbeatResult, ReplicaInfo
from mq_common.tls import TlsClientConfig
from mq_local.cluster import CONTROLLER_MODULE, inherited_env
from mq_local.etcd import LocalEtcd
from mq_local.ports import LOCAL_HOST, free_port
from mq_local.processes import ManagedProcess
from mq_local.readiness import wait_serving
from mq_local.tls_files import LocalTlsFiles

CLUSTER: Final = "ha-cluster"
HEARTBEAT_TIMEOUT_MS: Final = 2_000  # lease TTL 2 s (etcd's practical minimum)
SCAN_INTERVAL_MS: Final = 200
START_WAIT_S: Final = 60.0


@dataclass
class Controllers:
    etcd: LocalEtcd
    processes: list[ManagedProcess]

    @property
    def addrs(self) -> list[str]:
        return [f"{LOCAL_HOST}:{p.port}" for p in self.processes]


def controller_process(
    data_dir: Path, name: str, endpoints: tuple[str, ...], env: Mapping[str, str], tls: TlsClientConfig | None = None
) -> ManagedProcess:
    port = free_port()
    own = {
        "MQ_CONTROLLER_LISTEN_HOST": LOCAL_HOST,
        "MQ_CONTROLLER_LISTEN_PORT": str(port),
        "MQ_CONTROLLER_ETCD_ENDPOINTS": ",".join(endpoints),
        "MQ_CONTROLLER_ETCD_KEY_PREFIX": f"/test/{data_dir.name}",
        "MQ_CONTROLLER_BROKER_HEARTBEAT_TIMEOUT_MS": str(HEARTBEAT_TIMEOUT_MS),
        "MQ_CONTROLLER_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": str(SCAN_INTERVAL_MS),
        "PYTHONUNBUFFERED": "1",
    }
    proc = ManagedProcess(name, CONTROLLER_MODULE, {**inherited_env(), **own, **env}, port, data_dir / f"{name}.log")
    proc.start()
    if not wait_serving(f"{LOCAL_HOST}:{port}", time.monotonic() + START_WAIT_S, proc.running, tls):
        proc.stop()
        raise RuntimeError(f"{name} did not serve:\n{proc.log_tail()}")
    return proc


@contextlib.contextmanager
def controllers(
    data_dir: Path,
    count: int = 1,
    etcd_members: int = 1,
    env: Mapping[str, str] | None = None,
    tls: TlsClientConfig | None = None,
    etcd_tls: LocalTlsFiles | None = None,
) -> Iterator[Controllers]:
    """``tls``: how readiness checks dial the controllers; ``etcd_tls``: etcd serves mutual TLS with these files
    (the controllers then need their TLS settings in ``env``)."""
    etcd = LocalEtcd(data_dir, etcd_members, tls=etcd_tls).start()
    procs: list[ManagedProcess] = []
    try:
        for i in range(count):
            procs.append(controller_process(data_dir, f"controller{i}", etcd.endpoints, env or {}, tls))
        yield Controllers(etcd, procs)
    finally:
        for proc in procs:
            proc.stop()
        etcd.stop()


def heartbeat_of(broker_id: int, max_offset: int = 0, epoch: int = 0, group: str = "g1") -> BrokerHeartbeat:
    return BrokerHeartbeat(
        CLUSTER, group, broker_id, f"127.0.0.{broker_id}:10911", f"127.0.0.{broker_id}:10912", max_offset, 0, epoch
    )


class Heartbeats:
    """Heartbeats every 300 ms for the brokers in ``beating`` (broker id -> heartbeat) until stopped."""

    def __init__(self, client: ControllerClient) -> None:
        self.client = client
        self.beating: dict[int, BrokerHeartbeat] = {}
        self.last: dict[int, HeartbeatResult] = {}
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            for broker_id, hb in list(self.beating.items()):
                with contextlib.suppress(Exception):
                    self.last[broker_id] = await self.client.broker_heartbeat(hb)
            await asyncio.sleep(0.3)

    def __enter__(self) -> Heartbeats:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


async def wait_replica_info(
    client: ControllerClient, group: str, done: object, wait_s: float = 30.0
) -> tuple[ReplicaInfo, float]:
    """Poll GetReplicaInfo until ``done(info)``; (info, seconds waited). Fails the test past ``wait_s``."""
    started = time.monotonic()
    info = await client.get_replica_info(group)
    while not done(info):  # type: ignore[operator]
        assert time.monotonic() - started < wait_s, f"replica info never reached the condition: {info}"
        await asyncio.sleep(0.1)
        info = await client.get_replica_info(group)
    return info, time.monotonic() - started


def client_of(addrs: list[str], pool: ChannelPool) -> ControllerClient:
    return ControllerClient(addrs, pool)
