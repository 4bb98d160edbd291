"""The broker's STOREHOST from a DNS-name broker_ip: retried while the name does not resolve yet, bounded."""

from __future__ import annotations

import socket

import pytest
from mq_broker import settings as settings_module
from mq_broker.controller import resolve_store_ip
from mq_broker.settings import BrokerSettings


def flaky_lookup(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[str]:
    """gethostbyname fails ``failures`` times, then answers 127.0.0.7; returns the names asked for."""
    asked: list[str] = []

    def lookup(name: str) -> str:
        asked.append(name)
        if len(asked) <= failures:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return "127.0.0.7"

    monkeypatch.setattr(settings_module.socket, "gethostbyname", lookup)
    return asked


async def test_a_name_that_resolves_late_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = flaky_lookup(monkeypatch, failures=2)
    s = BrokerSettings(broker_ip="broker-a-0.broker-a-headless.mq.svc.cluster.local", broker_ip_resolve_wait_ms=5_000)
    assert await resolve_store_ip(s, retry_interval_s=0.01) == "127.0.0.7"
    assert asked == [s.broker_ip] * 3


async def test_without_a_wait_an_unresolvable_name_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = flaky_lookup(monkeypatch, failures=100)
    s = BrokerSettings(broker_ip="nowhere.invalid", broker_ip_resolve_wait_ms=0)
    with pytest.raises(ValueError, match="neither an IP nor a resolvable name"):
        await resolve_store_ip(s, retry_interval_s=0.01)
    assert len(asked) == 1


async def test_an_ip_literal_needs_no_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = flaky_lookup(monkeypatch, failures=100)
    assert await resolve_store_ip(BrokerSettings(broker_ip="::1")) == "::1"
    assert asked == []
