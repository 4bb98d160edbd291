"""Chaos tests: make the shared helpers in chaos_testkit.py importable (the suite runs --import-mode=importlib) and
the ``brokers`` fixture (every mqbroker process a test started, reaped at teardown)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from chaos_testkit import BrokerProcesses  # noqa: E402  (importable only after the path insert)


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[BrokerProcesses]:
    started = BrokerProcesses(tmp_path)
    try:
        yield started
    finally:
        started.close_all()
