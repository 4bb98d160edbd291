"""AllocateMessageQueueAveragely: RocketMQ's worked examples and hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mq_client.consumer import allocate_message_queue_averagely
from mq_common.protocol import MessageQueue

GROUP = "G"


def _queues(n: int) -> list[MessageQueue]:
    return sorted(MessageQueue("T", f"broker-{i % 3}", i) for i in range(n))


def _cids(n: int) -> list[str]:
    return sorted(f"127.0.0.1@{i}" for i in range(n))


def _split(n_queues: int, n_cids: int) -> list[list[MessageQueue]]:
    mqs, cids = _queues(n_queues), _cids(n_cids)
    return [allocate_message_queue_averagely(GROUP, cid, mqs, cids) for cid in cids]


def test_eight_queues_three_consumers_get_3_3_2_in_order() -> None:
    mqs = _queues(8)
    assert _split(8, 3) == [mqs[0:3], mqs[3:6], mqs[6:8]]


def test_more_consumers_than_queues_leaves_the_last_ones_idle() -> None:
    mqs = _queues(2)
    assert _split(2, 4) == [[mqs[0]], [mqs[1]], [], []]


def test_unknown_consumer_gets_nothing() -> None:
    assert allocate_message_queue_averagely(GROUP, "stranger", _queues(4), _cids(2)) == []


@pytest.mark.parametrize(
    ("cid", "mqs", "cids"),
    [("", _queues(1), _cids(1)), ("a", [], ["a"]), ("a", _queues(1), [])],
)
def test_empty_arguments_are_refused(cid: str, mqs: list[MessageQueue], cids: list[str]) -> None:
    with pytest.raises(ValueError, match="empty"):
        allocate_message_queue_averagely(GROUP, cid, mqs, cids)


@given(st.integers(1, 64), st.integers(1, 20))
def test_every_queue_goes_to_exactly_one_consumer_and_sizes_differ_by_at_most_one(n_queues: int, n_cids: int) -> None:
    shares = _split(n_queues, n_cids)
    assigned = [mq for share in shares for mq in share]
    assert sorted(assigned) == _queues(n_queues)
    assert len(set(assigned)) == n_queues
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


@given(st.integers(1, 64), st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12, unique=True), st.data())
def test_sorted_inputs_give_the_same_answer_whatever_order_they_arrived_in(
    n_queues: int, cids: list[str], data: st.DataObject
) -> None:
    mqs = _queues(n_queues)
    shuffled_mqs, shuffled_cids = data.draw(st.permutations(mqs)), data.draw(st.permutations(cids))
    first = {c: allocate_message_queue_averagely(GROUP, c, sorted(mqs), sorted(cids)) for c in cids}
    again = {c: allocate_message_queue_averagely(GROUP, c, sorted(shuffled_mqs), sorted(shuffled_cids)) for c in cids}
    assert first == again
    assert sorted(mq for share in first.values() for mq in share) == mqs
