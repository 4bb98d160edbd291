"""A service raises its open-files soft limit to the hard limit (mq_common.resource_limits)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from mq_common.resource_limits import raise_open_files_limit

CHILD = "from mq_common.resource_limits import raise_open_files_limit as r; print(r())"


def _lowered_soft_limit(soft: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_low_soft_limit_is_raised_to_the_hard_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"needs a finite hard limit above 256, have {hard}")
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        preexec_fn=lambda: _lowered_soft_limit(256),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert int(done.stdout) == hard


def test_the_limit_in_force_is_returned() -> None:
    assert raise_open_files_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
