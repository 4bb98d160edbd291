"""mq_common.tasks: stopping background tasks."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from mq_common.tasks import cancel_and_log, cancel_and_wait


async def _forever() -> None:
    await asyncio.Event().wait()


async def _fails() -> None:
    raise ValueError("boom")


async def test_cancel_and_wait_stops_a_running_task_and_takes_none() -> None:
    task = asyncio.create_task(_forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()
    await cancel_and_wait(None)


async def test_cancel_and_wait_raises_what_the_task_failed_with() -> None:
    task = asyncio.create_task(_fails())
    await asyncio.wait([task])
    with pytest.raises(ValueError, match="boom"):
        await cancel_and_wait(task)


async def test_cancel_and_log_logs_a_failure_instead_of_raising_it() -> None:
    failed = asyncio.create_task(_fails())
    running = asyncio.create_task(_forever())
    await asyncio.wait([failed])
    log = structlog.get_logger()
    with structlog.testing.capture_logs() as logs:
        await cancel_and_log(failed, log, "task_failed", who="x")
        await cancel_and_log(running, log, "task_failed", who="y")
    assert running.cancelled()
    assert [(e["event"], e["who"], e["log_level"]) for e in logs] == [("task_failed", "x", "error")]
