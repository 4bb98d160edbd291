"""Fixtures of the hostile-input tests: one real local cluster per module (tests/fuzz/fuzz_cluster.py), and the
folder's helper modules importable by name (--import-mode=importlib)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fuzz_cluster import fuzz_spec  # noqa: E402
from mq_local.cluster import LocalCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(fuzz_spec(tmp_path_factory.mktemp("fuzz"))) as running:
        yield running
