"""The user/ACL cache (refresh, single flight, negative caching, stale-on-error), Authenticator and AuthSettings."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from mq_common.auth.authentication import Authenticator, signed_headers
from mq_common.auth.metadata import (
    NEGATIVE_CACHE_MS,
    AuthMetadataUnavailableError,
    CachingAuthMetadataProvider,
    InMemoryAuthMetadataProvider,
)
from mq_common.auth.model import Acl, User, UserStatus, UserType
from mq_common.auth.settings import AuthSettings
from mq_common.auth.signature import AuthFailure, SignatureVerifier, sign
from pydantic import ValidationError


class CountingSource(InMemoryAuthMetadataProvider):
    def __init__(self, *users: User) -> None:
        super().__init__(users)
        self.fetches = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def get_user(self, username: str) -> User | None:
        self.fetches += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("broker down")
        return await super().get_user(username)


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


async def test_values_are_trusted_until_refresh_then_fetched_again() -> None:
    source, clock = CountingSource(User("alice", "pw")), Clock()
    cache = CachingAuthMetadataProvider(source, refresh_ms=1_000, max_entries=10, now_ms=clock)
    assert (await cache.get_user("alice")) == User("alice", "pw")
    clock.ms = 999
    await cache.get_user("alice")
    assert source.fetches == 1
    generation = cache.generation
    source.users["alice"] = User("alice", "rotated")
    clock.ms = 1_000
    assert (await cache.get_user("alice")) == User("alice", "rotated")
    assert source.fetches == 2
    assert cache.generation > generation


async def test_concurrent_callers_share_one_fetch() -> None:
    source = CountingSource(User("alice", "pw"))
    source.gate = asyncio.Event()
    cache = CachingAuthMetadataProvider(source, refresh_ms=1_000, max_entries=10)
    calls = [asyncio.ensure_future(cache.get_user("alice")) for _ in range(20)]
    await asyncio.sleep(0)
    source.gate.set()
    assert all(u is not None for u in await asyncio.gather(*calls))
    assert source.fetches == 1


async def test_not_found_is_cached_briefly() -> None:
    source, clock = CountingSource(), Clock()
    cache = CachingAuthMetadataProvider(source, refresh_ms=60_000, max_entries=10, now_ms=clock)
    assert await cache.get_user("ghost") is None
    assert await cache.get_user("ghost") is None
    assert source.fetches == 1
    source.users["ghost"] = User("ghost", "pw")
    clock.ms = NEGATIVE_CACHE_MS
    assert await cache.get_user("ghost") is not None


async def test_a_failed_refresh_serves_the_last_value_and_a_first_failure_raises() -> None:
    source, clock = CountingSource(User("alice", "pw")), Clock()
    cache = CachingAuthMetadataProvider(source, refresh_ms=1_000, max_entries=10, now_ms=clock)
    await cache.get_user("alice")
    source.fail = True
    clock.ms = 5_000
    assert await cache.get_user("alice") == User("alice", "pw")
    with pytest.raises(AuthMetadataUnavailableError, match="OSError"):
        await cache.get_user("bob")


async def test_the_cache_is_bounded() -> None:
    users = tuple(User(f"u{i}", "pw") for i in range(5))
    source = CountingSource(*users)
    cache = CachingAuthMetadataProvider(source, refresh_ms=60_000, max_entries=2)
    for user in users:
        await cache.get_user(user.username)
    await cache.get_user("u0")
    assert source.fetches == 6


async def test_authenticator_outcomes() -> None:
    users = (User("alice", "pw"), User("off", "pw", user_status=UserStatus.DISABLE))
    authenticator = Authenticator(InMemoryAuthMetadataProvider(users), SignatureVerifier(60_000, 60_000))

    async def outcome(access_key: str, secret: str) -> AuthFailure | None:
        header, date_time = signed_headers(sign(access_key, secret, datetime.now()))
        return (await authenticator.authenticate(header, date_time, "client")).failure

    assert await outcome("alice", "pw") is None
    assert await outcome("alice", "wrong") is AuthFailure.BAD_SIGNATURE
    assert await outcome("nobody", "pw") is AuthFailure.UNKNOWN_USER
    assert await outcome("off", "pw") is AuthFailure.DISABLED_USER
    assert (await authenticator.authenticate(None, "", "c")).failure is AuthFailure.NO_CREDENTIALS
    refused = await authenticator.authenticate(*signed_headers(sign("alice", "wrong", datetime.now())), "c")
    assert "alice" in refused.remark
    assert "wrong" not in refused.remark


def test_settings_keep_secrets_out_of_repr_and_dumps() -> None:
    settings = AuthSettings(
        authentication_enabled=True,
        init_authentication_user='{"username": "root", "password": "TopSecret1"}',  # type: ignore[arg-type]
        inner_client_authentication_credentials='{"accessKey": "inner", "secretKey": "TopSecret2"}',  # type: ignore[arg-type]
    )
    assert "TopSecret" not in repr(settings)
    assert "TopSecret" not in str(settings.model_dump())
    assert settings.init_user() == User("root", "TopSecret1", UserType.SUPER)
    credentials = settings.inner_client_credentials()
    assert credentials is not None
    assert credentials.secret_key == "TopSecret2"
    assert AuthSettings().init_user() is None
    assert AuthSettings().inner_client_credentials() is None


def test_malformed_secret_settings_are_refused_without_echoing_them() -> None:
    with pytest.raises(ValidationError) as info:
        AuthSettings(init_authentication_user='{"username": "root", "pass": "TopSecret3"}')  # type: ignore[arg-type]
    assert "TopSecret3" not in str(info.value)


def test_an_acl_value_compares_by_content() -> None:
    assert Acl("User:alice") == Acl("User:alice")
