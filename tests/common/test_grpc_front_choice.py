"""The gRPC front choice (mq_common.grpc_front, MQ_<SERVICE>_GRPC_SERVER): auto, native, grpcio; TLS; a missing
pygrpc-native; the settings of every service and the front each service's server runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mq_broker.settings import BrokerSettings
from mq_common.grpc_front import (
    NATIVE_REFUSED_OPTIONS,
    GrpcFrontError,
    native_front_available,
    native_options,
    resolve_front,
)
from mq_common.grpc_server import SERVER_OPTIONS, ServiceServer
from mq_controller.settings import ControllerSettings
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings
from pydantic import ValidationError

ENV_NAMES = ("MQ_GATEWAY_GRPC_SERVER", "MQ_BROKER_GRPC_SERVER", "MQ_NAMESRV_GRPC_SERVER", "MQ_CONTROLLER_GRPC_SERVER")


@pytest.fixture(autouse=True)
def _no_front_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """make test-other-front sets these for the whole run; these tests set their own."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """pygrpc-native unimportable, as on a platform without its wheels (a None entry makes `import` raise)."""
    for name in [n for n in sys.modules if n == "pygrpc_native" or n.startswith("pygrpc_native.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pygrpc_native", None)


def test_auto_is_native_in_plaintext_and_grpcio_with_tls() -> None:
    assert native_front_available()
    assert resolve_front("auto", tls_enabled=False) == "native"
    assert resolve_front("auto", tls_enabled=True) == "grpcio"
    assert resolve_front("grpcio", tls_enabled=False) == "grpcio"
    assert resolve_front("native", tls_enabled=False) == "native"


def test_native_with_tls_is_an_error_not_a_fallback() -> None:
    with pytest.raises(GrpcFrontError, match="cannot serve TLS"):
        resolve_front("native", tls_enabled=True)
    with pytest.raises(GrpcFrontError, match="cannot serve TLS"):
        ServiceServer(["x.Y"], grpc_server="native", tls_enabled=True)


@pytest.mark.usefixtures("no_native")
async def test_without_pygrpc_native_auto_is_grpcio_and_native_fails() -> None:
    assert not native_front_available()
    assert resolve_front("auto", tls_enabled=False) == "grpcio"
    assert ServiceServer(["x.Y"], grpc_server="auto").front == "grpcio"
    with pytest.raises(GrpcFrontError, match="not installed"):
        resolve_front("native", tls_enabled=False)


def test_defaults_gateway_auto_other_services_grpcio() -> None:
    assert GatewaySettings().grpc_server == "auto"
    for settings in (BrokerSettings(), NamesrvSettings(), ControllerSettings()):
        assert settings.grpc_server == "grpcio"


def test_env_var_is_read_per_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_GATEWAY_GRPC_SERVER", "grpcio")
    monkeypatch.setenv("MQ_BROKER_GRPC_SERVER", "native")
    assert GatewaySettings().grpc_server == "grpcio"
    assert BrokerSettings().grpc_server == "native"
    monkeypatch.setenv("MQ_BROKER_GRPC_SERVER", "rust")
    with pytest.raises(ValidationError, match="grpc_server"):
        BrokerSettings()


def test_settings_refuse_native_with_tls(tmp_path: Path) -> None:
    tls = {"tls_enabled": True, "tls_cert_file": tmp_path / "c.pem", "tls_key_file": tmp_path / "k.pem"}
    with pytest.raises(ValidationError, match="cannot serve TLS"):
        GatewaySettings(grpc_server="native", **tls)  # type: ignore[arg-type]
    # auto with TLS: grpcio, no error
    assert resolve_front(GatewaySettings(**tls).grpc_server, tls_enabled=True) == "grpcio"  # type: ignore[arg-type]


def test_native_options_drop_what_pygrpc_native_refuses() -> None:
    refused = [(name, 1) for name in sorted(NATIVE_REFUSED_OPTIONS)]
    assert native_options([*SERVER_OPTIONS, *refused]) == SERVER_OPTIONS
    # ServiceServer sets none of them today: nothing is silently dropped
    assert not {name for name, _ in SERVER_OPTIONS} & NATIVE_REFUSED_OPTIONS
