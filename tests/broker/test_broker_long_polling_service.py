"""LongPollingService (parking, wake-up, bound, cancellation, close) and the store's message arriving listener
(every put path calls it once per queue it wrote, after the dispatch, so a woken consumer finds the message)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from consumer_testkit import wait_until
from mq_broker.consumer.long_polling import LongPollingService, PollingFullError
from mq_broker.store import native_append
from mq_broker.store.message import GetMessageStatus, MessageExtBatch
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_properties

LONG_MS = 60_000  # never reached: a test that waits this long fails on the pytest timeout instead
NATIVE = [False, True] if native_append.AVAILABLE else [False]


async def test_arrival_wakes_the_queue_and_the_topic_wide_waiters_only() -> None:
    service = LongPollingService(max_parked=10)
    queue_1 = asyncio.create_task(service.wait_for_arrival("T", [1], LONG_MS))
    any_queue = asyncio.create_task(service.wait_for_arrival("T", None, LONG_MS))
    queue_2 = asyncio.create_task(service.wait_for_arrival("T", [2, 3], LONG_MS))
    other_topic = asyncio.create_task(service.wait_for_arrival("U", [1], LONG_MS))
    await wait_until(lambda: service.parked_count == 4)
    service.notify_message_arriving("T", 1)
    assert await queue_1 is True
    assert await any_queue is True
    assert service.parked_count == 2
    assert not queue_2.done()
    assert not other_topic.done()
    service.notify_message_arriving("T", 3)
    assert await queue_2 is True
    service.close()
    assert await other_topic is False
    assert service.parked_count == 0
    assert await service.wait_for_arrival("T", [1], LONG_MS) is False, "closed: no parking"


async def test_timeout_returns_false_and_frees_the_slot() -> None:
    service = LongPollingService(max_parked=1)
    assert await service.wait_for_arrival("T", [0], 20) is False
    assert service.parked_count == 0
    assert await service.wait_for_arrival("T", [0], 0) is False, "no suspend: no parking"
    service.notify_message_arriving("T", 0)  # nobody parked: nothing to do


async def test_bound_refuses_then_admits_again() -> None:
    service = LongPollingService(max_parked=2)
    parked = [asyncio.create_task(service.wait_for_arrival("T", [0], LONG_MS)) for _ in range(2)]
    await wait_until(lambda: service.parked_count == 2)
    with pytest.raises(PollingFullError):
        await service.wait_for_arrival("T", [0], LONG_MS)
    service.notify_message_arriving("T", 0)
    assert await asyncio.gather(*parked) == [True, True]
    third = asyncio.create_task(service.wait_for_arrival("T", [0], LONG_MS))
    await wait_until(lambda: service.parked_count == 1)
    service.notify_message_arriving("T", 0)
    assert await third is True


async def test_cancelled_waiter_frees_its_slot_and_registration() -> None:
    service = LongPollingService(max_parked=1)
    task = asyncio.create_task(service.wait_for_arrival("T", [0, 1], LONG_MS))
    await wait_until(lambda: service.parked_count == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert service.parked_count == 0
    assert not service._waiters, "no registration left behind"
    again = asyncio.create_task(service.wait_for_arrival("T", [1], LONG_MS))
    await wait_until(lambda: service.parked_count == 1)
    service.notify_message_arriving("T", 1)
    assert await again is True


@pytest.mark.parametrize("native", NATIVE, ids=lambda n: "c-append" if n else "python-append")
async def test_every_put_path_notifies_once_per_queue_after_dispatch(tmp_path: Path, native: bool) -> None:
    store = open_store(store_config(tmp_path, file_size=1024 * 1024, native_append_enable=native))
    seen: list[tuple[str, int, GetMessageStatus]] = []

    def listener(topic: str, queue_id: int) -> None:  # the consume queue must already hold the unit
        seen.append((topic, queue_id, store.get_messages(topic, queue_id, 0, 32).status))

    store.message_arriving_listener = listener
    try:
        await store.put_messages([message(i, queue_id=i % 2) for i in range(6)] + [message(9, topic="Other")])
        assert sorted(seen) == [
            ("Other", 1, GetMessageStatus.FOUND),
            ("TopicTest", 0, GetMessageStatus.FOUND),
            ("TopicTest", 1, GetMessageStatus.FOUND),
        ]
        seen.clear()
        await store.put_message_batch(_batch("Batched", 2))
        assert seen == [("Batched", 2, GetMessageStatus.FOUND)]
    finally:
        await asyncio.to_thread(store.shutdown)


async def test_a_failing_listener_does_not_fail_the_put(tmp_path: Path) -> None:
    store: DefaultMessageStore = open_store(store_config(tmp_path, file_size=1024 * 1024))

    def listener(topic: str, queue_id: int) -> None:
        raise RuntimeError("listener bug")

    store.message_arriving_listener = listener
    try:
        results = await store.put_messages([message(1)])
        assert results[0].is_ok
        assert (await store.put_message_batch(_batch("Batched", 0))).is_ok
    finally:
        await asyncio.to_thread(store.shutdown)


def _batch(topic: str, queue_id: int) -> MessageExtBatch:
    body = encode_batch([(b"m1", encode_properties({"TAGS": "A"}), 0), (b"m2", "", 0)])
    return MessageExtBatch(topic=topic, queue_id=queue_id, body=body, born_timestamp_ms=1)
