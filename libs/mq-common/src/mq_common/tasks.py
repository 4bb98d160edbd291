"""Background task helpers shared by the services' periodic loops."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from structlog.typing import FilteringBoundLogger


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it ended. Its CancelledError is swallowed; any other
    exception it ends with propagates. Call it on the task's own event loop."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def cancel_and_log(task: asyncio.Task[Any], log: FilteringBoundLogger, event: str, **fields: object) -> None:
    """Like :func:`cancel_and_wait`, for a task whose failure must not stop the caller's shutdown: an exception
    it ended with (other than its cancellation) is logged as ``event`` with its traceback, not raised."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception(event, **fields)
