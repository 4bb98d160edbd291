"""Background task helpers shared by the services' periodic loops."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it ended. Its CancelledError is swallowed; any other
    exception it ends with propagates. Call it on the task's own event loop."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
