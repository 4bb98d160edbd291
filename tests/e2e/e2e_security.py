"""The container round's certificates and credentials: the ones `helm install` generated, read from the rendered
Secrets, plus what an operator adds.

The chart, installed with its default TLS and auth values, renders a CA (Secret ``mq-ca``: its certificate and key),
one certificate per component (``mq-<component>-tls``) and the auth Secret (``mq-auth``: the init super user and the
inner credentials). :meth:`Pki.of_release` takes those as the kubelet would hand them to pods, and issues with the
rendered CA's key the test-only identities the chart does not make: ``mq-spark`` (the Spark driver's client
certificate, no component) and ``mq-outsider`` (signed by the cluster's CA, no component either). :meth:`Pki.own`
is a CA of its own (a stranger to the cluster). :func:`operator_secrets` gives the Secrets the values name that the
chart leaves to the operator: the users' passwords. Test keys only.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import grpc
import trustme
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from containers_kit import ClientTls
from mq.namesrv.v1 import namesrv_pb2, namesrv_pb2_grpc
from mq_common.auth.settings import Credentials
from mq_common.auth.signature import AUTHORIZATION, DATE_TIME, format_date_time, hmac_sha1_hex, sign
from mq_common.tls import TlsClientConfig

RELEASE_PREFIX: Final = "mq"
NAMESPACE_DNS: Final = "messaging.svc.cluster.local"
COMPONENTS: Final = ("namesrv", "broker", "gateway", "admin", "controller", "etcd")
EXTRA_IDENTITIES: Final = ("spark", "outsider")
CA_SECRET: Final = f"{RELEASE_PREFIX}-ca"
AUTH_SECRET: Final = f"{RELEASE_PREFIX}-auth"
AUTH_KEYS: Final = ("initAuthenticationUser", "innerClientAuthenticationCredentials")  # auth.secretKeys defaults
SPARK_USER: Final = Credentials("spark-flights", "e2e-spark-secret-V8m")
SDK_USER: Final = Credentials("sdk-app", "e2e-sdk-secret-2Lw")
HANDSHAKE_TIMEOUT_S: Final = 10.0


def identity(name: str) -> str:
    return f"{RELEASE_PREFIX}-{name}"


def _sans(name: str) -> list[str]:
    return ["127.0.0.1", "localhost", identity(name), f"*.{identity(name)}-headless.{NAMESPACE_DNS}"]


@dataclass(slots=True)
class Pki:
    """A CA and the PEMs (certificate, key) it issued, by short name (``broker``, ``admin``, ``spark``, ...),
    written under ``directory`` (``ca.crt``, ``<name>.crt``, ``<name>.key``)."""

    directory: Path
    ca: trustme.CA
    ca_pem: bytes
    certs: dict[str, tuple[bytes, bytes]]

    @classmethod
    def of_release(cls, secrets: Mapping[str, Mapping[str, str]], directory: Path) -> Pki:
        """The rendered release's CA and component certificates (``secrets``: Secret name -> key -> value, as
        pods see them), plus EXTRA_IDENTITIES issued with the rendered CA's key."""
        ca_secret = secrets[CA_SECRET]
        ca_pem = ca_secret["tls.crt"].encode()
        ca = trustme.CA.from_pem(ca_pem, ca_secret["tls.key"].encode())
        certs: dict[str, tuple[bytes, bytes]] = {}
        for name in COMPONENTS:
            secret = secrets[f"{identity(name)}-tls"]
            assert secret["ca.crt"].encode() == ca_pem, f"{name}: another CA than {CA_SECRET}'s"
            certs[name] = (secret["tls.crt"].encode(), secret["tls.key"].encode())
        pki = cls(directory, ca, ca_pem, certs)
        for name in EXTRA_IDENTITIES:
            pki.issue(name)
        pki.write()
        return pki

    @classmethod
    def own(cls, directory: Path) -> Pki:
        """A CA of its own issuing every identity the release has, with the same names: a stranger to it."""
        ca = trustme.CA(organization_name="PyRocketMQ e2e stranger CA")
        pki = cls(directory, ca, ca.cert_pem.bytes(), {})
        for name in (*COMPONENTS, *EXTRA_IDENTITIES):
            pki.issue(name)
        pki.write()
        return pki

    def issue(self, name: str) -> None:
        issued = self.ca.issue_cert(*_sans(name), common_name=identity(name))
        chain = b"".join(p.bytes() for p in issued.cert_chain_pems)
        self.certs[name] = (chain, issued.private_key_pem.bytes())

    def write(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ca_file.write_bytes(self.ca_pem)
        for name, (cert, key) in self.certs.items():
            (self.directory / f"{name}.crt").write_bytes(cert)
            key_file = self.directory / f"{name}.key"
            key_file.write_bytes(key)
            key_file.chmod(0o600)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def client(self, name: str) -> ClientTls:
        """PEMs of a sync test client presenting ``name``'s certificate."""
        cert, key = self.certs[name]
        return ClientTls(self.ca_pem, cert, key)

    def client_config(self, name: str | None) -> TlsClientConfig:
        """mq_common's client TLS for ``name``'s certificate (None: TLS without a client certificate)."""
        if name is None:
            return TlsClientConfig(ca_file=self.ca_file)
        return TlsClientConfig(self.ca_file, self.directory / f"{name}.crt", self.directory / f"{name}.key")


@dataclass(frozen=True, slots=True)
class ReleaseCredentials:
    """What the rendered auth Secret holds: the init super user and the components' inner credentials."""

    super_user: Credentials
    inner: Credentials

    @classmethod
    def of_release(cls, secrets: Mapping[str, Mapping[str, str]]) -> ReleaseCredentials:
        user_key, inner_key = AUTH_KEYS
        user = json.loads(secrets[AUTH_SECRET][user_key])
        inner = json.loads(secrets[AUTH_SECRET][inner_key])
        return cls(Credentials(user["username"], user["password"]), Credentials(inner["accessKey"], inner["secretKey"]))

    @property
    def shown_nowhere(self) -> tuple[str, ...]:
        """Secrets no log line or answer may carry: the release's and the users'."""
        return (self.super_user.secret_key, self.inner.secret_key, SPARK_USER.secret_key, SDK_USER.secret_key)


def presented_certificate(addr: str, pki: Pki, client: str) -> bytes:
    """The certificate (DER) the server at ``addr`` (127.0.0.1:port) presents in a TLS handshake (ALPN h2, as gRPC)
    to a client trusting ``pki``'s CA, checking the address as the host name and presenting ``client``'s
    certificate."""
    host, port = addr.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(pki.directory / f"{client}.crt", pki.directory / f"{client}.key")
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT_S) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def operator_secrets() -> dict[str, dict[str, str]]:
    """The Secrets tests/e2e/values-containers.yaml names that the chart leaves to the operator: the passwords of
    auth.users (``mq-spark-user``, ``mq-sdk-user``)."""
    return {"mq-spark-user": {"password": SPARK_USER.secret_key}, "mq-sdk-user": {"password": SDK_USER.secret_key}}


# ------------------------------------------------------------------------------------------- hostile clients

STALE_BY: Final = timedelta(days=1)


def headers(case: str, client_id: str) -> tuple[tuple[str, str], ...]:
    """The v2 metadata of one refusal case: ``no credentials``, ``wrong signature``, ``stale date-time``,
    ``lacking the action`` (the Spark user, whose only grant is Pub on Topic:flights)."""
    base = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-request-id", "e2e"))
    now = datetime.now(UTC)
    if case == "no credentials":
        return base
    if case == "wrong signature":
        return base + sign(SDK_USER.access_key, "not-the-secret", now)
    if case == "stale date-time":
        stale = format_date_time(now - STALE_BY)
        value = f"MQv2-HMAC-SHA1 Credential={SDK_USER.access_key}, SignedHeaders={DATE_TIME}, "
        value += f"Signature={hmac_sha1_hex(SDK_USER.secret_key, stale)}"
        return (*base, (DATE_TIME, stale), (AUTHORIZATION, value))
    assert case == "lacking the action", case
    return base + sign(SPARK_USER.access_key, SPARK_USER.secret_key, now)


async def v2_send(gateway_addr: str, ca_pem: bytes, topic: str, metadata: tuple[tuple[str, str], ...]) -> Any:
    """One v2 SendMessage over TLS (no client certificate, as an application); the answer's status."""
    message = definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic),
        body=b"refused?",
        system_properties=definition_pb2.SystemProperties(
            message_id="0102FC000000013D600B1777E800000001", message_type=definition_pb2.MessageType.NORMAL
        ),
    )
    async with grpc.aio.secure_channel(gateway_addr, grpc.ssl_channel_credentials(ca_pem)) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        answer = await stub.SendMessage(
            service_pb2.SendMessageRequest(messages=[message]), metadata=metadata, timeout=10
        )
    return answer.status


async def register_as(namesrv_addr: str, tls: ClientTls, broker_addr: str) -> tuple[int, str]:
    """RegisterBroker claiming broker-a at ``broker_addr`` with ``tls``'s certificate: (code, remark)."""
    creds = grpc.ssl_channel_credentials(tls.ca_pem, tls.key_pem, tls.cert_pem)
    async with grpc.aio.secure_channel(namesrv_addr, creds) as channel:
        stub = namesrv_pb2_grpc.NameServerStub(channel)
        request = namesrv_pb2.RegisterBrokerRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=0, broker_addr=broker_addr
        )
        answer = await stub.RegisterBroker(request, timeout=10)
    return int(answer.code), str(answer.remark)
