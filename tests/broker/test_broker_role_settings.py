"""BrokerSettings.broker_role (MessageStoreConfig.brokerRole) and BrokerStartup's slave-id rule."""

from __future__ import annotations

import pytest
from mq_broker.settings import BrokerSettings
from mq_broker.store.config import BrokerRole
from pydantic import ValidationError


def test_role_defaults_to_async_master_and_reaches_the_store_config() -> None:
    settings = BrokerSettings()
    assert settings.broker_role is BrokerRole.ASYNC_MASTER
    slave = BrokerSettings(broker_role=BrokerRole.SLAVE, broker_id=1)
    assert slave.message_store_config().broker_role is BrokerRole.SLAVE


def test_role_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_BROKER_BROKER_ROLE", "SYNC_MASTER")
    assert BrokerSettings().broker_role is BrokerRole.SYNC_MASTER


def test_a_slave_with_the_master_id_is_refused() -> None:
    with pytest.raises(ValidationError, match="broker_id > 0"):
        BrokerSettings(broker_role=BrokerRole.SLAVE, broker_id=0)


def test_the_frame_linger_must_stay_below_the_ha_heartbeat_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQ_BROKER_HA_ASYNC_FRAME_LINGER_MS", "50")
    assert BrokerSettings().message_store_config().ha_async_frame_linger_ms == 50
    with pytest.raises(ValidationError, match="ha_async_frame_linger_ms must be below"):
        BrokerSettings(ha_send_heartbeat_interval_ms=50)
