"""The rules of reads from slaves without processes: the broker's suggest_which_broker_id
(mq_broker.ha.read_suggestion) and the client's choice of broker (mq_client.consumer.pull_node)."""

from __future__ import annotations

import struct

import pytest
from mq_broker.ha.read_suggestion import ReadSuggestionPolicy, Suggestion, end_physical_offset
from mq_client.consumer.pull_node import FindBrokerResult, PullNodeTable, find_broker_address_in_subscribe
from mq_common.protocol import BrokerData, MessageQueue, SubscriptionGroupConfig

GROUP = SubscriptionGroupConfig("g", which_broker_when_consume_slowly=2)


def _record(physical_offset: int, size: int = 100) -> bytes:
    """Enough of a v1 record for the policy: its length and PHYSICALOFFSET at byte 28."""
    raw = bytearray(size)
    struct.pack_into(">q", raw, 28, physical_offset)
    return bytes(raw)


def _policy(
    *, broker_id: int = 0, enable: bool = True, ratio: int = 0, master_online: bool = True
) -> ReadSuggestionPolicy:
    return ReadSuggestionPolicy(
        broker_id=broker_id,
        slave_read_enable=enable,
        access_message_in_memory_max_ratio_percent=ratio,
        max_phy_offset=lambda: 1_000,
        master_online=lambda: master_online,
        total_memory_bytes=10_000,
    )


def test_end_physical_offset_is_past_the_last_record() -> None:
    assert end_physical_offset([]) is None
    assert end_physical_offset([_record(0), _record(300, 50)]) == 350


@pytest.mark.parametrize(
    ("policy", "messages", "expected"),
    [
        (_policy(), [_record(500)], Suggestion(2)),  # bytes left behind, ratio 0: slow -> the group's slow broker
        (_policy(), [_record(900)], Suggestion(0)),  # read up to the end: the group's broker id
        (_policy(ratio=5), [_record(500)], Suggestion(0)),  # 400 bytes behind < 5 % of 10,000
        (_policy(ratio=3), [_record(500)], Suggestion(2)),  # 400 bytes behind > 3 % of 10,000
        (_policy(enable=False), [_record(500)], Suggestion(0)),  # slaveReadEnable off: always the master
        (_policy(), [], Suggestion(0)),  # nothing read: not slow
        # a slave: not slow and the master online -> back to the master; an empty answer retries there at once
        (_policy(broker_id=1), [_record(900)], Suggestion(0)),
        (_policy(broker_id=1), [], Suggestion(0, retry_immediately=True)),
        (_policy(broker_id=1, master_online=False), [], Suggestion(0)),
        (_policy(broker_id=1), [_record(500)], Suggestion(2)),  # slow on the slave too: stay on a slave
    ],
)
def test_suggestion(policy: ReadSuggestionPolicy, messages: list[bytes], expected: Suggestion) -> None:
    assert policy.suggest(GROUP, messages) == expected


MASTER_AND_SLAVES = BrokerData("c", "b", {0: "127.0.0.1:1", 1: "127.0.0.1:2", 3: "127.0.0.1:4"})
SLAVES_ONLY = BrokerData("c", "b", {3: "127.0.0.1:4", 2: "127.0.0.1:3"})


@pytest.mark.parametrize(
    ("data", "broker_id", "only_this", "expected"),
    [
        (MASTER_AND_SLAVES, 0, False, FindBrokerResult("127.0.0.1:1", 0)),
        (MASTER_AND_SLAVES, 1, False, FindBrokerResult("127.0.0.1:2", 1)),
        (MASTER_AND_SLAVES, 2, False, FindBrokerResult("127.0.0.1:4", 3)),  # a gone slave: the next id
        (MASTER_AND_SLAVES, 5, False, FindBrokerResult("127.0.0.1:1", 0)),  # else the master
        (MASTER_AND_SLAVES, 5, True, None),
        (SLAVES_ONLY, 0, False, FindBrokerResult("127.0.0.1:3", 2)),  # master away: the lowest slave
        (SLAVES_ONLY, 0, True, None),
        (None, 0, False, None),
        (BrokerData("c", "b", {}), 0, False, None),
    ],
)
def test_find_broker_address_in_subscribe(
    data: BrokerData | None, broker_id: int, only_this: bool, expected: FindBrokerResult | None
) -> None:
    assert find_broker_address_in_subscribe(data, broker_id, only_this) == expected


def test_pull_node_table_follows_suggestions_and_is_bounded() -> None:
    table = PullNodeTable(max_queues=2)
    a, b, c = (MessageQueue("t", "b", i) for i in range(3))
    assert table.recalculate(a) == 0
    table.update(a, 1)
    found = table.select(a, MASTER_AND_SLAVES)
    assert found is not None
    assert found.slave
    table.update(b, 1)
    table.update(c, 1)  # a, the least recently used, is forgotten: it starts at the master again
    assert [table.recalculate(q) for q in (a, b, c)] == [0, 1, 1]
    table.remove(b)
    assert table.recalculate(b) == 0
