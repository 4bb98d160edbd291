"""The source's pure parts: the offsets JSON, option parsing, range splitting and the per-trigger budget."""

from __future__ import annotations

import pytest
from mq_common.errors import InvalidParameterError
from mq_common.protocol import MessageQueue
from mq_spark.source.offsets import EARLIEST, LATEST, from_json_dict, parse_offsets_json, to_json_dict
from mq_spark.source.options import SourceOptions
from mq_spark.source.plan import limit_offsets, split_ranges
from mq_spark.source.pull import QueueRange


def _mq(broker: str, queue: int) -> MessageQueue:
    return MessageQueue("t", broker, queue)


def test_offsets_json_names_queues_by_broker_and_id() -> None:
    parsed = parse_offsets_json('{"t": {"broker-a:0": 5, "rack:1:broker-b:3": -2, "broker-a:1": -1}}', "t", "o")
    assert parsed == {_mq("broker-a", 0): 5, _mq("rack:1:broker-b", 3): EARLIEST, _mq("broker-a", 1): LATEST}
    assert from_json_dict("t", to_json_dict("t", parsed)) == parsed
    assert list(to_json_dict("t", parsed)["t"]) == ["broker-a:0", "broker-a:1", "rack:1:broker-b:3"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "option o: not JSON"),
        ('{"t": 5}', 'option o: expected {"t"'),
        ('{"u": {}}', r"topics \['u'\] are not the source's topic 't'"),
        ('{"t": {"broker-a:x": 1}}', "queue 'broker-a:x' of topic 't'"),
        ('{"t": {"broker-a:0": -3}}', "must be an integer >= 0, -2 \\(earliest\\) or -1 \\(latest\\), got -3"),
        ('{"t": {"broker-a:0": true}}', "got True"),
    ],
)
def test_bad_offsets_json_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        parse_offsets_json(text, "t", "o")


def test_option_defaults_differ_for_batch_and_stream() -> None:
    batch = SourceOptions.parse({"topic": "t"}, streaming=False, env={})
    stream = SourceOptions.parse({"topic": "t", "namesrv": "a:1; b:2"}, streaming=True, env={})
    assert (batch.starting.kind, batch.ending.kind, batch.namesrv_addrs) == ("earliest", "latest", ("127.0.0.1:9876",))
    assert (stream.starting.kind, stream.namesrv_addrs, stream.max_offsets_per_trigger) == (
        "latest",
        ("a:1", "b:2"),
        None,
    )
    timed = SourceOptions.parse({"topic": "t", "startingTimestamp": "1700000000000"}, streaming=True, env={})
    assert (timed.starting.kind, timed.starting.timestamp_ms) == ("timestamp", 1_700_000_000_000)
    with pytest.raises(InvalidParameterError, match="endingOffsets is for batch reads only"):
        SourceOptions.parse({"topic": "t", "endingOffsets": "latest"}, streaming=True, env={})
    with pytest.raises(InvalidParameterError, match="-2 \\(earliest\\) is not allowed as an end"):
        SourceOptions.parse({"topic": "t", "endingOffsets": '{"t": {"b:0": -2}}'}, streaming=False, env={})
    with pytest.raises(InvalidParameterError, match="option namesrv must be host:port"):
        SourceOptions.parse({"topic": "t", "namesrv": "nowhere"}, streaming=False, env={})
    with pytest.raises(InvalidParameterError, match="option topic"):
        SourceOptions.parse({}, streaming=False, env={})


def test_ranges_are_cut_at_max_rows_and_empty_ones_dropped() -> None:
    a0, a1, b0 = _mq("broker-a", 0), _mq("broker-a", 1), _mq("broker-b", 0)
    ranges = split_ranges({a0: 3, a1: 4, b0: 0}, {a0: 10, a1: 4, b0: 2}, 4)
    assert ranges == [
        QueueRange("t", "broker-a", 0, 3, 7),
        QueueRange("t", "broker-a", 0, 7, 10),
        QueueRange("t", "broker-b", 0, 0, 2),
    ]
    assert split_ranges({}, {a0: 2}, 10) == [QueueRange("t", "broker-a", 0, 0, 2)]  # a new queue: from 0


def test_the_trigger_budget_is_shared_in_proportion_and_every_waiting_queue_moves() -> None:
    a, b, c = _mq("a", 0), _mq("b", 0), _mq("c", 0)
    assert limit_offsets({a: 0, b: 0}, {a: 5, b: 5}, 100) == {a: 5, b: 5}  # all of it fits
    ends = limit_offsets({a: 100, b: 0, c: 0}, {a: 190, b: 10, c: 0}, 10)
    assert ends == {a: 109, b: 1, c: 0}  # 90 and 10 waiting: 9 + 1
    ends = limit_offsets({a: 0, b: 0, c: 0}, {a: 1000, b: 1, c: 1}, 2)
    assert sum(e for e in ends.values()) == 2
    assert ends[a] == 1  # the big queue gets its share first, then the remainder goes by what is left waiting
