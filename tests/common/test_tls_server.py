"""TLS on ServiceServer and ChannelPool with real handshakes: plaintext vs TLS, client certificates required or
not, and certificate rotation on disk picked up by the next connection without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
import trustme
from mq_common.tls import TlsClientAuth, TlsClientConfig

from tests.common.tls_testkit import (
    MountedSecret,
    der,
    health_check,
    health_server,
    issue,
    served_certificate,
    write_ca,
    write_pair,
)


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def secret(tmp_path: Path, ca: trustme.CA) -> MountedSecret:
    mounted = MountedSecret(tmp_path / "secret")
    mounted.publish(ca, issue(ca, "server.pyrocketmq"))
    return mounted


def client_with_cert(tmp_path: Path, ca: trustme.CA, ca_file: Path, name: str = "client.pyrocketmq") -> TlsClientConfig:
    cert_file, key_file = write_pair(tmp_path / "client", name, issue(ca, name))
    return TlsClientConfig(ca_file, cert_file, key_file)


async def test_tls_server_answers_tls_clients_and_refuses_plaintext(secret: MountedSecret) -> None:
    async with health_server(secret.server_config()) as port:
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.OK
        assert await health_check(port, None) == grpc.StatusCode.UNAVAILABLE


async def test_plaintext_server_refuses_a_tls_client(secret: MountedSecret) -> None:
    async with health_server(None) as port:
        assert await health_check(port, None) == grpc.StatusCode.OK
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.UNAVAILABLE


async def test_client_refuses_a_server_its_ca_did_not_sign(tmp_path: Path, secret: MountedSecret) -> None:
    other_ca = write_ca(tmp_path / "other", trustme.CA())
    async with health_server(secret.server_config()) as port:
        assert await health_check(port, TlsClientConfig(ca_file=other_ca)) == grpc.StatusCode.UNAVAILABLE


async def test_required_client_auth_refuses_clients_without_a_verified_certificate(
    tmp_path: Path, ca: trustme.CA, secret: MountedSecret
) -> None:
    stranger_ca = trustme.CA()
    stranger = client_with_cert(tmp_path / "s", stranger_ca, secret.ca_file, "stranger.pyrocketmq")
    async with health_server(secret.server_config(TlsClientAuth.REQUIRE)) as port:
        assert await health_check(port, client_with_cert(tmp_path, ca, secret.ca_file)) == grpc.StatusCode.OK
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.UNAVAILABLE
        assert await health_check(port, stranger) == grpc.StatusCode.UNAVAILABLE


async def test_optional_client_auth_accepts_clients_with_and_without_a_certificate(
    tmp_path: Path, ca: trustme.CA, secret: MountedSecret
) -> None:
    async with health_server(secret.server_config(TlsClientAuth.OPTIONAL)) as port:
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.OK
        assert await health_check(port, client_with_cert(tmp_path, ca, secret.ca_file)) == grpc.StatusCode.OK


async def test_rotated_certificate_is_served_to_the_next_connection_without_a_restart(
    ca: trustme.CA, secret: MountedSecret
) -> None:
    first = issue(ca, "server.pyrocketmq")
    secret.publish(ca, first)
    async with health_server(secret.server_config()) as port:
        assert await asyncio.to_thread(served_certificate, port, secret.ca_file) == der(first)
        second = issue(ca, "server.pyrocketmq")
        assert der(second) != der(first)
        secret.publish(ca, second)
        assert await asyncio.to_thread(served_certificate, port, secret.ca_file) == der(second)
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.OK


async def test_rotation_to_a_new_ca_changes_which_client_certificates_are_accepted(
    tmp_path: Path, ca: trustme.CA, secret: MountedSecret
) -> None:
    old_client = client_with_cert(tmp_path / "old", ca, secret.ca_file)
    new_ca = trustme.CA()
    new_ca_file = write_ca(tmp_path / "newca", new_ca)
    new_client = client_with_cert(tmp_path / "new", new_ca, new_ca_file)
    async with health_server(secret.server_config(TlsClientAuth.REQUIRE)) as port:
        assert await health_check(port, old_client) == grpc.StatusCode.OK
        secret.publish(new_ca, issue(new_ca, "server.pyrocketmq"))
        assert await health_check(port, new_client) == grpc.StatusCode.OK
        assert await health_check(port, old_client) == grpc.StatusCode.UNAVAILABLE


async def test_a_half_written_rotation_keeps_serving_the_old_certificate(ca: trustme.CA, secret: MountedSecret) -> None:
    first = issue(ca, "server.pyrocketmq")
    secret.publish(ca, first)
    async with health_server(secret.server_config()) as port:
        real_key = secret.key_file.resolve()
        real_key.rename(real_key.with_suffix(".gone"))  # the key vanishes: the reload fails, the old pair stays
        secret.cert_file.resolve().write_bytes(b"".join(p.bytes() for p in issue(ca, "x").cert_chain_pems))
        assert await asyncio.to_thread(served_certificate, port, secret.ca_file) == der(first)
        assert await health_check(port, TlsClientConfig(ca_file=secret.ca_file)) == grpc.StatusCode.OK


async def test_bind_raises_for_unreadable_tls_files(tmp_path: Path) -> None:
    from mq_common.grpc_server import ServiceServer
    from mq_common.tls import TlsServerConfig

    server = ServiceServer(["test.Empty"])
    with pytest.raises(FileNotFoundError):
        server.bind("127.0.0.1", 0, TlsServerConfig(tmp_path / "no.pem", tmp_path / "no-key.pem"))
