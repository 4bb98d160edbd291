"""Broker tests: make the shared helpers in broker_testkit.py importable (the suite runs --import-mode=importlib)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from broker_grpc_testkit import RunningBrokers  # noqa: E402  (importable only after the path insert)
from mq_broker.controller import BrokerController  # noqa: E402

if TYPE_CHECKING:
    from mq.broker.v1 import broker_pb2_grpc


@pytest.fixture
async def brokers() -> AsyncIterator[RunningBrokers]:
    """Start in-process brokers with ``brokers.start(root, **settings)``; every one is stopped at teardown."""
    running = RunningBrokers()
    try:
        yield running
    finally:
        await running.stop_all()


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub]]:
    """One in-process broker (broker_grpc_testkit.broker_settings: auto-create on, SYNC_FLUSH) and its stub."""
    running = RunningBrokers()
    try:
        yield await running.start(tmp_path / "store")
    finally:
        await running.stop_all()
