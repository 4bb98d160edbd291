"""EpochFileCache (mq_broker.store.epoch_file): the file round trip, atomic rewrites with a .bak, refusals,
truncation, the wire form, find_consistent_point's properties, and the store mending the file at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from hypothesis import given, settings
from hypothesis import strategies as st
from mq_broker.store.epoch_file import (
    EPOCH_FILE_NAME,
    OPEN_END_OFFSET,
    EpochEntries,
    EpochEntry,
    EpochFileCache,
    EpochFileError,
    find_consistent_point,
)
from mq_broker.store.message_store import StoreStartError


def cache(tmp_path: Path, max_offset: int = 10_000) -> EpochFileCache:
    return EpochFileCache(tmp_path / EPOCH_FILE_NAME, lambda: max_offset)


def pairs(c: EpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in c.entries()]


def test_round_trip_in_rocketmq_checkpoint_file_layout(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.load()
    assert c.entries() == ()
    assert c.last_entry() is None
    assert c.last_epoch() == -1
    assert c.append(1, 0)
    assert c.append(3, 700)
    assert c.append(4, 700)  # an epoch in which nothing was written
    text = (tmp_path / EPOCH_FILE_NAME).read_text()
    lines = text.splitlines()
    assert lines[0] == "3"
    assert lines[2:] == ["1-0", "3-700", "4-700"]
    again = cache(tmp_path)
    again.load()
    assert again.entries() == (EpochEntry(1, 0, 700), EpochEntry(3, 700, 700), EpochEntry(4, 700, OPEN_END_OFFSET))
    assert again.last_entry() == EpochEntry(4, 700)
    assert again.last_epoch() == 4


def test_each_rewrite_keeps_the_previous_file_as_bak(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.append(1, 0)
    c.append(2, 100)
    path = tmp_path / EPOCH_FILE_NAME
    bak = tmp_path / (EPOCH_FILE_NAME + ".bak")
    assert bak.read_text().splitlines()[2:] == ["1-0"]
    path.write_text(path.read_text().replace("2-100", "2-101"))  # crc32 no longer matches
    (tmp_path / (EPOCH_FILE_NAME + ".tmp")).write_text("garbage left by a crash")
    loaded = cache(tmp_path)
    loaded.load()
    assert pairs(loaded) == [(1, 0)]
    bak.write_text("2\n0\n1-0\n")  # announces 2 entries, holds 1
    with pytest.raises(EpochFileError):
        cache(tmp_path).load()


def test_a_missing_file_falls_back_to_the_bak(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.append(1, 0)
    c.append(2, 50)
    (tmp_path / EPOCH_FILE_NAME).unlink()
    loaded = cache(tmp_path)
    loaded.load()
    assert pairs(loaded) == [(1, 0)]


def test_append_refuses_going_back_and_ignores_the_same_epoch(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.append(5, 100)
    before = (tmp_path / EPOCH_FILE_NAME).read_bytes()
    with pytest.raises(EpochFileError):
        c.append(4, 200)
    with pytest.raises(EpochFileError):
        c.append(6, 99)
    assert not c.append(5, 300)
    assert pairs(c) == [(5, 100)]
    assert (tmp_path / EPOCH_FILE_NAME).read_bytes() == before


def test_truncate_suffix_and_prefix(tmp_path: Path) -> None:
    c = cache(tmp_path)
    for epoch, start in [(1, 0), (2, 100), (3, 200), (4, 300)]:
        c.append(epoch, start)
    c.truncate_suffix(200)
    assert c.entries() == (EpochEntry(1, 0, 100), EpochEntry(2, 100, OPEN_END_OFFSET))
    c.append(7, 250)
    c.truncate_prefix(100)  # epoch 1 ends at 100: wholly below
    assert pairs(c) == [(2, 100), (7, 250)]
    c.truncate_prefix(10**9)  # the last entry always stays
    assert pairs(c) == [(7, 250)]
    c.truncate_suffix(0)
    assert c.entries() == ()
    reloaded = cache(tmp_path)
    reloaded.load()
    assert reloaded.entries() == ()  # an empty history is a valid file, not a reason to read the .bak


def test_wire_form_round_trip_and_malformed_forms(tmp_path: Path) -> None:
    c = cache(tmp_path, max_offset=900)
    c.append(1, 0)
    c.append(2, 400)
    wire = c.wire_form()
    assert wire == EpochEntries(((1, 0, 400), (2, 400, 900)))
    assert wire.max_offset == 900
    assert wire.to_entries() == [EpochEntry(1, 0, 400), EpochEntry(2, 400, 900)]
    for bad in [
        ((2, 0, 400), (1, 400, 900)),  # epochs going back
        ((1, 0, 400), (2, 300, 900)),  # end not the next start
        ((1, 0, 400), (2, 400, 300)),  # last end before its start
        ((-1, 0, 10),),
    ]:
        with pytest.raises(EpochFileError):
            EpochEntries(bad).to_entries()
    with pytest.raises(EpochFileError):
        c.find_consistent_point(EpochEntries(((2, 0, 400), (1, 400, 900))), 900)


def test_consistent_point_of_a_returning_master(tmp_path: Path) -> None:
    """The old master wrote epoch 3 past 400 while the new one led epoch 2 from 400: they agree up to 400."""
    old = cache(tmp_path, max_offset=650)
    old.append(1, 0)
    old.append(3, 500)
    new = [EpochEntry(1, 0, 400), EpochEntry(2, 400, 800), EpochEntry(4, 800)]
    assert old.find_consistent_point(new, 1000) == 400
    assert old.find_consistent_point([EpochEntry(9, 0)], 1000) == -1


# --- find_consistent_point properties -----------------------------------------------------------------------------


@st.composite
def _histories(draw: st.DrawFn) -> tuple[list[EpochEntry], int, list[EpochEntry], int, int]:
    """Two histories sharing a prefix of epochs that agrees exactly up to ``shared``, then diverging: one of them
    ends its last shared epoch at ``shared``, the other may write more in it; their later epochs are distinct."""
    gaps = draw(st.lists(st.integers(0, 500), min_size=1, max_size=6))
    epochs = sorted(draw(st.sets(st.integers(0, 1000), min_size=len(gaps) * 3 + 6, max_size=len(gaps) * 3 + 6)))
    shared_epochs, rest = epochs[: len(gaps)], epochs[len(gaps) :]
    starts = [sum(gaps[:i]) for i in range(len(gaps))]
    shared = starts[-1] + draw(st.integers(0, 500))
    prefix = [EpochEntry(e, s) for e, s in zip(shared_epochs, starts, strict=True)]
    tail_a = [e for e in rest if e % 2 == 0]
    tail_b = [e for e in rest if e % 2 == 1]

    def extend(tail: list[int], extra: int) -> tuple[list[EpochEntry], int]:
        entries, end = list(prefix), shared + extra
        for epoch in tail[: draw(st.integers(0, min(3, len(tail))))]:
            entries.append(EpochEntry(epoch, end))
            end += draw(st.integers(0, 300))
        return entries, end

    a, a_max = extend(tail_a, draw(st.integers(0, 300)))
    b, b_max = extend(tail_b, 0)
    if draw(st.booleans()):
        return b, b_max, a, a_max, shared
    return a, a_max, b, b_max, shared


@given(_histories())
@settings(max_examples=300, deadline=None)
def test_shared_prefix_is_found_exactly_symmetrically_and_within_both_logs(
    histories: tuple[list[EpochEntry], int, list[EpochEntry], int, int],
) -> None:
    a, a_max, b, b_max, shared = histories
    point = find_consistent_point(a, a_max, b, b_max)
    assert point == shared
    assert find_consistent_point(b, b_max, a, a_max) == point
    assert point <= min(a_max, b_max)


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=6),
    st.integers(0, 2000),
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=6),
    st.integers(0, 2000),
)
@settings(max_examples=300, deadline=None)
def test_any_two_histories_give_a_symmetric_point_within_both_logs(
    raw_a: list[tuple[int, int]], a_max: int, raw_b: list[tuple[int, int]], b_max: int
) -> None:
    def history(raw: list[tuple[int, int]]) -> list[EpochEntry]:
        epochs = sorted({e for e, _ in raw})
        starts = sorted(s for _, s in raw)[: len(epochs)]
        return [EpochEntry(e, s) for e, s in zip(epochs, starts, strict=False)]

    a, b = history(raw_a), history(raw_b)
    point = find_consistent_point(a, a_max, b, b_max)
    assert point == find_consistent_point(b, b_max, a, a_max)
    assert -1 <= point <= min(a_max, b_max)
    if not {(e.epoch, e.start_offset) for e in a} & {(e.epoch, e.start_offset) for e in b}:
        assert point == -1


# --- the store and its epoch file -------------------------------------------------------------------------------


async def test_store_start_drops_entries_past_the_recovered_end(tmp_path: Path) -> None:
    """A crash between truncate_files' CommitLog cut and its epoch file write leaves entries past the log's end."""
    config = store_config(tmp_path)
    store = open_store(config)
    try:
        await store.put_messages([message(i) for i in range(4)])
        end = store.commit_log.max_offset
        await store.put_messages([message(9)])  # the store writes at `end` next
    finally:
        store.shutdown()
    c = EpochFileCache(config.epoch_file_path, lambda: 0)
    c.append(1, 0)
    c.append(2, end)
    c.append(3, end + 10**6)
    store = open_store(config)
    try:
        assert [(e.epoch, e.start_offset) for e in store.epoch_file.entries()] == [(1, 0), (2, end)]
        assert store.epoch_file.wire_form().max_offset == store.commit_log.max_offset
    finally:
        store.shutdown()


def test_store_refuses_to_start_with_an_unusable_epoch_file(tmp_path: Path) -> None:
    config = store_config(tmp_path)
    config.epoch_file_path.write_text("1\n0\nnot-an-entry\n")
    with pytest.raises(StoreStartError, match="epoch file"):
        open_store(config)
    config.epoch_file_path.unlink()
    open_store(config).shutdown()  # the lock was released: the store starts once the file is mended
