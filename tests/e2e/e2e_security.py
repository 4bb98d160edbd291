"""The container round's certificates and Secrets: what an operator would create before `helm install`.

A trustme CA issues one certificate per chart identity (``mq-namesrv``, ``mq-broker``, ``mq-gateway``, ``mq-admin``,
``mq-controller``, ``mq-etcd``: the chart's default ``<fullname>-<component>`` names) with the SANs the containers
dial here (127.0.0.1, localhost) and in a cluster (the Service and pod DNS names), plus test-only identities:
``mq-spark`` (the Spark driver's client certificate, no component) and ``mq-outsider`` (signed by the same CA, no
component either).
:func:`cluster_secrets` gives the Secret objects (name -> key -> value) the chart's values name. Test keys only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
SUPER_USER: Final = Credentials("rocketmq", "e2e-super-secret-7Qx")
INNER: Final = Credentials("e2e-inner", "e2e-inner-secret-Kp3")
SPARK_USER: Final = Credentials("spark-flights", "e2e-spark-secret-V8m")
SDK_USER: Final = Credentials("sdk-app", "e2e-sdk-secret-2Lw")
SECRETS_SHOWN_NOWHERE: Final = (SUPER_USER.secret_key, INNER.secret_key, SPARK_USER.secret_key, SDK_USER.secret_key)


def identity(name: str) -> str:
    return f"{RELEASE_PREFIX}-{name}"


@dataclass(slots=True)
class Pki:
    """A CA and the PEMs it issued, by short name (``broker``, ``admin``, ``spark``, ...)."""

    directory: Path
    ca: trustme.CA = field(default_factory=lambda: trustme.CA(organization_name="PyRocketMQ e2e CA"))
    certs: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "ca.crt").write_bytes(self.ca_pem)
        for name in (*COMPONENTS, *EXTRA_IDENTITIES):
            sans = ["127.0.0.1", "localhost", identity(name), f"*.{identity(name)}-headless.{NAMESPACE_DNS}"]
            issued = self.ca.issue_cert(*sans, common_name=identity(name))
            chain = b"".join(p.bytes() for p in issued.cert_chain_pems)
            self.certs[name] = (chain, issued.private_key_pem.bytes())
            (self.directory / f"{name}.crt").write_bytes(chain)
            key = self.directory / f"{name}.key"
            key.write_bytes(issued.private_key_pem.bytes())
            key.chmod(0o600)

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem.bytes()

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


def _user_json(c: Credentials) -> str:
    return f'{{"username": "{c.access_key}", "password": "{c.secret_key}"}}'


def cluster_secrets(pki: Pki) -> dict[str, dict[str, str]]:
    """The Secrets tests/e2e/values-containers.yaml names: one kubernetes.io/tls Secret (+ ca.crt) per component,
    the auth Secret (init super user, inner credentials) and the users' password Secrets."""
    out = {
        f"{identity(c)}-tls": {
            "tls.crt": pki.certs[c][0].decode(),
            "tls.key": pki.certs[c][1].decode(),
            "ca.crt": pki.ca_pem.decode(),
        }
        for c in COMPONENTS
    }
    out["mq-auth"] = {
        "initAuthenticationUser": _user_json(SUPER_USER),
        "innerClientAuthenticationCredentials": (
            f'{{"accessKey": "{INNER.access_key}", "secretKey": "{INNER.secret_key}"}}'
        ),
    }
    out["mq-spark-user"] = {"password": SPARK_USER.secret_key}
    out["mq-sdk-user"] = {"password": SDK_USER.secret_key}
    return out


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
