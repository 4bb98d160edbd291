"""The gateway's one authentication + authorisation step, shared by mq.gateway.v1 and apache.rocketmq.v2.

Per call: the ``authorization`` and ``x-mq-date-time`` headers are verified (mq_common.auth.Authenticator; a
burst of calls in one second costs one HMAC), then each (resource, action) the call needs is decided against the
user's ACL (mq_common.auth.authorization.authorize; decisions cached per user, resource, action and source IP,
dropped when the user or ACL object changes on a metadata refresh). A refusal raises :class:`AuthRefusal`:
``unauthenticated`` (v2 UNAUTHORIZED 40100) or not (v2 FORBIDDEN 40300); both are v1 NO_PERMISSION 16. Nothing
is sent or stored for a refused call: the check runs before any work. Users and ACLs come from a master broker of
the gateway's cluster (:class:`BrokerAuthMetadataProvider`) through a CachingAuthMetadataProvider.

With authorization_enabled and authentication_enabled off, the claimed access key is trusted unverified (as in
RocketMQ, where the two flags are independent): enable both in production. Runs on the gateway's asyncio loop.
Mirrors org.apache.rocketmq.proxy.grpc.interceptor.AuthenticationInterceptor / AuthorizationInterceptor and
org.apache.rocketmq.auth.authentication.AuthenticationEvaluator / authorization.AuthorizationEvaluator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn, Protocol, TypeVar

from mq_common.auth.authentication import Authenticator, signed_headers
from mq_common.auth.authorization import authorize
from mq_common.auth.lru import BoundedLru
from mq_common.auth.metadata import AuthMetadataProvider, AuthMetadataUnavailableError
from mq_common.auth.model import Acl, Action, Resource, User
from mq_common.auth.settings import AuthSettings
from mq_common.auth.signature import AuthFailure, AuthorizationHeader, SignatureVerifier
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.response_code import ResponseCode

log = get_logger("mq_gateway.auth")

# Cached decisions: (username, resource type, name, action, source IP) tuples of recent traffic.
MAX_CACHED_DECISIONS: Final = 8_192

Permission = tuple[Resource, Action]
_T = TypeVar("_T")


class AuthRefusal(Exception):
    """A refused call: ``unauthenticated`` (bad or no credentials) or forbidden; ``remark`` names the access
    key, resource and action, never a secret."""

    def __init__(self, unauthenticated: bool, remark: str) -> None:
        super().__init__(remark)
        self.unauthenticated = unauthenticated
        self.remark = remark


class AuthObserver(Protocol):
    """Where failures and denials are counted (mq_gateway.auth_metrics.AuthMetrics)."""

    def on_failure(self, failure: AuthFailure, access_key: str) -> None: ...

    def on_denial(self, username: str, permission: Permission) -> None: ...


def peer_ip(peer: str) -> str | None:
    """The IP of a gRPC peer string (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``); None otherwise."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or None
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or None
    return None


@dataclass(frozen=True, slots=True)
class _Decision:
    user: User
    acl: Acl | None
    allowed: bool
    reason: str


class GatewayAuth:
    """``check`` a call. ``settings`` gives the flags and bounds; ``provider`` the users and ACLs (wrap it in a
    CachingAuthMetadataProvider: ``check`` asks it on every call)."""

    def __init__(self, settings: AuthSettings, provider: AuthMetadataProvider, observer: AuthObserver | None = None):
        self.authentication_enabled = settings.authentication_enabled
        self.authorization_enabled = settings.authorization_enabled
        self._provider = provider
        verifier = SignatureVerifier(settings.auth_clock_skew_ms, settings.auth_replay_window_ms)
        self._authenticator = Authenticator(provider, verifier)
        self._observer = observer
        self._decisions: BoundedLru[tuple[str, str, str, Action, str | None], _Decision] = BoundedLru(
            MAX_CACHED_DECISIONS
        )

    @property
    def enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    async def check(
        self,
        header: AuthorizationHeader | None,
        date_time: str,
        client_id: str,
        peer: str,
        permissions: Sequence[Permission],
    ) -> User | None:
        """The call's user (None when both flags are off). Raises AuthRefusal, or
        AuthMetadataUnavailableError when users/ACLs cannot be fetched (a server-side failure)."""
        if not self.enabled:
            return None
        user = await self._user(header, date_time, client_id or peer)
        if self.authorization_enabled:
            source_ip = peer_ip(peer)
            for permission in permissions:
                await self._authorize(user, permission, source_ip)
        return user

    async def _user(self, header: AuthorizationHeader | None, date_time: str, client_id: str) -> User:
        if self.authentication_enabled:
            result = await self._authenticator.authenticate(header, date_time, client_id)
            if result.user is not None:
                return result.user
            failure = result.failure or AuthFailure.NO_CREDENTIALS
            self._refuse_authentication(failure, result.access_key, result.remark)
        access_key = header.access_key if header is not None else ""
        user = await self._provider.get_user(access_key) if access_key else None
        if user is None:
            failure = AuthFailure.UNKNOWN_USER if access_key else AuthFailure.NO_CREDENTIALS
            self._refuse_authentication(failure, access_key, f"unknown or missing access key {access_key!r}")
        return user

    def _refuse_authentication(self, failure: AuthFailure, access_key: str, remark: str) -> NoReturn:
        if self._observer is not None:
            self._observer.on_failure(failure, access_key)
        raise AuthRefusal(True, remark)

    async def _authorize(self, user: User, permission: Permission, source_ip: str | None) -> None:
        resource, action = permission
        acl = await self._provider.get_acl(user.subject)
        key = (user.username, resource.resource_type.value, resource.name, action, source_ip)
        decision = self._decisions.get(key)
        if decision is None or decision.user is not user or decision.acl is not acl:
            result = authorize(acl, user, resource, action, source_ip)
            decision = _Decision(user, acl, result.allowed, result.reason)
            self._decisions.put(key, decision)
            if not result.allowed:
                log.info("auth_denied", reason=result.reason)
        if not decision.allowed:
            if self._observer is not None:
                self._observer.on_denial(user.username, permission)
            raise AuthRefusal(False, decision.reason)

    async def refuse_send(
        self, metadata: Iterable[tuple[str, str | bytes]] | None, peer: str, topics: Iterable[str]
    ) -> MQError | None:
        """mq.gateway.v1's check of a send to ``topics`` (Topic Pub each): None when allowed, else the error to
        answer: NO_PERMISSION 16 + remark, or SYSTEM_ERROR when users/ACLs cannot be fetched. The learned client
        clock is keyed by the connection (``peer``): v1 calls carry no client id."""
        header, date_time = signed_headers(metadata)
        permissions = [(Resource.of_topic(t), Action.PUB) for t in dict.fromkeys(topics)]
        try:
            await self.check(header, date_time, peer, peer, permissions)
        except AuthRefusal as refusal:
            return MQError(refusal.remark, ResponseCode.NO_PERMISSION)
        except AuthMetadataUnavailableError as exc:
            return MQError(str(exc), ResponseCode.SYSTEM_ERROR)
        return None


class AuthAdminLookup(Protocol):
    """The part of mq_client.auth_admin_calls.AuthAdminCalls the provider reads."""

    async def get_user(self, broker_addr: str, username: str, timeout_ms: int = ...) -> User | None: ...

    async def get_acl(self, broker_addr: str, subject: str, timeout_ms: int = ...) -> Acl | None: ...


class BrokerAuthMetadataProvider:
    """Users and ACLs from the master brokers of the gateway's cluster, tried in order until one answers.
    ``masters`` lists their addresses (from the name servers' cluster info). Raises the last broker's error
    when none answers (CachingAuthMetadataProvider then serves its last value or refuses as unavailable)."""

    def __init__(self, calls: AuthAdminLookup, masters: Callable[[], Awaitable[list[str]]], timeout_ms: int) -> None:
        self._calls = calls
        self._masters = masters
        self._timeout_ms = timeout_ms

    async def _first_answer(self, fetch: Callable[[str], Awaitable[_T]]) -> _T:
        addrs = await self._masters()
        if not addrs:
            raise MQError("no master broker of this cluster is registered", ResponseCode.SYSTEM_ERROR)
        failure: Exception | None = None
        for addr in addrs:
            try:
                return await fetch(addr)
            except Exception as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def get_user(self, username: str) -> User | None:
        return await self._first_answer(lambda addr: self._calls.get_user(addr, username, self._timeout_ms))

    async def get_acl(self, subject: str) -> Acl | None:
        async def fetch(addr: str) -> Acl | None:
            try:
                return await self._calls.get_acl(addr, subject, self._timeout_ms)
            except MQError as exc:
                if exc.code == ResponseCode.NO_PERMISSION:  # "the subject does not exist": no ACL
                    return None
                raise

        return await self._first_answer(fetch)
