"""Helpers of the consumer-state tests: polling for a condition with a generous deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE_S = 30.0
POLL_INTERVAL_S = 0.01


async def wait_until(check: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    """Poll ``check`` without blocking the event loop; AssertionError when it is still false at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"condition not met within {timeout_s} s"
        await asyncio.sleep(POLL_INTERVAL_S)
