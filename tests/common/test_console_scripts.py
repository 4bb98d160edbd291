"""Every installed console script answers ``--help`` and ``--version`` and exits 0 without starting anything; an
unknown option is a usage error (exit 2).

The scripts run as subprocesses from the virtual environment's ``bin`` (next to ``sys.executable``). For the
services, ``--help`` runs with the service's port set to one this test holds open (a service that tried to start
would fail to bind it and exit 2) and, for the broker, a store folder that must not appear.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest
from mq_broker.settings import BrokerSettings
from mq_common.service_cli import env_prefix
from mq_common.settings import ServiceSettings
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings

# A bound on each run (these scripts exit on their own within a few seconds), not a timing assertion.
SCRIPT_RUN_LIMIT_S = 60.0
BIN_DIR = Path(sys.executable).parent


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    distribution: str
    settings_cls: type[ServiceSettings] | None = None


SERVICES = (
    Script("mqnamesrv", "mq-namesrv", NamesrvSettings),
    Script("mqbroker", "mq-broker", BrokerSettings),
    Script("mqgateway", "mq-gateway", GatewaySettings),
)
TOOLS = (Script("mqadmin", "mq-client"), Script("mqlocal", "mq-local"))
ALL_SCRIPTS = SERVICES + TOOLS


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = BIN_DIR / script
    assert path.is_file(), f"{script} is not installed in {BIN_DIR}"
    return subprocess.run(
        [str(path), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=SCRIPT_RUN_LIMIT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port this test listens on for its whole run."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port: int = sock.getsockname()[1]
        yield port


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda s: s.name)
def test_version_prints_the_installed_distribution_version(script: Script) -> None:
    result = _run(script.name, "--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{script.name} {version(script.distribution)}\n"


@pytest.mark.parametrize("script", SERVICES, ids=lambda s: s.name)
def test_service_help_lists_every_setting_and_starts_nothing(script: Script, held_port: int, tmp_path: Path) -> None:
    assert script.settings_cls is not None
    prefix = env_prefix(script.settings_cls)
    store_dir = tmp_path / "store"
    env = {
        **os.environ,
        f"{prefix}LISTEN_PORT": str(held_port),
        f"{prefix}METRICS_PORT": str(held_port),
        "MQ_BROKER_STORE_PATH_ROOT_DIR": str(store_dir),
    }

    result = _run(script.name, "--help", env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {script.name} ")
    for name, field in script.settings_cls.model_fields.items():
        assert f"{prefix}{name.upper()}  (default: " in result.stdout
        assert field.description is not None
        assert field.description in result.stdout
    assert f"{prefix}CONFIG_FILE" in result.stdout
    assert result.stderr == ""  # no "started" log line
    assert not store_dir.exists()


def test_broker_help_shows_defaults_as_the_environment_spells_them() -> None:
    result = _run("mqbroker", "--help")

    assert "MQ_BROKER_FLUSH_DISK_TYPE  (default: ASYNC_FLUSH)" in result.stdout
    assert "MQ_BROKER_AUTO_CREATE_TOPIC_ENABLE  (default: true)" in result.stdout
    assert "MQ_BROKER_LISTEN_PORT  (default: 10911)" in result.stdout


@pytest.mark.parametrize("script", TOOLS, ids=lambda s: s.name)
def test_tool_help_shows_usage_and_the_version_option(script: Script) -> None:
    result = _run(script.name, "--help")

    assert result.returncode == 0, result.stderr
    assert f"Usage: {script.name} " in result.stdout
    assert "--version" in result.stdout


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda s: s.name)
def test_unknown_option_is_a_usage_error(script: Script, held_port: int) -> None:
    env = {**os.environ, "MQ_GATEWAY_LISTEN_PORT": str(held_port)}

    result = _run(script.name, "--no-such-option", env=env)

    assert result.returncode == 2
    assert "--no-such-option" in result.stderr
    assert "usage" in result.stderr.lower()
