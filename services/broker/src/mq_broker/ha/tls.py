"""TLS of the HA port: Python ``ssl`` contexts from the broker's TLS settings, and the slave's identity check.

The master serves TLS with client certificates required (verified against ``tls_ca_file``; unset: the system
roots) and accepts a slave only when its certificate names a component identity (``component_identities``;
empty: any verified certificate). The slave verifies the master's certificate (``tls_server_name_override`` or
the address' host). Certificate files follow the gRPC servers' reload rule (mq_common.tls.credentials): the
server context is built again when a file changed, so the next connection uses the new files while open ones
keep theirs. Contexts are built on the event loop (a few file reads, only after a change or per reconnect).
No RocketMQ counterpart (its HA port is plaintext); the names play the role of the component certificates.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq_common.tls import PeerIdentity, TlsClientConfig, TlsServerConfig


def _stamp(paths: list[Path]) -> tuple[tuple[int, int, int], ...]:
    """(inode, mtime ns, size) of each file, following symlinks. Raises OSError for a missing file."""
    return tuple((st.st_ino, st.st_mtime_ns, st.st_size) for st in (os.stat(p) for p in paths))


@dataclass(slots=True)
class HaTls:
    """The HA port's TLS: ``server`` (cert, key, CA), ``client`` (the slave side), ``allowed`` identities."""

    server: TlsServerConfig
    client: TlsClientConfig
    allowed: frozenset[str] = frozenset()
    _context: ssl.SSLContext | None = field(default=None, init=False)
    _stamp: tuple[tuple[int, int, int], ...] = field(default=(), init=False)

    def server_context(self) -> ssl.SSLContext:
        """The master's context (client certificates required), rebuilt when a file changed. Raises OSError /
        ssl.SSLError when the files cannot be used and no earlier context exists."""
        paths = [self.server.cert_file, self.server.key_file, *([self.server.ca_file] if self.server.ca_file else [])]
        try:
            stamp = _stamp(paths)
            if self._context is None or stamp != self._stamp:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(self.server.cert_file, self.server.key_file)
                if self.server.ca_file is not None:
                    context.load_verify_locations(cafile=self.server.ca_file)
                context.verify_mode = ssl.CERT_REQUIRED
                self._context, self._stamp = context, stamp
        except (OSError, ssl.SSLError):
            if self._context is None:
                raise
        return self._context

    def client_context(self) -> ssl.SSLContext:
        """The slave's context: verifies the master, presents the client certificate. Raises OSError/SSLError."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.client.ca_file is not None:
            context.load_verify_locations(cafile=self.client.ca_file)
        if self.client.cert_file is not None and self.client.key_file is not None:
            context.load_cert_chain(self.client.cert_file, self.client.key_file)
        return context

    def server_hostname(self, host: str) -> str:
        return self.client.server_name_override or host

    def refusal(self, peercert: Any) -> str | None:
        """None when the verified peer certificate (``SSLSocket.getpeercert()`` dict) names an allowed component
        identity, else why not (names the certificate's common name, never key material)."""
        identity = peer_identity_of(peercert)
        if identity is None:
            return "the slave presented no certificate"
        if not identity.is_allowed(self.allowed):
            return f"certificate {identity} is not a component identity"
        return None


def peer_identity_of(peercert: Any) -> PeerIdentity | None:
    """CN and SANs of a ``getpeercert()`` dict (None: no certificate)."""
    if not peercert:
        return None
    common = [v for rdn in peercert.get("subject", ()) for k, v in rdn if k == "commonName"]
    sans = tuple(str(v) for _kind, v in peercert.get("subjectAltName", ()))
    if not common and not sans:
        return None
    return PeerIdentity(common[0] if common else "", sans)
