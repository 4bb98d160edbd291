"""TLS settings every service shares: a mixin of :class:`mq_common.settings.ServiceSettings`.

Each service reads them with its own prefix (``MQ_NAMESRV_TLS_ENABLED``, ``MQ_BROKER_TLS_CERT_FILE``,
``MQ_GATEWAY_TLS_CLIENT_AUTH``, ...). Files are PEM paths, so a chart can mount a Kubernetes Secret (or a
cert-manager Certificate's Secret: ``tls.crt``, ``tls.key``, ``ca.crt``) and point the settings at it.
Mirrors the TLS part of org.apache.rocketmq.remoting.netty.TlsSystemConfig (tls.server.* / tls.client.*),
read once at start-up on the main thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings


class TlsClientAuth(StrEnum):
    """Mutual TLS for inbound calls (TlsSystemConfig's tls.server.need.client.auth: none/optional/require).

    gRPC Python cannot ask for a client certificate without requiring it, so ``optional`` serves TLS without
    asking for one: every client is accepted and no peer identity is known. ``require`` refuses a client
    without a certificate signed by ``tls_ca_file`` at the handshake.
    """

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """What a server needs to serve TLS: PEM paths (cert chain, key, CA bundle for client certs)."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    client_auth: TlsClientAuth = TlsClientAuth.NONE


@dataclass(frozen=True, slots=True)
class TlsClientConfig:
    """What a client needs to call a TLS server: the CA bundle that verifies the server (None: the system
    roots), an optional client certificate pair for mutual TLS, and a host name to verify instead of the
    address' host (tests and IP-only certificates)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name_override: str = ""


def split_names(names: str) -> frozenset[str]:
    """``"a, b,,c"`` -> ``{"a", "b", "c"}``."""
    return frozenset(name.strip() for name in names.split(",") if name.strip())


class TlsSettings(BaseSettings):
    """TLS fields of every service (inherited by ServiceSettings). Plaintext is the default."""

    tls_enabled: bool = Field(default=False, description="Serve TLS and call other components over TLS.")
    tls_cert_file: Path | None = Field(
        default=None, description="PEM certificate chain this server presents (tls.server.certPath)."
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of tls_cert_file (tls.server.keyPath)."
    )
    tls_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle that verifies peers: clients' certificates inbound, servers' outbound "
        "(tls.server.trustCertPath / tls.client.trustCertPath); unset outbound: the system roots.",
    )
    tls_client_auth: TlsClientAuth = Field(
        default=TlsClientAuth.NONE,
        description="Client certificates for inbound calls: none, optional (not asked for), require (mutual TLS).",
    )
    tls_client_cert_file: Path | None = Field(
        default=None, description="PEM certificate presented on calls to other components; unset: tls_cert_file."
    )
    tls_client_key_file: Path | None = Field(
        default=None, description="PEM key of tls_client_cert_file; unset: tls_key_file."
    )
    tls_server_name_override: str = Field(
        default="", description="Host name verified in servers' certificates instead of the address' host."
    )
    component_identities: str = Field(
        default="",
        description="Comma-separated certificate names (CN or SAN) allowed to act as a component (register "
        "brokers, admin RPCs) when tls_client_auth is require; empty: any certificate the CA verified.",
    )

    @model_validator(mode="after")
    def _check_tls(self) -> TlsSettings:
        if self.tls_enabled and (self.tls_cert_file is None or self.tls_key_file is None):
            raise ValueError("tls_enabled needs tls_cert_file and tls_key_file")
        if self.tls_client_auth == TlsClientAuth.REQUIRE and self.tls_ca_file is None:
            raise ValueError("tls_client_auth=require needs tls_ca_file to verify client certificates")
        if self.component_identities.strip() and not self.component_identities_enforced:
            raise ValueError("component_identities needs tls_enabled and tls_client_auth=require")
        return self

    @property
    def component_identities_enforced(self) -> bool:
        """True when inbound peers are verified client certificates (TLS with tls_client_auth=require)."""
        return self.tls_enabled and self.tls_client_auth == TlsClientAuth.REQUIRE

    @property
    def component_identity_names(self) -> frozenset[str]:
        """component_identities as a set of names."""
        return split_names(self.component_identities)

    def tls_server_config(self) -> TlsServerConfig | None:
        """The server side, or None when TLS is off."""
        if not self.tls_enabled or self.tls_cert_file is None or self.tls_key_file is None:
            return None
        return TlsServerConfig(self.tls_cert_file, self.tls_key_file, self.tls_ca_file, self.tls_client_auth)

    def tls_client_config(self) -> TlsClientConfig | None:
        """The client side for calls to other components (the server pair unless a client pair is set), or None
        when TLS is off."""
        if not self.tls_enabled:
            return None
        return TlsClientConfig(
            ca_file=self.tls_ca_file,
            cert_file=self.tls_client_cert_file or self.tls_cert_file,
            key_file=self.tls_client_key_file or self.tls_key_file,
            server_name_override=self.tls_server_name_override,
        )
