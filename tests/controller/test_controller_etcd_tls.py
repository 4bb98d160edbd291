"""The controller -> etcd hop over mutual TLS, against the real etcd binary: only a certificate of the cluster's CA
gets in; settings take etcd-style ``https://`` endpoints."""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from mq_common.tls import TlsClientConfig
from mq_controller.etcd_store import EtcdReplicaStateStore
from mq_controller.model import GroupState
from mq_controller.settings import ControllerSettings
from mq_controller.state_store import StateStoreUnavailableError
from mq_local.etcd import LocalEtcd, health_context, member_healthy
from mq_local.tls_files import LocalTlsFiles
from pydantic import ValidationError

from tests.controller.controller_testkit import CLUSTER

pytestmark = pytest.mark.integration

CALL_TIMEOUT_MS = 2_000


@contextlib.contextmanager
def tls_etcd(tmp_path: Path, members: int = 1) -> Iterator[tuple[LocalEtcd, LocalTlsFiles]]:
    files = LocalTlsFiles.of_data_dir(tmp_path)
    files.write()
    etcd = LocalEtcd(tmp_path, members, tls=files).start()
    try:
        yield etcd, files
    finally:
        etcd.stop()


def foreign_client(tmp_path: Path) -> TlsClientConfig:
    """A client that trusts the cluster's CA but presents a certificate of another CA."""
    other = trustme.CA(organization_name="not the cluster's CA")
    issued = other.issue_cert("127.0.0.1", "localhost", "controller.pyrocketmq")
    cert, key = tmp_path / "foreign.pem", tmp_path / "foreign-key.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    return TlsClientConfig(LocalTlsFiles.of_data_dir(tmp_path).ca_file, cert, key)


def host_ports(etcd: LocalEtcd, host: str = "127.0.0.1") -> list[str]:
    return [f"{host}:{m.client_port}" for m in etcd.members]


async def test_the_controller_certificate_reads_and_writes_over_mutual_tls(tmp_path: Path) -> None:
    with tls_etcd(tmp_path, members=3) as (etcd, files):
        assert all(e.startswith("https://127.0.0.1:") for e in etcd.endpoints)
        assert not member_healthy(etcd.members[0])  # no plain HTTP on the client port
        # by host name: each member is dialled by its own name, verified against the certificate's DNS SAN
        for i, endpoints in enumerate((host_ports(etcd), host_ports(etcd, "localhost"))):
            store = EtcdReplicaStateStore(endpoints, f"/tls/{i}", CALL_TIMEOUT_MS, files.client_config("controller"))
            await store.connect()
            try:
                state = GroupState(CLUSTER, "g1", 1, 1, frozenset({1}), 1)
                assert await store.compare_and_set(state, 0)
                got = await store.load_group("g1")
                assert got is not None
                assert got.state == state
                assert not await store.compare_and_set(state, 0)  # compare-and-set holds over TLS too
                assert await store.leader_id()
            finally:
                await store.close()


@pytest.mark.parametrize(
    "who", ["broker certificate", "admin certificate", "foreign certificate", "no certificate", "plaintext"]
)
async def test_a_client_without_the_controller_certificate_is_refused(tmp_path: Path, who: str) -> None:
    """The client port admits the controller identity only: another component's certificate of the same CA (a
    broker's, an admin's) is refused like one of another CA, none, or plaintext."""
    with tls_etcd(tmp_path) as (etcd, files):
        tls = {
            "broker certificate": files.client_config("broker"),
            "admin certificate": files.client_config("admin"),
            "foreign certificate": foreign_client(tmp_path),
            "no certificate": files.client_config(None),
            "plaintext": None,
        }[who]
        store = EtcdReplicaStateStore(host_ports(etcd), "/tls/refused", CALL_TIMEOUT_MS, tls)
        await store.connect()
        try:
            with pytest.raises(StateStoreUnavailableError):
                await store.list_groups()
        finally:
            await store.close()


def test_the_http_json_gateway_is_off_and_health_is_served(tmp_path: Path) -> None:
    """etcd's HTTP/JSON gateway (POST /v3/kv/range) is off: with it on it dials the client port with the etcd
    certificate, is refused (controller identity only) and logs its reconnects for ever. /health still answers."""
    with tls_etcd(tmp_path) as (etcd, files):
        member = etcd.members[0]
        assert member_healthy(member, health_context(files))
        request = urllib.request.Request(f"{member.client_url}/v3/kv/range", data=b'{"key": "Zm9v"}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5, context=health_context(files))
        refused.value.close()
        assert refused.value.code == 404
        assert "authentication handshake failed" not in (tmp_path / f"etcd-{member.name}.log").read_text()


@pytest.mark.parametrize(("who", "admitted"), [("etcd", True), ("controller", False), (None, False)])
def test_the_peer_port_admits_only_the_etcd_certificate(tmp_path: Path, who: str | None, admitted: bool) -> None:
    """Raft traffic is mutual TLS too: the peer port answers /version to the etcd certificate only (the chart's
    --peer-cert-allowed-cn); the three members formed their cluster over it."""
    with tls_etcd(tmp_path, members=3) as (etcd, files):
        member = etcd.members[0]
        assert member.peer_url.startswith("https://")
        context = ssl.create_default_context(cafile=str(files.ca_file))
        if who is not None:
            context.load_cert_chain(files.cert_file(who), files.key_file(who))
        try:
            with urllib.request.urlopen(f"{member.peer_url}/version", timeout=5, context=context) as resp:
                answered = b"etcdserver" in resp.read()
        except OSError:
            answered = False
        assert answered is admitted


def test_settings_take_etcd_style_endpoints(tmp_path: Path) -> None:
    files = LocalTlsFiles.of_data_dir(tmp_path)
    files.write()
    tls = {
        "tls_enabled": True,
        "tls_cert_file": files.cert_file("controller"),
        "tls_key_file": files.key_file("controller"),
        "tls_ca_file": files.ca_file,
    }
    plain = ControllerSettings(etcd_endpoints="http://a:2379,b:2379", **tls)  # type: ignore[arg-type]
    assert plain.etcd_endpoint_list == ("a:2379", "b:2379")
    assert plain.etcd_tls_client_config() is None  # TLS on, etcd plaintext: as before
    secure = ControllerSettings(etcd_endpoints="https://etcd-0.x:2379, https://etcd-1.x:2379", **tls)  # type: ignore[arg-type]
    assert secure.etcd_endpoint_list == ("etcd-0.x:2379", "etcd-1.x:2379")
    assert secure.etcd_tls_client_config() == files.client_config("controller")
    with pytest.raises(ValidationError, match="need tls_enabled"):
        ControllerSettings(etcd_endpoints="https://a:2379")
    with pytest.raises(ValidationError, match="mix https"):
        ControllerSettings(etcd_endpoints="https://a:2379,http://b:2379", **tls)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="is not host:port"):
        ControllerSettings(etcd_endpoints="https://a/x:2379", **tls)  # type: ignore[arg-type]
