"""Background task helpers shared by the services' periodic loops.

Waits with a deadline use ``asyncio.timeout``, never ``asyncio.wait_for`` (banned by the ruff config): on Python 3.11
``wait_for`` returns the inner result when its own task is cancelled in the same loop turn as the inner awaitable
completes, so the cancellation is lost and a loop that ``cancel_and_wait`` stops runs on (an HAClient reconnecting
forever after its broker's shutdown was one CI failure). ``asyncio.timeout`` counts cancellations per task and
re-raises the outer one."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from structlog.typing import FilteringBoundLogger


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set, at most ``timeout_s`` seconds; True when it was set. A cancellation of the caller
    always propagates (see the module docstring). Call it on the event's loop."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
    return event.is_set()


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it ended. Its CancelledError is swallowed; any other
    exception it ends with propagates. A cancellation of the caller while it waits propagates (``await task``
    under a ``suppress(CancelledError)`` would swallow that too, and cancel the task a second time). Call it on the
    task's own event loop."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait((task,))
    if not task.cancelled():
        task.result()


async def cancel_and_log(task: asyncio.Task[Any], log: FilteringBoundLogger, event: str, **fields: object) -> None:
    """Like :func:`cancel_and_wait`, for a task whose failure must not stop the caller's shutdown: an exception
    it ended with (other than its cancellation) is logged as ``event`` with its traceback, not raised."""
    task.cancel()
    await asyncio.wait((task,))
    if task.cancelled():
        return
    try:
        task.result()
    except Exception:
        log.exception(event, **fields)
