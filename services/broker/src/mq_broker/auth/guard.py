"""Who is calling the broker and what they may do: authentication of signed requests and the ACL 2.0 checks.

Mirrors org.apache.rocketmq.auth.authentication.AuthenticationEvaluator and auth.authorization.AuthorizationEvaluator
as the broker's request pipeline applies them (RocketMQ's AuthenticationPipeline / AuthorizationPipeline).

- Identity: the ``authorization`` + ``x-mq-date-time`` metadata (mq_common.auth.signature) verified against the
  user's password from :class:`AuthMetadataManager`. A component (gateway, another broker, mqadmin inside the
  cluster) signs with ``inner_client_authentication_credentials``, kept as a SUPER user, so it passes every check
  (the gateway has authorised its own client already). A verified component certificate counts as a component
  too: the servicer's ``component_identity`` hook (wired to h/tls's mq_common.tls ComponentGuard/peer_identity)
  names it, and :class:`Caller` carries it.
- Admin RPCs (topics, subscription groups, offset resets, users, ACLs) need a SUPER user when authentication or
  authorization is on; data RPCs need the ACL's Pub/Sub when authorization is on (mq_common.auth.authorization).
- A refusal is MQError NO_PERMISSION 16 whose remark names the subject, the action and the resource, never a secret.

Synchronous and cheap (the verifier caches verified signatures): call it on the serving loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from mq_common.auth.authorization import authorize
from mq_common.auth.model import Action, Resource, User, UserStatus, UserType
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, SignatureVerifier, parse_authorization
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode

from mq_broker.auth.metadata_manager import AuthMetadataManager

CLIENT_ID: Final = "x-mq-client-id"
ANONYMOUS: Final = "anonymous"
NO_LABEL: Final = "none"
RefusalObserver = Callable[[str, str, str], None]
"""Told (stage, resource_type, action) of each refusal: stage "authentication", "admin" or "authorization";
resource_type/action NO_LABEL where the stage has none (metrics: mq_broker_auth_refusals_total)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated caller of one request: ``user`` None when it sent no credentials (allowed only with
    authentication off); ``source_ip`` of the peer (None when unknown); ``component`` the name of a verified
    component certificate (a component passes every check, like a super user)."""

    user: User | None
    source_ip: str | None
    component: str | None = None

    @property
    def name(self) -> str:
        if self.component is not None:
            return f"component {self.component}"
        return self.user.subject if self.user is not None else ANONYMOUS

    @property
    def is_super(self) -> bool:
        return self.component is not None or (self.user is not None and self.user.user_type is UserType.SUPER)


def _refuse(remark: str) -> MQError:
    return MQError(remark, ResponseCode.NO_PERMISSION)


class BrokerAuthGuard:
    """Authentication and authorisation of the broker's requests. Event loop."""

    def __init__(
        self,
        metadata: AuthMetadataManager,
        verifier: SignatureVerifier,
        *,
        authentication_enabled: bool,
        authorization_enabled: bool,
        on_refusal: RefusalObserver | None = None,
    ) -> None:
        self._metadata = metadata
        self._on_refusal = on_refusal
        self._verifier = verifier
        self.authentication_enabled = authentication_enabled
        self.authorization_enabled = authorization_enabled

    @property
    def enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    def authenticate(self, headers: Mapping[str, str], source_ip: str | None) -> Caller:
        """See :meth:`_authenticate`; a refusal is also told to ``on_refusal``."""
        try:
            return self._authenticate(headers, source_ip)
        except MQError:
            self._observe("authentication", NO_LABEL, NO_LABEL)
            raise

    def _observe(self, stage: str, resource_type: str, action: str) -> None:
        if self._on_refusal is not None:
            self._on_refusal(stage, resource_type, action)

    def _authenticate(self, headers: Mapping[str, str], source_ip: str | None) -> Caller:
        """The caller of a request with gRPC metadata ``headers`` (lowercase names).

        With both flags off: the caller is anonymous, nothing is read. Otherwise a present ``authorization`` header
        must verify (NO_PERMISSION 16: malformed, unknown or disabled user, bad signature, stale date-time,
        replayed); without one the caller is anonymous, refused when authentication is on."""
        if not self.enabled:
            return Caller(None, source_ip)
        value = headers.get(AUTHORIZATION, "")
        header = parse_authorization(value) if value else None
        if header is None or header.anonymous:
            if value and header is None:
                raise _refuse("authentication failed: malformed authorization header")
            if self.authentication_enabled:
                raise _refuse("authentication failed: the request is not signed (no access key)")
            return Caller(None, source_ip)
        user = self._metadata.get_user(header.access_key)
        if user is None:
            raise _refuse(f"authentication failed: User:{header.access_key} is not found")
        if user.user_status is UserStatus.DISABLE:
            raise _refuse(f"authentication failed: User:{header.access_key} is disabled")
        client_id = headers.get(CLIENT_ID) or source_ip or ""
        failure = self._verifier.verify(header, headers.get(DATE_TIME, ""), user.password, client_id)
        if failure is not None:
            raise _refuse(f"authentication failed for User:{header.access_key}: {failure.value}")
        return Caller(user, source_ip)

    def may_read_secrets(self, caller: Caller) -> bool:
        """Whether GetUser/ListUser answers carry passwords: always with auth off, else only to super users."""
        return not self.enabled or caller.is_super

    def require_admin(self, caller: Caller, rpc: str) -> None:
        """Admin RPC ``rpc``: a SUPER user (or component) when auth is on. Raises NO_PERMISSION 16."""
        if self.enabled and not caller.is_super:
            self._observe("admin", NO_LABEL, NO_LABEL)
            raise _refuse(f"{caller.name} has no permission to call {rpc}: it needs a super user or a component")

    def require(self, caller: Caller, resource: Resource, action: Action) -> None:
        """Data access ``action`` on ``resource`` when authorization is on. Raises NO_PERMISSION 16 naming them."""
        if not self.authorization_enabled:
            return
        if caller.component is not None:
            return
        if caller.user is None:
            self._observe("authorization", resource.resource_type.value, action.value)
            raise _refuse(f"{ANONYMOUS} has no permission to {action.value} {resource.key}")
        result = authorize(self._metadata.acl_of(caller.user.subject), caller.user, resource, action, caller.source_ip)
        if not result.allowed:
            self._observe("authorization", resource.resource_type.value, action.value)
            raise _refuse(result.reason)
