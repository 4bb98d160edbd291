"""POP long polling wakes ONE parked pop per consumer group per arrival (PopLongPollingService), and the next one
when a pop leaves messages behind: in LongPollingService alone, then over a real in-process broker's gRPC API
(one message per arrival reaches each group once, a burst reaches every parked pop of a group, a queue another
pop was reading is looked at again when that read ends)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from consumer_testkit import wait_until
from mq_broker.consumer.long_polling import ANY_QUEUE, LongPollingService
from mq_broker.controller import BrokerController
from mq_common.response_code import ResponseCode
from pop_testkit import RPC_TIMEOUT_S, create_topic, pop, pop_broker, popped, send

if TYPE_CHECKING:
    from pop_testkit import Stub

LONG_MS = 60_000  # never reached: a test waits RPC_TIMEOUT_S at most (the broker's pop_poll_time_max_ms is 60 s)
TOPIC = "WakeOneTopic"


def _park(service: LongPollingService, group: str | None, queue_ids: list[int] | None = None) -> asyncio.Task[bool]:
    return asyncio.create_task(service.wait_for_arrival("T", queue_ids, LONG_MS, group=group))


async def _parked(service: LongPollingService, count: int) -> None:
    await wait_until(lambda: service.parked_count == count)


async def test_an_arrival_wakes_one_pop_of_each_group_and_every_pull() -> None:
    service = LongPollingService(max_parked=10)
    g1 = [_park(service, "G1") for _ in range(2)]
    await _parked(service, 2)
    g2 = _park(service, "G2")
    pulls = [_park(service, None, [0]) for _ in range(2)]
    await _parked(service, 5)
    service.notify_message_arriving("T", 0)
    assert await g2 is True
    assert await asyncio.gather(*pulls) == [True, True], "pull consumers each read at their own offset: all woken"
    assert await g1[0] is True, "the longest parked pop of the group goes first"
    await asyncio.sleep(0)
    assert not g1[1].done(), "one pop of a group per arrival"
    assert service.parked_count == 1
    service.notify_message_arriving("T", 3)
    assert await g1[1] is True
    assert service.parked_count == 0
    assert not service._pop_waiters, "no registration left behind"


async def test_notify_group_wakes_the_next_pop_of_that_group_only() -> None:
    service = LongPollingService(max_parked=10)
    g1 = _park(service, "G1")
    g2 = _park(service, "G2")
    queue_2 = _park(service, "G1", [2])
    await _parked(service, 3)
    service.notify_group("T", ANY_QUEUE, "G1")
    assert await g1 is True
    await asyncio.sleep(0)
    assert not g2.done(), "another group's pop is not woken"
    assert not queue_2.done(), "a topic-wide notify of a group wakes its topic-wide pop only"
    service.notify_group("T", 2, "G1")
    assert await queue_2 is True
    service.close()
    assert await g2 is False


@pytest.mark.parametrize("woken_first", [True, False], ids=["woken-then-cancelled", "cancelled-then-notified"])
async def test_a_cancelled_pop_does_not_swallow_the_wake_up(woken_first: bool) -> None:
    """The longest parked pop goes away (its client left) just after, or just before, an arrival that would wake
    it: the next pop of its group is woken all the same."""
    service = LongPollingService(max_parked=10)
    gone = _park(service, "G1")
    await _parked(service, 1)
    waiting = _park(service, "G1")
    await _parked(service, 2)
    if woken_first:
        service.notify_message_arriving("T", 0)
        gone.cancel()  # woken, but cancelled before its pop looked: it passes the wake-up on
    else:
        gone.cancel()  # its future is cancelled at once, its registration goes when the task runs: skipped
        service.notify_message_arriving("T", 0)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert await asyncio.wait_for(waiting, RPC_TIMEOUT_S) is True
    assert service.parked_count == 0


# -- over the broker's gRPC API -------------------------------------------------------------------------------------


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    async with pop_broker(tmp_path / "store") as started:
        await create_topic(started[1], TOPIC)
        yield started


def _parked_on(controller: BrokerController) -> Callable[[], int]:
    assert controller.long_polling is not None
    service = controller.long_polling
    return lambda: service.parked_count


def _long_pop(stub: Stub, group: str, **kwargs: Any) -> asyncio.Task[Any]:
    """A pop parked longer than a test waits (RPC_TIMEOUT_S): one that is not woken fails the test."""
    return asyncio.create_task(pop(stub, TOPIC, group=group, poll_time_ms=LONG_MS, **kwargs))


def _bodies(reply: Any) -> list[bytes]:
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return [m.body for m, _ in popped(reply)]


async def test_each_message_reaches_each_group_once(
    broker: tuple[BrokerController, Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two parked pops of G1 and one of G2: an arrival wakes G2's and ONE of G1's (the other is not woken to
    re-read for nothing), the next arrival the other."""
    controller, stub = broker
    parked = _parked_on(controller)
    woken = _count_wake_ups(controller, monkeypatch)
    g1 = [_long_pop(stub, "G1", init_mode=0) for _ in range(2)]
    g2 = _long_pop(stub, "G2", init_mode=0)
    await wait_until(lambda: parked() == 3)
    await send(stub, TOPIC, [b"m1"], queue_id=1)
    assert _bodies(await asyncio.wait_for(g2, RPC_TIMEOUT_S)) == [b"m1"]
    done, _ = await asyncio.wait(g1, return_when=asyncio.FIRST_COMPLETED, timeout=RPC_TIMEOUT_S)
    assert [_bodies(t.result()) for t in done] == [[b"m1"]]
    await wait_until(lambda: parked() == 1)  # the other pop of G1 is still parked, not answered empty
    (left,) = set(g1) - done
    assert not left.done()
    assert woken == {"G1": 1, "G2": 1}
    await send(stub, TOPIC, [b"m2"], queue_id=2)
    assert _bodies(await asyncio.wait_for(left, RPC_TIMEOUT_S)) == [b"m2"]
    assert woken == {"G1": 2, "G2": 1}


def _count_wake_ups(controller: BrokerController, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """group -> parked pops of it woken by an arrival so far."""
    service = controller.long_polling
    assert service is not None
    wait, woken = service.wait_for_arrival, dict[str, int]()

    async def counted(*args: Any, **kwargs: Any) -> bool:
        arrived = await wait(*args, **kwargs)
        group = kwargs.get("group") or "?"
        woken[group] = woken.get(group, 0) + arrived
        return arrived

    monkeypatch.setattr(service, "wait_for_arrival", counted)
    return woken


async def test_a_burst_reaches_every_parked_pop_of_the_group(broker: tuple[BrokerController, Stub]) -> None:
    """One put of three messages is one arrival; the first woken pop (batch of one) leaves two behind and wakes
    the next: no pop stays parked while messages remain."""
    controller, stub = broker
    parked = _parked_on(controller)
    pops = [_long_pop(stub, "G1", init_mode=0, max_msg_nums=1) for _ in range(2)]
    await wait_until(lambda: parked() == 2)
    await send(stub, TOPIC, [b"b1", b"b2", b"b3"], queue_id=0)
    replies = await asyncio.wait_for(asyncio.gather(*pops), RPC_TIMEOUT_S)
    assert sorted(body for reply in replies for body in _bodies(reply)) == [b"b1", b"b2"]


async def test_a_queue_read_by_another_pop_is_looked_at_again(
    broker: tuple[BrokerController, Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message arriving while a pop of the group reads its queue wakes a parked pop, which skips the busy queue;
    when the read ends, the parked pop is woken again and takes the message (no wait for another arrival)."""
    controller, stub = broker
    parked = _parked_on(controller)
    writer = controller.pop.context.writer
    append, hold = writer.append, asyncio.Event()

    async def held_append(*args: Any, **kwargs: Any) -> Any:
        await hold.wait()  # the reading pop holds its queue until the test lets it go
        return await append(*args, **kwargs)

    await send(stub, TOPIC, [b"first"], queue_id=0)
    monkeypatch.setattr(writer, "append", held_append)
    reading = asyncio.create_task(pop(stub, TOPIC, group="G1", queue_id=0, init_mode=0))
    await wait_until(lambda: bool(controller.pop.pop_processor._reading))
    monkeypatch.setattr(writer, "append", append)
    waiting = _long_pop(stub, "G1", queue_id=0, init_mode=0)
    await wait_until(lambda: parked() == 1)
    await send(stub, TOPIC, [b"second"], queue_id=0)  # wakes `waiting`, which finds the queue busy and parks again
    await wait_until(lambda: parked() == 1 and next(iter(controller.pop.pop_processor._reading.values())))
    hold.set()
    assert _bodies(await asyncio.wait_for(reading, RPC_TIMEOUT_S)) == [b"first"]
    assert _bodies(await asyncio.wait_for(waiting, RPC_TIMEOUT_S)) == [b"second"]
