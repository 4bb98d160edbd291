"""Certificates on disk for TLS tests (trustme), laid out as Kubernetes mounts a Secret: the files are symlinks
through ``..data`` to a versioned directory, and a rotation swaps ``..data`` atomically."""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq_common.channels import ChannelPool
from mq_common.grpc_server import ServiceServer
from mq_common.tls import TlsClientAuth, TlsClientConfig, TlsServerConfig

LOCAL = "127.0.0.1"


def issue(ca: trustme.CA, name: str) -> trustme.LeafCert:
    """A certificate for 127.0.0.1 and ``name`` (also its common name)."""
    return ca.issue_cert(LOCAL, name, common_name=name)


def write_pair(directory: Path, stem: str, cert: trustme.LeafCert) -> tuple[Path, Path]:
    """``<stem>.pem`` and ``<stem>-key.pem`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / f"{stem}.pem", directory / f"{stem}-key.pem"
    cert_file.write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
    key_file.write_bytes(cert.private_key_pem.bytes())
    return cert_file, key_file


def write_ca(directory: Path, ca: trustme.CA, stem: str = "ca") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.pem"
    path.write_bytes(ca.cert_pem.bytes())
    return path


@dataclass
class MountedSecret:
    """``tls.crt`` / ``tls.key`` / ``ca.crt`` under ``root`` as a Kubernetes Secret volume lays them out."""

    root: Path
    version: int = 0

    @property
    def cert_file(self) -> Path:
        return self.root / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.root / "tls.key"

    @property
    def ca_file(self) -> Path:
        return self.root / "ca.crt"

    def publish(self, ca: trustme.CA, cert: trustme.LeafCert) -> None:
        """Write a new version and swap ``..data`` to it in one rename (what the kubelet does)."""
        self.version += 1
        target = self.root / f"..v{self.version}"
        target.mkdir(parents=True)
        (target / "tls.crt").write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
        (target / "tls.key").write_bytes(cert.private_key_pem.bytes())
        (target / "ca.crt").write_bytes(ca.cert_pem.bytes())
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, self.root / "..data")
        for name in ("tls.crt", "tls.key", "ca.crt"):
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")

    def server_config(self, client_auth: TlsClientAuth = TlsClientAuth.NONE) -> TlsServerConfig:
        return TlsServerConfig(self.cert_file, self.key_file, self.ca_file, client_auth)


def der(cert: trustme.LeafCert) -> bytes:
    """The DER bytes of ``cert``'s leaf."""
    return ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode("ascii"))


def served_certificate(port: int, ca_file: Path, client: tuple[Path, Path] | None = None) -> bytes:
    """A fresh TLS handshake (ALPN h2, host 127.0.0.1 verified against ``ca_file``): the DER certificate the server
    presented. Blocking (run it in a thread while the server's loop runs). Raises ssl.SSLError on a refusal."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.set_alpn_protocols(["h2"])
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    with (
        socket.create_connection((LOCAL, port), timeout=10) as sock,
        context.wrap_socket(sock, server_hostname=LOCAL) as tls,
    ):
        peer = tls.getpeercert(binary_form=True)
    assert peer is not None
    return peer


@asynccontextmanager
async def health_server(tls: TlsServerConfig | None) -> AsyncIterator[int]:
    """A ServiceServer (health and reflection only) on 127.0.0.1 with ``tls``; yields its port."""
    server = ServiceServer(["test.Empty"])
    port = server.bind(LOCAL, 0, tls)
    await server.start()
    try:
        yield port
    finally:
        await server.stop(0)


async def health_check(port: int, tls: TlsClientConfig | None) -> grpc.StatusCode:
    """One Health/Check over a fresh channel (TLS with ``tls``): OK or the call's error code."""
    pool = ChannelPool(tls)
    try:
        stub = health_pb2_grpc.HealthStub(pool.get(f"{LOCAL}:{port}"))
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    finally:
        await pool.close()
    return grpc.StatusCode.OK
