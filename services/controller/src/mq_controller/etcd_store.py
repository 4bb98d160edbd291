"""The controller's state in etcd (v3 API through the asyncio client ``aetcd``).

Keys, under ``prefix`` (ControllerSettings.etcd_key_prefix):

- ``<prefix>/groups/<broker name>``: a group's :class:`GroupState` (JSON). Written only by a transaction that
  compares the key's mod_revision with the one the writer read (version 0 for a new group): compare-and-set, so two
  controllers electing at once cannot both move a group from the same state, and every master epoch is granted once.
- ``<prefix>/live/<broker name>/<broker id>``: a live broker's last heartbeat (:class:`BrokerLiveInfo`, JSON),
  attached to a lease of TTL ceil(broker_heartbeat_timeout_ms / 1000) s that each heartbeat keeps alive. When a
  broker stops heartbeating, etcd deletes the key at the lease's expiry: every controller sees it dead at once.

Several endpoints are dialled as one gRPC channel with the round-robin policy, so a dead etcd member is skipped;
each call has a deadline and is retried (bounded) on UNAVAILABLE/DEADLINE_EXCEEDED. Runs on the controller's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import aetcd
from aetcd import exceptions as etcd_errors
from mq_common.auth.lru import BoundedLru
from mq_common.logging import get_logger

from mq_controller.model import BrokerLiveInfo, GroupState
from mq_controller.state_store import StateStoreUnavailableError, Versioned

log = get_logger("mq_controller.etcd_store")

ETCD_CALL_ATTEMPTS: Final = 3
RETRY_PAUSE_S: Final = 0.2
MAX_TRACKED_LEASES: Final = 10_000
MAX_GROUPS_LISTED: Final = 10_000
MAX_REPLICAS_PER_GROUP: Final = 64
_T = TypeVar("_T")
_RETRIED: Final = (etcd_errors.ConnectionFailedError, etcd_errors.ConnectionTimeoutError, etcd_errors.InternalError)


def grpc_target(endpoints: Sequence[str]) -> tuple[str, int]:
    """``("ipv4:a:1,b:2,c", 3)`` for endpoints ``a:1, b:2, c:3``: aetcd dials ``f"{host}:{port}"``, which then is
    gRPC's multi-address ``ipv4:`` target. Raises ValueError for no endpoint or a bad port."""
    if not endpoints:
        raise ValueError("no etcd endpoint")
    host, _, port = ",".join(endpoints).rpartition(":")
    return (f"ipv4:{host}" if len(endpoints) > 1 else host), int(port)


class EtcdReplicaStateStore:
    """:class:`mq_controller.state_store.ReplicaStateStore` on etcd. ``await connect()`` first, ``close()`` last."""

    def __init__(self, endpoints: Sequence[str], prefix: str, call_timeout_ms: int) -> None:
        host, port = grpc_target(endpoints)
        options = {"grpc.lb_policy_name": "round_robin", "grpc.enable_retries": 1}
        self._client = aetcd.Client(host=host, port=port, timeout=call_timeout_ms / 1000, options=options)
        self._prefix = prefix.rstrip("/")
        self._leases: BoundedLru[tuple[str, int], int] = BoundedLru(MAX_TRACKED_LEASES)

    def _group_key(self, broker_name: str) -> bytes:
        return f"{self._prefix}/groups/{broker_name}".encode()

    def _live_prefix(self, broker_name: str) -> bytes:
        return f"{self._prefix}/live/{broker_name}/".encode()

    async def _call(self, what: str, action: Callable[[], Awaitable[_T]]) -> _T:
        for attempt in range(ETCD_CALL_ATTEMPTS):
            try:
                return await action()
            except _RETRIED as exc:
                log.warning("etcd_call_failed", call=what, attempt=attempt + 1, error=str(exc)[:200])
                await asyncio.sleep(RETRY_PAUSE_S)
        raise StateStoreUnavailableError(f"etcd did not answer {what} after {ETCD_CALL_ATTEMPTS} attempts")

    async def connect(self) -> None:
        await self._call("connect", self._client.connect)

    async def close(self) -> None:
        await self._client.close()

    async def load_group(self, broker_name: str) -> Versioned | None:
        got: Any = await self._call("get", lambda: self._client.get(self._group_key(broker_name)))
        if got is None:
            return None
        return Versioned(GroupState.decode(got.value), int(got.mod_revision))

    async def compare_and_set(self, state: GroupState, revision: int) -> bool:
        key = self._group_key(state.broker_name)
        tx = self._client.transactions
        compare = tx.version(key) == 0 if revision == 0 else tx.mod(key) == revision
        result: Any = await self._call(
            "txn",
            lambda: self._client.transaction(compare=[compare], success=[tx.put(key, state.encode())], failure=[]),
        )
        return bool(result[0])

    async def record_heartbeat(self, live: BrokerLiveInfo, ttl_s: int) -> None:
        ident = (live.broker_name, live.broker_id)
        lease_id = self._leases.get(ident)
        if lease_id is not None:
            reply: Any = await self._call("keepalive", lambda: self._client.refresh_lease(lease_id))
            if reply is None or reply.TTL <= 0:
                lease_id = None
        if lease_id is None:
            lease: Any = await self._call("grant", lambda: self._client.lease(ttl_s))
            lease_id = int(lease.id)
            self._leases.put(ident, lease_id)
        key = self._live_prefix(live.broker_name) + str(live.broker_id).encode()
        granted = lease_id
        await self._call("put", lambda: self._client.put(key, live.encode(), lease=granted))

    async def live_brokers(self, broker_name: str) -> dict[int, BrokerLiveInfo]:
        got: Any = await self._call("range", lambda: self._client.get_prefix(self._live_prefix(broker_name)))
        live: dict[int, BrokerLiveInfo] = {}
        for kv in list(got)[:MAX_REPLICAS_PER_GROUP]:
            try:
                info = BrokerLiveInfo.decode(kv.value)
            except ValueError:
                log.warning("bad_live_value", key=kv.key.decode(errors="replace")[:200])
                continue
            live[info.broker_id] = info
        return live

    async def list_groups(self) -> list[Versioned]:
        got: Any = await self._call("range", lambda: self._client.get_prefix(f"{self._prefix}/groups/".encode()))
        groups = []
        for kv in list(got)[:MAX_GROUPS_LISTED]:
            try:
                groups.append(Versioned(GroupState.decode(kv.value), int(kv.mod_revision)))
            except ValueError:
                log.warning("bad_group_value", key=kv.key.decode(errors="replace")[:200])
        return sorted(groups, key=lambda v: v.state.broker_name)

    async def leader_id(self) -> str:
        status: Any = await self._call("status", self._client.status)
        return f"{status.leader.id:x}" if status.leader is not None else ""
