"""`helm install` with the default values: the chart generates the auth Secret, a CA and every component's
certificate, the workloads use them, and `helm upgrade` keeps them.

Certificates are parsed with ``cryptography`` and put through real TLS handshakes (OpenSSL, in memory) under the
names the rendered manifests make the components dial. Upgrades render against :class:`FakeApiServer`, a loopback
stand-in for the API server that answers Helm's ``lookup`` with the Secrets a previous render produced. Renders
draw new random material each time: nothing here compares generated data across renders except where a lookup
must have kept it.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import ssl
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trustme
from chart_testkit import NAMESPACE, FakeApiServer, render_docs, render_files, secret_data
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

pytestmark = pytest.mark.e2e

CA = "mq-ca"
AUTH = "mq-auth"
COMPONENTS = ("namesrv", "broker", "gateway", "admin", "controller", "etcd")
GENERATED = sorted([CA, AUTH, *(f"mq-{c}-tls" for c in COMPONENTS)])
KEEP = {"helm.sh/resource-policy": "keep"}
TLS_DIR = "/etc/pyrocketmq/tls"
VALIDITY_DAYS = 365  # values.yaml tls.generated.validityDays
RENEW_BEFORE_DAYS = 30  # tls.generated.renewBeforeDays
HANDSHAKE_ROUNDS = 10
USERS = {
    "auth": {
        "users": [{"username": "app", "passwordSecret": {"name": "app-user", "key": "password"}}],
        "acls": [{"subject": "User:app", "resources": ["Topic:t"], "actions": ["Pub"], "decision": "Allow"}],
    }
}


def _by(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _generated(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "Secret"]


def _raw(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def _cert(secret: dict[str, Any], key: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(_raw(secret, key))


def _workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ("StatefulSet", "Deployment", "Job")]


def _component(doc: dict[str, Any]) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def _rolls(docs: list[dict[str, Any]]) -> dict[str, str]:
    """workload -> its checksum/security pod annotation (a change rolls its pods)."""
    return {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"]["checksum/security"]
        for d in docs
        if d["kind"] in ("StatefulSet", "Deployment")
    }


def _data(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {d["metadata"]["name"]: d["data"] for d in _generated(docs)}


@pytest.fixture(scope="module")
def install() -> list[dict[str, Any]]:
    return render_docs({})


# ------------------------------------------------------------------------------------------------ auth


def test_default_install_generates_the_auth_secret(install: list[dict[str, Any]]) -> None:
    assert sorted(d["metadata"]["name"] for d in _generated(install)) == GENERATED
    secret = _by(install, "Secret")[AUTH]
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["annotations"] == KEEP
    data = secret_data(install)[AUTH]
    assert sorted(data) == ["initAuthenticationUser", "innerClientAuthenticationCredentials"]
    user, inner = json.loads(data["initAuthenticationUser"]), json.loads(data["innerClientAuthenticationCredentials"])
    assert user["username"] == "rocketmq"
    assert inner["accessKey"] == "pyrocketmq-inner"
    for secret_value in (user["password"], inner["secretKey"]):
        assert re.fullmatch(r"[A-Za-z0-9]{32}", secret_value), secret_value
    # random, not a constant of the chart: a render without a cluster to look up in draws new ones
    again = json.loads(secret_data(render_docs({}))[AUTH]["initAuthenticationUser"])
    assert again["username"] == "rocketmq"
    assert again["password"] != user["password"]


def test_every_pod_takes_the_generated_auth_secret(install: list[dict[str, Any]]) -> None:
    """Each service's env names the generated Secret and keys it holds (so the kubelet can start the pod); the
    bootstrap Job (with auth.users set) reads the init user from it too."""
    data = secret_data(install)[AUTH]
    seen = set()
    for workload in _workloads(install) + _workloads(render_docs(USERS)):
        for entry in workload["spec"]["template"]["spec"]["containers"][0].get("env", []):
            ref = entry.get("valueFrom", {}).get("secretKeyRef")
            if ref is None or ref["name"] == "app-user":  # the user's own password Secret
                continue
            assert ref["name"] == AUTH, (workload["metadata"]["name"], ref)
            assert ref["key"] in data
            seen.add(_component(workload))
    assert seen == {"namesrv", "broker", "gateway", "controller", "auth-bootstrap"}


def test_an_existing_auth_secret_replaces_the_generated_one() -> None:
    docs = render_docs({"auth": {"existingSecret": "my-auth"}})
    assert AUTH not in _by(docs, "Secret")
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for w in _workloads(docs)
        for e in w["spec"]["template"]["spec"]["containers"][0].get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {"my-auth"}
    assert AUTH not in _by(render_docs({"auth": {"enabled": False}}), "Secret")


# ------------------------------------------------------------------------------------------------ certificates


def test_default_install_generates_a_ca_and_a_certificate_per_component(install: list[dict[str, Any]]) -> None:
    secrets = _by(install, "Secret")
    ca_secret = secrets[CA]
    assert ca_secret["type"] == "kubernetes.io/tls"
    assert ca_secret["metadata"]["annotations"] == KEEP
    ca = _cert(ca_secret)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    assert ca.issuer == ca.subject
    ca.verify_directly_issued_by(ca)
    _assert_key_pair(ca_secret, ca)
    for component in COMPONENTS:
        secret = secrets[f"mq-{component}-tls"]
        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert _raw(secret, "ca.crt") == _raw(ca_secret, "tls.crt")
        cert = _cert(secret)
        cert.verify_directly_issued_by(ca)
        _assert_key_pair(secret, cert)
        assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == f"mq-{component}"
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        assert usages == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}, component
        assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == VALIDITY_DAYS
        expires = cert.not_valid_after_utc.astimezone().date().isoformat()
        assert secret["metadata"]["annotations"]["pyrocketmq.io/expires"] == expires


def _assert_key_pair(secret: dict[str, Any], cert: x509.Certificate) -> None:
    key = serialization.load_pem_private_key(_raw(secret, "tls.key"), password=None)
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*der) == cert.public_key().public_bytes(*der)


def _hosts(addrs: str, separator: str) -> list[str]:
    """Host names of ``host:port`` items (``https://`` prefixes dropped)."""
    return [a.removeprefix("https://").rpartition(":")[0] for a in addrs.split(separator)]


def _dialled(docs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """component -> every name the rendered manifests make someone dial it by (in-pod dials: localhost/127.0.0.1)."""
    maps = {name: d.get("data", {}) for name, d in _by(docs, "ConfigMap").items()}
    sets = _by(docs, "StatefulSet")
    broker_pods = [
        f"{name}-{i}.{sts['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local"
        for name, sts in sets.items()
        if _component(sts) == "broker"
        for i in range(sts["spec"]["replicas"])
    ]
    etcd_args = dict(a.removeprefix("--").split("=", 1) for a in sets["mq-etcd"]["spec"]["template"]["spec"]
                     ["containers"][0]["args"][1:])  # fmt: skip
    broker = maps["mq-broker-broker-a"]
    local = ["localhost", "127.0.0.1"]
    namesrv_service = f"mq-namesrv.{NAMESPACE}.svc.cluster.local"
    return {
        "namesrv": [*_hosts(broker["MQ_BROKER_NAMESRV_ADDR"], ";"), namesrv_service, *local],
        "broker": [*broker_pods, *local],
        "gateway": [f"mq-gateway.{NAMESPACE}.svc.cluster.local", *local],
        # brokers dial the controller Service; etcd admits the controller by this name (a DNS SAN, as a host name)
        "controller": [*_hosts(broker["MQ_BROKER_CONTROLLER_ADDR"], ","), etcd_args["client-cert-allowed-hostname"]],
        "etcd": [*_hosts(maps["mq-controller"]["MQ_CONTROLLER_ETCD_ENDPOINTS"], ","), *local],
    }


def _files(secret: dict[str, Any], directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(_raw(secret, "tls.crt"))
    key.write_bytes(_raw(secret, "tls.key"))
    return cert, key


def _handshake(
    server: tuple[Path, Path], ca_pem: bytes, host: str, client: tuple[Path, Path] | None
) -> dict[str, Any] | None:
    """A TLS handshake in memory (OpenSSL, strict X.509 checks): the client trusts ``ca_pem`` and checks that the
    server's certificate names ``host``; the server, when ``client`` is given, requires a certificate of that CA.
    Returns the client certificate as the server verified it. Raises ssl.SSLError when either side refuses."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*server)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cadata=ca_pem.decode())
    for ctx in (server_ctx, client_ctx):
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if client is not None:
        server_ctx.verify_mode = ssl.CERT_REQUIRED
        server_ctx.load_verify_locations(cadata=ca_pem.decode())
        client_ctx.load_cert_chain(*client)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_server, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_client = client_ctx.wrap_bio(to_client, from_client, server_hostname=host)
    tls_server = server_ctx.wrap_bio(to_server, from_server, server_side=True)
    for _ in range(HANDSHAKE_ROUNDS):
        done = 0
        for side in (tls_client, tls_server):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if done == 2:
            return tls_server.getpeercert() or None
    raise AssertionError(f"{host}: no handshake after {HANDSHAKE_ROUNDS} rounds")


def _peer_cn(peer: dict[str, Any] | None) -> str:
    assert peer is not None
    return str(next(value for rdn in peer["subject"] for key, value in rdn if key == "commonName"))


def test_certificates_serve_every_name_they_are_dialled_by(install: list[dict[str, Any]], tmp_path: Path) -> None:
    """Each server certificate verifies (chain, host name, server usage) under every name the manifests make its
    peers dial; each server takes the client certificates the chart's settings admit as components (mutual TLS,
    client usage); a name the certificate does not carry, and a certificate of another CA, are refused."""
    secrets = _by(install, "Secret")
    ca_pem = _raw(secrets[CA], "tls.crt")
    files = {c: _files(secrets[f"mq-{c}-tls"], tmp_path / c) for c in COMPONENTS}
    maps = {name: d.get("data", {}) for name, d in _by(install, "ConfigMap").items()}
    etcd_args = _by(install, "StatefulSet")["mq-etcd"]["spec"]["template"]["spec"]["containers"][0]["args"]
    etcd_admits = ("--peer-cert-allowed-cn=", "--client-cert-allowed-hostname=")
    # who each server admits as a component (the chart's settings), by certificate name; etcd: peers and controllers
    admitted = {
        "namesrv": maps["mq-namesrv"]["MQ_NAMESRV_COMPONENT_IDENTITIES"].split(","),
        "broker": maps["mq-broker-broker-a"]["MQ_BROKER_COMPONENT_IDENTITIES"].split(","),
        "controller": maps["mq-controller"]["MQ_CONTROLLER_COMPONENT_IDENTITIES"].split(","),
        "etcd": [a.split("=", 1)[1] for a in etcd_args if a.startswith(etcd_admits)],
        "gateway": [],  # applications need TLS only: no client certificate asked for
    }
    assert sorted(admitted["broker"]) == ["mq-admin", "mq-broker", "mq-gateway"]
    assert sorted(admitted["etcd"]) == ["mq-controller", "mq-etcd"]
    for component, names in _dialled(install).items():
        clients = [c.removeprefix("mq-") for c in admitted[component]] or [None]
        for host in names:
            for client in clients:
                peer = _handshake(files[component], ca_pem, host, None if client is None else files[client])
                if client is not None:
                    assert _peer_cn(peer) == f"mq-{client}"
    # the checks bite: a broker certificate is no name server; a foreign CA's client certificate is refused
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(files["broker"], ca_pem, "mq-namesrv-0.mq-namesrv-headless.messaging.svc.cluster.local", None)
    stranger = trustme.CA().issue_cert("mq-broker", common_name="mq-broker")
    stranger_files = tmp_path / "stranger.crt", tmp_path / "stranger.key"
    stranger.cert_chain_pems[0].write_to_path(str(stranger_files[0]))
    stranger.private_key_pem.write_to_path(str(stranger_files[1]))
    with pytest.raises(ssl.SSLError):
        _handshake(files["namesrv"], ca_pem, "localhost", stranger_files)


def test_gateway_dns_names_reach_the_generated_certificate() -> None:
    docs = render_docs({"tls": {"certManager": {"gatewayDnsNames": ["mq.example.com"]}}})
    sans = _cert(_by(docs, "Secret")["mq-gateway-tls"]).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "mq.example.com" in sans.value.get_values_for_type(x509.DNSName)


def test_workloads_mount_their_generated_certificate(install: list[dict[str, Any]]) -> None:
    """Every pod (and the bootstrap Job, as admin) mounts its component's generated Secret read-only, the items it
    names exist in it, and its settings read the files there."""
    secrets = secret_data(install)
    docs = install + [d for d in render_docs(USERS) if d["kind"] == "Job"]
    seen = set()
    for workload in _workloads(docs):
        component = {"auth-bootstrap": "admin"}.get(_component(workload), _component(workload))
        pod = workload["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["secretName"] == f"mq-{component}-tls", workload["metadata"]["name"]
        assert {i["key"] for i in volume["secret"]["items"]} <= set(secrets[f"mq-{component}-tls"])
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls"]
        assert (mount["mountPath"], mount["readOnly"]) == (TLS_DIR, True)
        seen.add(component)
    assert seen == set(COMPONENTS)
    for name, configmap in _by(install, "ConfigMap").items():
        files = {k.split("_", 2)[-1]: v for k, v in configmap.get("data", {}).items() if k.endswith("_FILE")}
        if files:
            assert files == {"TLS_CERT_FILE": f"{TLS_DIR}/tls.crt", "TLS_KEY_FILE": f"{TLS_DIR}/tls.key",
                             "TLS_CA_FILE": f"{TLS_DIR}/ca.crt"}, name  # fmt: skip


def test_nothing_is_generated_when_the_certificates_come_from_elsewhere() -> None:
    existing = {c: f"own-{c}" for c in COMPONENTS}
    for tls in ({"existingSecrets": existing}, {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}):
        docs = render_docs({"tls": tls})
        assert sorted(_by(docs, "Secret")) == [AUTH], tls
    docs = render_docs({"tls": {"existingSecrets": existing}})
    volumes = {v["secret"]["secretName"] for w in _workloads(docs) for v in w["spec"]["template"]["spec"]["volumes"]
               if v["name"] == "tls"}  # fmt: skip
    assert volumes == {"own-namesrv", "own-broker", "own-gateway", "own-controller", "own-etcd"}
    assert sorted(_by(render_docs({"tls": {"enabled": False}}), "Secret")) == [AUTH]


# ------------------------------------------------------------------------------------------------ upgrades


def test_an_upgrade_keeps_every_generated_secret(install: list[dict[str, Any]]) -> None:
    """Against the Secrets the install created, `helm upgrade` renders them unchanged (the chart looked them up)
    and rolls no pod; without a cluster to look up in, the same render would have drawn new ones."""
    with FakeApiServer(_generated(install)) as api:
        upgrade = api.render({})
    assert _data(upgrade) == _data(install)
    for doc in _generated(upgrade):
        assert (
            doc["metadata"]["annotations"] == _by(install, "Secret")[doc["metadata"]["name"]]["metadata"]["annotations"]
        )
    assert _rolls(upgrade) == _rolls(install)
    asked = {p.rpartition("/")[2] for p in api.paths if p.startswith(f"/api/v1/namespaces/{NAMESPACE}/secrets/")}
    assert asked == set(GENERATED)
    fresh = _data(render_docs({}, is_upgrade=True))
    assert all(fresh[name] != data for name, data in _data(install).items())


def test_an_upgrade_reissues_only_what_changed_under_the_live_ca(install: list[dict[str, Any]]) -> None:
    live = _generated(install)
    ca_pem = _raw(_by(install, "Secret")[CA], "tls.crt")
    ca = x509.load_pem_x509_certificate(ca_pem)
    before = _data(install)

    # a broker group more: the broker certificate is issued again for broker-b's pods too, by the live CA
    groups = {"broker": {"groups": [{"name": "broker-a"}, {"name": "broker-b"}]}}
    with FakeApiServer(live) as api:
        grown = _by(api.render(groups), "Secret")
    changed = sorted(n for n, d in _data(list(grown.values())).items() if d != before[n])
    assert changed == ["mq-broker-tls"]
    broker = _cert(grown["mq-broker-tls"])
    broker.verify_directly_issued_by(ca)
    sans = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"*.mq-broker-broker-b-headless.{NAMESPACE}.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)

    # a certificate's Secret deleted by hand: only it is issued again, by the live CA
    with FakeApiServer([d for d in live if d["metadata"]["name"] != "mq-etcd-tls"]) as api:
        healed = _by(api.render({}), "Secret")
    assert sorted(n for n, d in _data(list(healed.values())).items() if d != before[n]) == ["mq-etcd-tls"]
    assert _raw(healed["mq-etcd-tls"], "ca.crt") == ca_pem
    _cert(healed["mq-etcd-tls"]).verify_directly_issued_by(ca)

    # the CA's Secret deleted: a new CA and every certificate under it; nothing of the old CA is mixed in
    with FakeApiServer([d for d in live if d["metadata"]["name"] != CA]) as api:
        renewed = _by(api.render({}), "Secret")
    new_ca = _cert(renewed[CA])
    assert _raw(renewed[CA], "tls.crt") != ca_pem
    for component in COMPONENTS:
        secret = renewed[f"mq-{component}-tls"]
        assert _raw(secret, "ca.crt") == _raw(renewed[CA], "tls.crt")
        _cert(secret).verify_directly_issued_by(new_ca)
    assert _data(list(renewed.values()))[AUTH] == before[AUTH]  # the credentials are no certificate


def _expiring(live: list[dict[str, Any]], name: str, in_days: int) -> list[dict[str, Any]]:
    """``live`` with Secret ``name`` annotated to expire ``in_days`` from today."""
    out = copy.deepcopy(live)
    (secret,) = [d for d in out if d["metadata"]["name"] == name]
    secret["metadata"]["annotations"]["pyrocketmq.io/expires"] = (date.today() + timedelta(days=in_days)).isoformat()
    return out


def test_an_upgrade_renews_a_certificate_near_its_end_and_rolls_its_pods(install: list[dict[str, Any]]) -> None:
    """The same release some weeks apart: while the gateway's certificate has more than renewBeforeDays left an
    upgrade keeps it; within them the upgrade issues a new one (same CA, a full validity again) and rolls the
    gateway pods, which read their client certificate at start; no other pod rolls."""
    live = _generated(install)
    with FakeApiServer(_expiring(live, "mq-gateway-tls", RENEW_BEFORE_DAYS + 10)) as api:
        earlier = api.render({})
    with FakeApiServer(_expiring(live, "mq-gateway-tls", RENEW_BEFORE_DAYS - 10)) as api:
        later = api.render({})
    assert _data(earlier)["mq-gateway-tls"] == _data(install)["mq-gateway-tls"]
    renewed = _by(later, "Secret")["mq-gateway-tls"]
    assert renewed["data"] != _data(install)["mq-gateway-tls"]
    assert _raw(renewed, "ca.crt") == _raw(_by(install, "Secret")[CA], "tls.crt")
    cert = _cert(renewed)
    assert cert.not_valid_after_utc > datetime.now().astimezone() + timedelta(days=VALIDITY_DAYS - 1)
    before, after = _rolls(earlier), _rolls(later)
    assert [name for name in before if before[name] != after[name]] == ["mq-gateway"]


def test_an_upgrade_keeps_the_credentials_and_fills_only_a_missing_key(install: list[dict[str, Any]]) -> None:
    live = copy.deepcopy(_generated(install))
    (auth,) = [d for d in live if d["metadata"]["name"] == AUTH]
    kept = auth["data"].pop("innerClientAuthenticationCredentials")
    with FakeApiServer(live) as api:
        upgraded = secret_data(api.render({}))[AUTH]
    assert upgraded["initAuthenticationUser"] == secret_data(install)[AUTH]["initAuthenticationUser"]
    inner = json.loads(upgraded["innerClientAuthenticationCredentials"])
    assert inner["accessKey"] == "pyrocketmq-inner"
    assert inner["secretKey"] != json.loads(base64.b64decode(kept))["secretKey"]


# ------------------------------------------------------------------------------------------------ NOTES


def test_notes_show_how_to_read_the_generated_secrets(install: list[dict[str, Any]], tmp_path: Path) -> None:
    """NOTES.txt's kubectl lines, run with a real kubectl against a cluster holding the install's Secrets, print
    the init super user and write the CA; with the operator's own Secrets NOTES.txt has no such lines."""
    notes = render_files({})["pyrocketmq/templates/NOTES.txt"]
    lines = [line.strip() for line in notes.splitlines() if line.strip().startswith("kubectl get secret ")]
    assert len(lines) == 2, notes
    with FakeApiServer(_generated(install)) as api:
        outputs = [api.kubectl(line, tmp_path) for line in lines]
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr
    assert json.loads(outputs[0].stdout) == json.loads(secret_data(install)[AUTH]["initAuthenticationUser"])
    assert (tmp_path / "ca.crt").read_bytes() == _raw(_by(install, "Secret")[CA], "tls.crt")
    assert "Secret mq-admin-tls" in notes
    own = {"auth": {"existingSecret": "a"}, "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}}
    assert "kubectl get secret" not in render_files(own)["pyrocketmq/templates/NOTES.txt"]
