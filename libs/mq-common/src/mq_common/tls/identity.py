"""Component identity from a verified client certificate (mutual TLS).

A server running with tls_client_auth=require only completes handshakes with clients whose certificate the CA
bundle verified, so the x509 names gRPC puts in the call's auth context are trusted. With any other mode no
client certificate is asked for and :func:`peer_identity` returns None. Handlers call these on the service's
asyncio loop; they never block. RocketMQ has no exact counterpart (its Netty TLS only verifies the chain); the
names play the role of the AclConstants admin identity for component calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """The verified client certificate of a call: its subject common name and subject alternative names
    (DNS names, IPs, URIs as gRPC renders them)."""

    common_name: str
    subject_alt_names: tuple[str, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        """Every name of the certificate (CN and SANs)."""
        return frozenset(n for n in (self.common_name, *self.subject_alt_names) if n)

    def is_allowed(self, allowed: frozenset[str]) -> bool:
        """True when ``allowed`` is empty (any verified certificate) or names one of this certificate's names."""
        return not allowed or not allowed.isdisjoint(self.names)

    def __str__(self) -> str:
        return self.common_name or (self.subject_alt_names[0] if self.subject_alt_names else "?")


def _decoded(values: Any) -> tuple[str, ...]:
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values or ())


def peer_identity(context: Any) -> PeerIdentity | None:
    """The identity of the call's client certificate, or None (plaintext, or TLS without a client certificate).

    ``context`` is a grpc.aio.ServicerContext (anything with ``auth_context() -> dict[str, list[bytes]]``)."""
    auth = context.auth_context()
    if b"ssl" not in auth.get("transport_security_type", ()):
        return None
    common = _decoded(auth.get("x509_common_name"))
    sans = _decoded(auth.get("x509_subject_alternative_name"))
    if not common and not sans:
        return None
    return PeerIdentity(common[0] if common else "", sans)


@dataclass(frozen=True, slots=True)
class ComponentGuard:
    """Who may make component calls (RegisterBroker, UnregisterBroker, broker admin RPCs).

    ``enforced`` (TLS with tls_client_auth=require) demands a verified client certificate whose names include
    one of ``allowed`` (empty: any verified certificate); not enforced, every caller passes.
    """

    enforced: bool = False
    allowed: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Any) -> ComponentGuard:
        """From a TlsSettings (ServiceSettings) instance."""
        return cls(settings.component_identities_enforced, settings.component_identity_names)

    def refusal(self, context: Any, action: str) -> str | None:
        """None when the caller may do ``action``, else the remark of a NO_PERMISSION (16) refusal: it names
        the action and the certificate's common name, never key material."""
        if not self.enforced:
            return None
        identity = peer_identity(context)
        if identity is None:
            return f"{action} needs a component certificate; the caller presented none"
        if not identity.is_allowed(self.allowed):
            return f"{action} is not allowed for certificate {identity}: not a component identity"
        return None

    def component_name(self, context: Any) -> str | None:
        """The caller's certificate name when it is a component (enforced, verified, allowed), else None: a
        service treats such a caller as a component and lets it past user authorisation (the gateway has already
        authorised its own client)."""
        if not self.enforced:
            return None
        identity = peer_identity(context)
        return str(identity) if identity is not None and identity.is_allowed(self.allowed) else None
