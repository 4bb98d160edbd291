"""The controller's state in etcd (v3 API through the asyncio client ``aetcd``).

Keys, under ``prefix`` (ControllerSettings.etcd_key_prefix):

- ``<prefix>/groups/<broker name>``: a group's :class:`GroupState` (JSON). Written only by a transaction that
  compares the key's mod_revision with the one the writer read (version 0 for a new group): compare-and-set, so two
  controllers electing at once cannot both move a group from the same state, and every master epoch is granted once.
- ``<prefix>/live/<broker name>/<broker id>``: a live broker's last heartbeat (:class:`BrokerLiveInfo`, JSON),
  attached to a lease of TTL ceil(broker_heartbeat_timeout_ms / 1000) s that each heartbeat keeps alive. When a
  broker stops heartbeating, etcd deletes the key at the lease's expiry: every controller sees it dead at once.

Each endpoint (etcd member) has its own client (:mod:`mq_controller.etcd_client`: plaintext, or mutual TLS with
the controller's component certificate); calls go to the current member, and a call that fails with
UNAVAILABLE/DEADLINE_EXCEEDED moves to the next member and is retried (bounded), so a dead member is skipped. One
channel per member dials it by its own name: host names work (gRPC's multi-address target takes only IPs) and TLS
verifies each member's name. Runs on the controller's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from aetcd import exceptions as etcd_errors
from mq_common.auth.lru import BoundedLru
from mq_common.logging import get_logger
from mq_common.tls import TlsClientConfig

from mq_controller.etcd_client import etcd_client
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
# The call's own deadline passing inside the server (a member waiting out a leader election) comes back as gRPC
# UNKNOWN "context deadline exceeded", which aetcd raises as a bare ClientError: the same timeout as
# ConnectionTimeoutError, seen from the other side, so it is retried like one.
_SERVER_SIDE_DEADLINE: Final = "context deadline exceeded"


def is_retried(exc: BaseException) -> bool:
    """True for the etcd errors a call moves on to the next member for: unreachable, timed out (client or server
    side), internal. Pure; any thread."""
    if isinstance(exc, _RETRIED):
        return True
    return type(exc) is etcd_errors.ClientError and _SERVER_SIDE_DEADLINE in str(exc)


class EtcdReplicaStateStore:
    """:class:`mq_controller.state_store.ReplicaStateStore` on etcd. ``await connect()`` first, ``close()`` last.

    ``endpoints``: ``host:port`` of the members' client API; ``tls``: the CA and client certificate to dial them
    with (None: plaintext). Raises ValueError for no endpoint or a bad one.
    """

    def __init__(
        self, endpoints: Sequence[str], prefix: str, call_timeout_ms: int, tls: TlsClientConfig | None = None
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self._endpoints = tuple(endpoints)
        self._clients = [etcd_client(e, tls, call_timeout_ms / 1000) for e in self._endpoints]
        self._current = 0
        self._prefix = prefix.rstrip("/")
        self._leases: BoundedLru[tuple[str, int], int] = BoundedLru(MAX_TRACKED_LEASES)

    def _group_key(self, broker_name: str) -> bytes:
        return f"{self._prefix}/groups/{broker_name}".encode()

    def _live_prefix(self, broker_name: str) -> bytes:
        return f"{self._prefix}/live/{broker_name}/".encode()

    @property
    def _client(self) -> Any:
        """The current member's client (aetcd is untyped)."""
        return self._clients[self._current]

    async def _call(self, what: str, action: Callable[[], Awaitable[_T]]) -> _T:
        """``action`` (which reads ``self._client``) on the current member; on a retried error the next member, at
        most ETCD_CALL_ATTEMPTS + members - 1 times (every member once, and more than once with retries left).
        Raises StateStoreUnavailableError when no attempt answered."""
        attempts = ETCD_CALL_ATTEMPTS + len(self._clients) - 1
        for attempt in range(attempts):
            index = self._current
            try:
                return await action()
            except etcd_errors.ClientError as exc:
                if not is_retried(exc):
                    raise
                endpoint = self._endpoints[index]
                log.warning("etcd_call_failed", call=what, endpoint=endpoint, attempt=attempt + 1, error=str(exc)[:200])
                if self._current == index:  # concurrent failures move on once, not past a good member
                    self._current = (index + 1) % len(self._clients)
                await asyncio.sleep(RETRY_PAUSE_S)
        raise StateStoreUnavailableError(f"etcd did not answer {what} after {attempts} attempts")

    async def connect(self) -> None:
        """Open every member's channel (no call is made: a member that is down is found by the first call).
        Raises OSError when the TLS files cannot be read."""
        for client in self._clients:
            await client.connect()

    async def close(self) -> None:
        for client in self._clients:
            await client.close()

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
        status: Any = await self._call("status", lambda: self._client.status())
        return f"{status.leader.id:x}" if status.leader is not None else ""
