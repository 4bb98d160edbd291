"""GatewaySettings: defaults, MQ_GATEWAY_ environment, YAML file, validation, and the producer config."""

from __future__ import annotations

from pathlib import Path

import pytest
from mq_gateway.controller import producer_config
from mq_gateway.settings import GatewaySettings
from pydantic import ValidationError


def test_defaults() -> None:
    s = GatewaySettings()
    assert (s.listen_port, s.send_msg_timeout_ms, s.retry_times_when_send_failed) == (8081, 3000, 2)
    assert not s.retry_another_broker_when_not_store_ok
    assert not s.send_latency_fault_enable
    assert (s.compress_msg_body_over_howmuch_bytes, s.max_message_size_bytes) == (4096, 4 * 1024 * 1024)
    assert (s.poll_name_server_interval_ms, s.max_batch_messages) == (30_000, 1000)
    assert s.namesrv_addrs() == ["127.0.0.1:9876"]


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_GATEWAY_LISTEN_PORT", "18081")
    monkeypatch.setenv("MQ_GATEWAY_NAMESRV_ADDR", "127.0.0.1:9876; 127.0.0.1:9877,")
    monkeypatch.setenv("MQ_GATEWAY_SEND_LATENCY_FAULT_ENABLE", "true")
    monkeypatch.setenv("MQ_GATEWAY_RETRY_TIMES_WHEN_SEND_FAILED", "4")
    s = GatewaySettings()
    assert s.listen_port == 18081
    assert s.namesrv_addrs() == ["127.0.0.1:9876", "127.0.0.1:9877"]
    config = producer_config(s)
    assert config.send_latency_fault_enable
    assert config.times_total_sync == 5
    assert config.producer_group == s.producer_group


def test_yaml_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("send_msg_timeout_ms: 5000\nmax_batch_messages: 10\n", encoding="utf-8")
    monkeypatch.setenv("MQ_GATEWAY_CONFIG_FILE", str(path))
    monkeypatch.setenv("MQ_GATEWAY_MAX_BATCH_MESSAGES", "20")  # the environment wins over the file
    s = GatewaySettings()
    assert (s.send_msg_timeout_ms, s.max_batch_messages) == (5000, 20)


@pytest.mark.parametrize(
    ("field", "value"),
    [("send_msg_timeout_ms", 0), ("max_message_size_bytes", 4 * 1024 * 1024 + 1), ("listen_port", 70000)],
)
def test_invalid_values(field: str, value: int) -> None:
    with pytest.raises(ValidationError):
        GatewaySettings(**{field: value})  # type: ignore[arg-type]


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError):
        GatewaySettings(no_such_field=1)  # type: ignore[call-arg]
