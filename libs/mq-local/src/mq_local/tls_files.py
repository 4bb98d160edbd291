"""A local certificate authority and component certificates for ``mqlocal up --tls`` and TLS test clusters.

Layout under ``<data>/tls/``: ``ca.pem`` (the CA certificate every process trusts) and, per identity,
``<name>.pem`` (certificate chain) + ``<name>-key.pem`` (private key). Every certificate names 127.0.0.1 and
``localhost`` (so host names verify on the local addresses) and ``<name>.pyrocketmq`` (its component identity,
e.g. ``broker.pyrocketmq``), and may serve and authenticate clients. Made with trustme (PyPI) on the caller's
thread at cluster start; the keys are test keys, never for production.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trustme
from mq_common.tls import TlsClientAuth, TlsClientConfig

TLS_DIR_NAME: Final = "tls"
IDENTITY_DOMAIN: Final = "pyrocketmq"
# namesrv, controller, broker, gateway and etcd (its client port) serve; admin is mqadmin and test clients with a
# component-free identity.
IDENTITIES: Final = ("namesrv", "controller", "broker", "gateway", "etcd", "admin")
BROKER_IDENTITY: Final = f"broker.{IDENTITY_DOMAIN}"
ETCD_IDENTITY: Final = "etcd"


def identity_name(name: str) -> str:
    """``broker`` -> ``broker.pyrocketmq`` (the SAN that component_identities lists)."""
    return f"{name}.{IDENTITY_DOMAIN}"


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner can read (created 0600, truncated if it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


@dataclass(frozen=True, slots=True)
class LocalTlsFiles:
    """The PEM files of a local cluster under ``directory`` (see the module docstring)."""

    directory: Path

    @classmethod
    def of_data_dir(cls, data_dir: Path) -> LocalTlsFiles:
        return cls(data_dir / TLS_DIR_NAME)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def cert_file(self, name: str) -> Path:
        return self.directory / f"{name}.pem"

    def key_file(self, name: str) -> Path:
        return self.directory / f"{name}-key.pem"

    def write(self) -> None:
        """Make a new CA and one certificate per IDENTITIES entry; overwrites earlier files. Blocking."""
        self.directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="PyRocketMQ local CA")
        ca.cert_pem.write_to_path(str(self.ca_file))
        for name in IDENTITIES:
            issued = ca.issue_cert("127.0.0.1", "localhost", identity_name(name), common_name=identity_name(name))
            write_private(self.key_file(name), issued.private_key_pem.bytes())
            issued.cert_chain_pems[0].write_to_path(str(self.cert_file(name)))
            for extra in issued.cert_chain_pems[1:]:
                extra.write_to_path(str(self.cert_file(name)), append=True)

    def service_env(self, prefix: str, name: str, client_auth: TlsClientAuth) -> dict[str, str]:
        """The ``<prefix>TLS_*`` settings of service ``name`` (its own certificate, the local CA)."""
        return {
            f"{prefix}TLS_ENABLED": "true",
            f"{prefix}TLS_CERT_FILE": str(self.cert_file(name)),
            f"{prefix}TLS_KEY_FILE": str(self.key_file(name)),
            f"{prefix}TLS_CA_FILE": str(self.ca_file),
            f"{prefix}TLS_CLIENT_AUTH": client_auth.value,
        }

    def client_config(self, name: str | None = "admin") -> TlsClientConfig:
        """A client of the local cluster: trusts the local CA, presents ``name``'s certificate (None: none)."""
        if name is None:
            return TlsClientConfig(ca_file=self.ca_file)
        return TlsClientConfig(self.ca_file, self.cert_file(name), self.key_file(name))
