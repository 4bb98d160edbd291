"""Where users and ACLs come from (AuthMetadataProvider) and a cache in front of it.

The gateway fetches them from a master broker (mq_gateway.auth.BrokerAuthMetadataProvider); the broker reads its
own store; tests use :class:`InMemoryAuthMetadataProvider`. :class:`CachingAuthMetadataProvider` trusts a fetched
value for ``refresh_ms`` (then fetches again, single-flight per key: concurrent callers share one fetch), keeps at
most ``max_entries`` values per table (LRU), caches "not found" for at most NEGATIVE_CACHE_MS in a bounded table,
and serves the last known value when a refresh fails. Its ``generation`` grows whenever a fetched value differs
from the cached one, so decision caches keyed by it drop stale decisions. Runs on one asyncio loop.
Mirrors org.apache.rocketmq.auth.authentication.provider.AuthenticationMetadataProvider /
authorization.provider.AuthorizationMetadataProvider and the Caffeine caches of their local providers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from mq_common.auth.lru import BoundedLru
from mq_common.auth.model import Acl, User

# "Not found" is trusted this long (a user created meanwhile applies after it) and for this many names.
NEGATIVE_CACHE_MS: Final = 2_000
MAX_NEGATIVE_ENTRIES: Final = 4_096

_V = TypeVar("_V")


class AuthMetadataUnavailableError(Exception):
    """The source failed and nothing is cached for the key (v2 answers INTERNAL_SERVER_ERROR, v1 SYSTEM_ERROR)."""


class AuthMetadataProvider(Protocol):
    """Users by username and ACLs by subject (``User:<username>``); None when there is none. May raise on I/O
    failure."""

    async def get_user(self, username: str) -> User | None: ...

    async def get_acl(self, subject: str) -> Acl | None: ...


class InMemoryAuthMetadataProvider:
    """Users and ACLs held in dicts (tests, a static configuration). Not bounded: its owner decides what it holds."""

    def __init__(self, users: tuple[User, ...] = (), acls: tuple[Acl, ...] = ()) -> None:
        self.users: dict[str, User] = {u.username: u for u in users}
        self.acls: dict[str, Acl] = {a.subject: a for a in acls}

    async def get_user(self, username: str) -> User | None:
        return self.users.get(username)

    async def get_acl(self, subject: str) -> Acl | None:
        return self.acls.get(subject)


@dataclass(frozen=True, slots=True)
class _Entry(Generic[_V]):
    value: _V
    fetched_ms: float


class _CachedTable(Generic[_V]):
    """One table (users or ACLs) of a CachingAuthMetadataProvider."""

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[_V | None]],
        refresh_ms: int,
        max_entries: int,
        now_ms: Callable[[], float],
        on_change: Callable[[], None],
    ) -> None:
        self._fetch = fetch
        self._refresh_ms = refresh_ms
        self._now_ms = now_ms
        self._on_change = on_change
        self._found: BoundedLru[str, _Entry[_V]] = BoundedLru(max_entries)
        self._missing: BoundedLru[str, float] = BoundedLru(MAX_NEGATIVE_ENTRIES)
        self._in_flight: dict[str, asyncio.Future[_V | None]] = {}

    async def get(self, key: str) -> _V | None:
        now = self._now_ms()
        entry = self._found.get(key)
        if entry is not None and now - entry.fetched_ms < self._refresh_ms:
            return entry.value
        missing_since = self._missing.get(key)
        if entry is None and missing_since is not None and now - missing_since < NEGATIVE_CACHE_MS:
            return None
        flight = self._in_flight.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._refresh(key, entry))
            self._in_flight[key] = flight
            flight.add_done_callback(lambda done: self._landed(key, done))
        return await asyncio.shield(flight)

    def _landed(self, key: str, done: asyncio.Future[_V | None]) -> None:
        self._in_flight.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved here, so a fetch nobody awaits any more never warns

    async def _refresh(self, key: str, previous: _Entry[_V] | None) -> _V | None:
        try:
            value = await self._fetch(key)
        except Exception as exc:
            if previous is not None:
                return previous.value
            raise AuthMetadataUnavailableError(f"cannot fetch {key!r}: {type(exc).__name__}") from exc
        now = self._now_ms()
        if value is None:
            self._found.pop(key)
            self._missing.put(key, now)
        else:
            self._missing.pop(key)
            self._found.put(key, _Entry(value, now))
        if previous is None or previous.value != value:
            self._on_change()
        return value


class CachingAuthMetadataProvider:
    """An AuthMetadataProvider in front of ``source`` (see the module docstring). Raises
    AuthMetadataUnavailableError when ``source`` fails and nothing is cached."""

    def __init__(
        self,
        source: AuthMetadataProvider,
        refresh_ms: int,
        max_entries: int,
        now_ms: Callable[[], float] = lambda: time.monotonic() * 1000.0,
    ) -> None:
        self.generation = 0
        self._users = _CachedTable(source.get_user, refresh_ms, max_entries, now_ms, self._changed)
        self._acls = _CachedTable(source.get_acl, refresh_ms, max_entries, now_ms, self._changed)

    def _changed(self) -> None:
        self.generation += 1

    async def get_user(self, username: str) -> User | None:
        return await self._users.get(username)

    async def get_acl(self, subject: str) -> Acl | None:
        return await self._acls.get(subject)
