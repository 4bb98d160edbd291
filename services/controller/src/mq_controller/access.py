"""Who may call what on the controller (issue 20 item 5; RocketMQ's controller relies on network isolation).

- BrokerHeartbeat and AlterSyncStateSet change who is master: with mutual TLS (tls_client_auth=require) only a
  component certificate (mq_common.tls.ComponentGuard) may call them, as only brokers register at the name server.
- ElectMaster and the reads need a component or an admin: with authentication on, a component certificate or a
  call signed by a SUPER user (the init user or the inner client credentials of the settings; mq_common.auth's HMAC
  signature check). With authentication off there are no users: any caller the transport let in (with mutual TLS,
  a certificate the CA verified) counts as an admin.

A refusal is NO_PERMISSION (16) whose remark names the RPC and the caller, never a secret. Runs on the controller's
loop; the signature check costs one cached lookup.
"""

from __future__ import annotations

from typing import Any

from mq_common.auth.authentication import Authenticator, signed_headers
from mq_common.auth.metadata import InMemoryAuthMetadataProvider
from mq_common.auth.model import User, UserType
from mq_common.auth.signature import SignatureVerifier
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode
from mq_common.tls import ComponentGuard

from mq_controller.settings import ControllerSettings


def _refuse(remark: str) -> MQError:
    return MQError(remark, ResponseCode.NO_PERMISSION)


class ControllerAccess:
    """The checks of :mod:`mq_controller.access`. ``check_component`` / ``check_admin`` raise NO_PERMISSION (16)."""

    def __init__(self, guard: ComponentGuard, authenticator: Authenticator | None) -> None:
        self._guard = guard
        self._authenticator = authenticator

    @classmethod
    def from_settings(cls, settings: ControllerSettings) -> ControllerAccess:
        authenticator = None
        if settings.authentication_enabled:
            inner = settings.inner_client_credentials()
            users = [settings.init_user()]
            if inner is not None:
                users.append(User(inner.access_key, inner.secret_key, UserType.SUPER))
            provider = InMemoryAuthMetadataProvider(tuple(u for u in users if u is not None))
            verifier = SignatureVerifier(settings.auth_clock_skew_ms, settings.auth_replay_window_ms)
            authenticator = Authenticator(provider, verifier)
        return cls(ComponentGuard.from_settings(settings), authenticator)

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
