"""TLS settings of every service (env names, validation, client/server configs) and the peer identity rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from mq_broker.settings import BrokerSettings
from mq_common.tls import ComponentGuard, PeerIdentity, TlsClientAuth, TlsClientConfig, TlsServerConfig, peer_identity
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings
from pydantic import ValidationError


def test_plaintext_is_the_default_of_every_service() -> None:
    for settings in (NamesrvSettings(), BrokerSettings(), GatewaySettings()):
        assert settings.tls_enabled is False
        assert settings.tls_server_config() is None
        assert settings.tls_client_config() is None
        assert settings.component_identities_enforced is False


def test_env_names_follow_the_service_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_BROKER_TLS_ENABLED", "true")
    monkeypatch.setenv("MQ_BROKER_TLS_CERT_FILE", "/tls/tls.crt")
    monkeypatch.setenv("MQ_BROKER_TLS_KEY_FILE", "/tls/tls.key")
    monkeypatch.setenv("MQ_BROKER_TLS_CA_FILE", "/tls/ca.crt")
    monkeypatch.setenv("MQ_BROKER_TLS_CLIENT_AUTH", "require")
    monkeypatch.setenv("MQ_BROKER_COMPONENT_IDENTITIES", "gateway.pyrocketmq, admin.pyrocketmq")
    settings = BrokerSettings()
    assert settings.tls_server_config() == TlsServerConfig(
        Path("/tls/tls.crt"), Path("/tls/tls.key"), Path("/tls/ca.crt"), TlsClientAuth.REQUIRE
    )
    # Outbound calls present the server pair unless a client pair is set.
    assert settings.tls_client_config() == TlsClientConfig(
        Path("/tls/ca.crt"), Path("/tls/tls.crt"), Path("/tls/tls.key")
    )
    assert settings.component_identity_names == {"gateway.pyrocketmq", "admin.pyrocketmq"}
    assert ComponentGuard.from_settings(settings) == ComponentGuard(True, settings.component_identity_names)


def test_client_pair_and_server_name_override() -> None:
    settings = GatewaySettings(
        tls_enabled=True,
        tls_cert_file=Path("s.pem"),
        tls_key_file=Path("s-key.pem"),
        tls_client_cert_file=Path("c.pem"),
        tls_client_key_file=Path("c-key.pem"),
        tls_server_name_override="broker.pyrocketmq",
    )
    assert settings.tls_client_config() == TlsClientConfig(None, Path("c.pem"), Path("c-key.pem"), "broker.pyrocketmq")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tls_enabled": True}, "needs tls_cert_file and tls_key_file"),
        ({"tls_enabled": True, "tls_cert_file": "a", "tls_key_file": "b", "tls_client_auth": "require"}, "tls_ca_file"),
        ({"component_identities": "broker.pyrocketmq"}, "tls_client_auth=require"),
        (
            {
                "tls_enabled": True,
                "tls_cert_file": "a",
                "tls_key_file": "b",
                "tls_client_auth": "optional",
                "component_identities": "broker.pyrocketmq",
            },
            "tls_client_auth=require",
        ),
        ({"tls_client_auth": "sometimes"}, "tls_client_auth"),
    ],
)
def test_inconsistent_tls_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        NamesrvSettings(**fields)  # type: ignore[arg-type]


class _Context:
    def __init__(self, auth: dict[str, list[bytes]]) -> None:
        self._auth = auth

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth


BROKER_CTX = _Context(
    {
        "transport_security_type": [b"ssl"],
        "x509_common_name": [b"broker-0"],
        "x509_subject_alternative_name": [b"broker.pyrocketmq", b"127.0.0.1"],
    }
)


def test_peer_identity_reads_the_certificate_names() -> None:
    assert peer_identity(BROKER_CTX) == PeerIdentity("broker-0", ("broker.pyrocketmq", "127.0.0.1"))
    assert peer_identity(_Context({})) is None
    assert peer_identity(_Context({"transport_security_type": [b"ssl"]})) is None
    # Names without an ssl transport are not trusted.
    assert peer_identity(_Context({"x509_common_name": [b"broker-0"]})) is None


def test_component_guard() -> None:
    assert ComponentGuard().refusal(_Context({}), "RegisterBroker") is None
    any_cert = ComponentGuard(enforced=True)
    assert any_cert.refusal(BROKER_CTX, "RegisterBroker") is None
    assert "presented none" in (any_cert.refusal(_Context({}), "RegisterBroker") or "")
    brokers = ComponentGuard(enforced=True, allowed=frozenset({"broker.pyrocketmq"}))
    assert brokers.refusal(BROKER_CTX, "RegisterBroker") is None
    gateway = _Context({"transport_security_type": [b"ssl"], "x509_common_name": [b"gateway.pyrocketmq"]})
    remark = brokers.refusal(gateway, "UnregisterBroker")
    assert remark == "UnregisterBroker is not allowed for certificate gateway.pyrocketmq: not a component identity"
