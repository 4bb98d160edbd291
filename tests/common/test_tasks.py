"""mq_common.tasks: stopping background tasks."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from mq_common.tasks import cancel_and_log, cancel_and_wait, wait_event


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


async def test_wait_event_answers_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert not await wait_event(event, 0.01)
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5.0)
    assert await wait_event(event, 0.0)


@pytest.mark.parametrize("turns", range(6))
async def test_wait_event_never_loses_a_cancellation_that_meets_the_event(turns: int) -> None:
    """The event is set and the waiting task cancelled ``turns`` loop turns apart: whichever turn the cancellation
    lands on (asyncio.wait_for on 3.11 swallows it in one of them), the task ends cancelled instead of running on."""
    event = asyncio.Event()
    woke_after_cancel = False

    async def loop_until_cancelled() -> None:
        nonlocal woke_after_cancel
        while True:
            await wait_event(event, 30.0)
            if task.cancelling():
                woke_after_cancel = True
            event.clear()

    task = asyncio.create_task(loop_until_cancelled())
    await asyncio.sleep(0)
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    async with asyncio.timeout(5.0):
        await cancel_and_wait(task)
    assert task.cancelled()
    assert not woke_after_cancel


@pytest.mark.parametrize("helper", ["cancel_and_wait", "cancel_and_log"])
async def test_a_cancellation_of_the_caller_is_not_swallowed(helper: str) -> None:
    """The stopped task takes its time to end (it shields its own cleanup); the caller is cancelled meanwhile (a
    deadline around a shutdown): the caller ends cancelled, the task still ends by itself."""
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(release.wait())

    task = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)

    async def stop() -> None:
        if helper == "cancel_and_wait":
            await cancel_and_wait(task)
        else:
            await cancel_and_log(task, structlog.get_logger(), "task_failed")

    caller = asyncio.create_task(stop())
    await asyncio.sleep(0.01)
    caller.cancel()
    await asyncio.wait([caller])
    assert caller.cancelled()
    assert not task.done()
    release.set()
    await asyncio.wait([task])
    assert task.cancelled()
