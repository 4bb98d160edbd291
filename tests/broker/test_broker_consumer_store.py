"""DefaultMessageStore for the consumer side: the queue offset of a store time (binary search over the units'
STORETIMESTAMPs), deleting topics' consume queues (while the flusher runs; then sent to again; restart) and the
page-cache check behind set_zero_if_not_found."""

from __future__ import annotations

import asyncio
import mmap
import tempfile
import time
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mq_broker.store import put_service
from mq_broker.store.config import FlushDiskType
from mq_broker.store.message import GetMessageStatus
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.store.msync import is_resident, mapping_address

BASE_MS = 1_700_000_000_000


class StoreClock:
    """Stands in for put_service's ``time`` module: STORETIMESTAMP is ``now_ms``; the rest is the real clock."""

    def __init__(self) -> None:
        self.now_ms = BASE_MS
        self.monotonic = time.monotonic
        self.time_ns = time.time_ns

    def time(self) -> float:
        return self.now_ms / 1000


async def put_at(store: DefaultMessageStore, clock: StoreClock, times_ms: list[int], queue_id: int = 0) -> None:
    for i, t in enumerate(times_ms):
        clock.now_ms = t
        (result,) = await store.put_messages([message(i, queue_id=queue_id)])
        assert result.store_timestamp_ms == t


def expected_offset(times_ms: list[int], timestamp_ms: int) -> int:
    return next((i for i, t in enumerate(times_ms) if t >= timestamp_ms), len(times_ms))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=40).map(
        lambda steps: [BASE_MS + sum(steps[: i + 1]) for i in range(len(steps))]
    ),
    st.lists(st.integers(min_value=-5, max_value=2_100), min_size=1, max_size=8),
)
def test_offset_by_time_is_the_first_message_stored_at_or_after_it(times_ms: list[int], probes: list[int]) -> None:
    async def run(root: Path) -> None:
        clock = StoreClock()
        original = put_service.time
        put_service.time = clock  # type: ignore[assignment]
        try:
            store = open_store(store_config(root, file_size=64 * 1024, cq_units=8))  # 8 units a file: many files
        finally:
            put_service.time = original
        try:
            put_service.time = clock  # type: ignore[assignment]
            await put_at(store, clock, times_ms)
        finally:
            put_service.time = original
        try:
            for probe in [BASE_MS + p for p in probes] + [times_ms[0], times_ms[-1], times_ms[-1] + 1, 0]:
                assert store.get_offset_in_queue_by_time("TopicTest", 0, probe) == expected_offset(times_ms, probe)
        finally:
            store.shutdown()

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(run(Path(root)))


async def test_offset_by_time_of_unknown_and_cleaned_queues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = StoreClock()
    monkeypatch.setattr(put_service, "time", clock)
    store = open_store(store_config(tmp_path, file_size=64 * 1024))
    try:
        assert store.get_offset_in_queue_by_time("Nope", 0, BASE_MS) == 0
        await put_at(store, clock, [BASE_MS + 10 * i for i in range(6)], queue_id=1)
        assert store.get_offset_in_queue_by_time("TopicTest", 1, 0) == 0  # all newer: min
        assert store.get_offset_in_queue_by_time("TopicTest", 1, BASE_MS + 25) == 3
        assert store.get_offset_in_queue_by_time("TopicTest", 1, BASE_MS + 999) == 6  # all older: max
        cq = store.find_consume_queue("TopicTest", 1)
        assert cq is not None
        cq.min_logic_offset_bytes = 2 * 20  # the first two expired: the search starts at the min offset
        assert store.get_offset_in_queue_by_time("TopicTest", 1, 0) == 2
    finally:
        store.shutdown()


@pytest.mark.parametrize("mode", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
async def test_delete_topics_drops_their_queues_only(tmp_path: Path, mode: FlushDiskType) -> None:
    cfg = store_config(tmp_path, mode, file_size=64 * 1024, cq_units=4, flush_interval_consume_queue_ms=1)
    store = open_store(cfg)
    try:
        for round_ in range(3):  # the flusher keeps flushing queues meanwhile
            await store.put_messages([message(i, topic="Doomed", queue_id=i % 3) for i in range(20)])
            await store.put_messages([message(i, topic="Kept-1", queue_id=0) for i in range(5)])
            assert await store.delete_topics({"Doomed", "Never"}) == 3, round_
            for queue_id in range(3):
                r = store.get_messages("Doomed", queue_id, 0, 10)
                assert r.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
                assert store.get_max_offset_in_queue("Doomed", queue_id) == 0
            assert sorted(p.name for p in cfg.consume_queue_dir.iterdir()) == ["Kept-1"]
        assert store.get_max_offset_in_queue("Kept-1", 0) == 15
        assert store.failure is None
        (again,) = await store.put_messages([message(99, topic="Doomed", queue_id=0)])
        assert again.queue_offset == 0  # sent to again: a new queue from 0
        assert store.get_messages("Doomed", 0, 0, 10).message_count == 1
    finally:
        store.shutdown()
    assert store.failure is None
    (cfg.consume_queue_dir / ".Doomed.123").mkdir()  # a deletion interrupted by a crash
    (cfg.consume_queue_dir / ".Doomed.123" / "0").mkdir()
    store = open_store(cfg)
    try:
        assert store.get_max_offset_in_queue("Doomed", 0) == 1
        assert store.get_max_offset_in_queue("Kept-1", 0) == 15
        assert sorted(p.name for p in cfg.consume_queue_dir.iterdir()) == ["Doomed", "Kept-1"]
    finally:
        store.shutdown()


def test_page_cache_residency_is_read_with_mincore(tmp_path: Path) -> None:
    size = 16 * 1024 * 1024  # big enough that the kernel's fault-around near page 0 never reaches the last page
    last_page = size - mmap.PAGESIZE
    path = tmp_path / "sparse"
    with path.open("wb") as f:
        f.truncate(size)  # a hole: no page of it is cached
    with path.open("r+b") as f, mmap.mmap(f.fileno(), size) as mm:
        address = mapping_address(mm)
        if not address:
            pytest.skip("libc msync/mincore not available here")
        assert is_resident(address, last_page, 1) is False
        mm[10] = 1  # the write brings page 0 into the page cache
        assert is_resident(address, 0, mmap.PAGESIZE) is True
        assert is_resident(address, 5, 20) is True
        assert is_resident(address, last_page, mmap.PAGESIZE) is False
        assert is_resident(address, 0, 0) is None
