"""Who may change a service that keeps no users of its own (the name server, the controller): components and
super users.

- ``check_component``: with mutual TLS enforced (tls_client_auth=require), only a component certificate
  (mq_common.tls.ComponentGuard) passes; otherwise everyone.
- ``check_admin``: a component certificate passes; with authentication on, else only a call signed by a SUPER user
  (the settings' init user or inner client credentials, checked with mq_common.auth's HMAC signature verifier);
  with authentication off there are no users, so any caller the transport let in passes.
- ``check_component_or_admin``: with authentication on, ``check_admin``; off, ``check_component``. For calls that
  components make (RegisterBroker) and an admin may also make.

A refusal raises MQError NO_PERMISSION (16) whose remark names the RPC and why (the certificate's name or the
access key), never a secret. The service knows only the super users of its settings: users created on the brokers
(mqadmin createUser) are not known here. Runs on the service's loop; a signature check costs one cached lookup.
Mirrors what RocketMQ's AuthenticationEvaluator checks for an admin request (there: against the brokers' users).
"""

from __future__ import annotations

from typing import Any, Self

from mq_common.auth.authentication import Authenticator, signed_headers
from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_common.auth.model import User, UserType
from mq_common.auth.settings import AuthSettings
from mq_common.auth.signature import SignatureVerifier
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode
from mq_common.tls import ComponentGuard


def _refuse(remark: str) -> MQError:
    return MQError(remark, ResponseCode.NO_PERMISSION)


def super_users(settings: AuthSettings) -> tuple[User, ...]:
    """The SUPER users a service's settings define: the init user and the inner client credentials (if set)."""
    inner = settings.inner_client_credentials()
    users = [settings.init_user()]
    if inner is not None:
        users.append(User(inner.access_key, inner.secret_key, UserType.SUPER))
    return tuple(u for u in users if u is not None)


class AdminAccess:
    """The checks of :mod:`mq_common.auth.admin_access`; each raises MQError NO_PERMISSION (16)."""

    def __init__(self, guard: ComponentGuard, authenticator: Authenticator | None) -> None:
        self._guard = guard
        self._authenticator = authenticator

    @classmethod
    def from_settings(cls, settings: AuthSettings) -> Self:
        """From a service's settings (ServiceSettings with AuthSettings mixed in): its ComponentGuard and, with
        ``authentication_enabled``, an Authenticator over its super users."""
        authenticator = None
        if settings.authentication_enabled:
            provider = InMemoryAuthMetadataProvider(super_users(settings))
            verifier = SignatureVerifier(settings.auth_clock_skew_ms, settings.auth_replay_window_ms)
            authenticator = Authenticator(provider, verifier)
        return cls(ComponentGuard.from_settings(settings), authenticator)

    @property
    def authentication_enabled(self) -> bool:
        return self._authenticator is not None

    def check_component(self, context: Any, rpc: str) -> None:
        refusal = self._guard.refusal(context, rpc)
        if refusal is not None:
            raise _refuse(refusal)

    async def check_admin(self, context: Any, rpc: str) -> None:
        if self._guard.component_name(context) is not None:
            return
        if self._authenticator is None:
            return
        header, date_time = signed_headers(context.invocation_metadata())
        result = await self._authenticator.authenticate(header, date_time, context.peer())
        if result.user is None:
            raise _refuse(f"{rpc}: {result.remark}")
        if result.user.user_type is not UserType.SUPER:
            raise _refuse(f"{rpc} needs a super user or a component; {result.user.subject} is neither")

    async def check_component_or_admin(self, context: Any, rpc: str) -> None:
        if self._authenticator is None:
            self.check_component(context, rpc)
        else:
            await self.check_admin(context, rpc)
