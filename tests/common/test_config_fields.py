"""Settings declared once: the services' settings take the store's and the producer's defaults and descriptions
from MessageStoreConfig / ProducerConfig, and build them by field name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mq_broker.settings import BrokerSettings
from mq_broker.store.config import FlushDiskType, MessageStoreConfig
from mq_client.producer.config import ProducerConfig
from mq_common.config_fields import DESCRIPTION_KEY
from mq_gateway.controller import producer_config
from mq_gateway.settings import GatewaySettings
from pydantic_settings import BaseSettings


def _mirrored(settings_cls: type[BaseSettings], config_cls: type[object]) -> list[str]:
    return [f.name for f in dataclasses.fields(config_cls) if f.name in settings_cls.model_fields]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings_cls", "config_cls", "count"),
    [(BrokerSettings, MessageStoreConfig, 41), (GatewaySettings, ProducerConfig, 12)],
)
def test_each_mirrored_setting_is_described_once_in_the_dataclass(
    settings_cls: type[BaseSettings], config_cls: type[object], count: int
) -> None:
    names = _mirrored(settings_cls, config_cls)
    assert len(names) == count
    by_name = {f.name: f for f in dataclasses.fields(config_cls)}  # type: ignore[arg-type]
    for name in names:
        described = by_name[name].metadata.get(DESCRIPTION_KEY)
        if described is not None:  # required fields (store path, producer group) are the settings' own
            assert settings_cls.model_fields[name].description == described, name


def test_broker_defaults_are_the_store_defaults(tmp_path: Path) -> None:
    settings = BrokerSettings(store_path_root_dir=tmp_path)
    assert settings.message_store_config() == MessageStoreConfig(store_path_root_dir=tmp_path)


def test_broker_settings_reach_the_store_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_BROKER_SYNC_FLUSH_TIMEOUT_MS", "7")
    monkeypatch.setenv("MQ_BROKER_FLUSH_DISK_TYPE", "SYNC_FLUSH")
    config = BrokerSettings(store_path_root_dir=tmp_path, delete_when="03;05").message_store_config()
    assert (config.sync_flush_timeout_ms, config.flush_disk_type, config.delete_when) == (
        7,
        FlushDiskType.SYNC_FLUSH,
        "03;05",
    )


def test_gateway_defaults_are_the_producer_defaults_but_its_own_overrides() -> None:
    config = producer_config(GatewaySettings())
    assert config == ProducerConfig(
        producer_group="MQ_GATEWAY_PRODUCER_GROUP",
        max_in_flight_messages=10_000,
        max_in_flight_bytes=256 * 1024 * 1024,
    )
    assert producer_config(GatewaySettings(send_msg_timeout_ms=1234)).send_msg_timeout_ms == 1234
