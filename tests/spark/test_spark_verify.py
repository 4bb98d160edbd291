"""RowIdCheck (mq_spark.verify): counts and the kinds of extra copies, which name the layer that sent a row twice; and
`make run`'s report of them."""

from __future__ import annotations

import json

from mq_common.codec import MessageExt
from mq_common.constants import MessageConst
from mq_common.protocol import MessageQueue
from mq_spark.jobs.publish_flights import PublishOutcome
from mq_spark.jobs.run_main import final_report
from mq_spark.verify import DUPLICATE_SAMPLES, RowIdCheck

QA0 = MessageQueue("flights", "broker-a", 0)
QA1 = MessageQueue("flights", "broker-a", 1)
QB0 = MessageQueue("flights", "broker-b", 0)


def _stored(row_id: int, uniq_key: str, queue_offset: int, body: bytes | None = None) -> MessageExt:
    return MessageExt(
        topic="flights",
        body=json.dumps({"row_id": row_id}).encode() if body is None else body,
        flag=0,
        properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key},
        queue_id=0,
        queue_offset=queue_offset,
        commit_log_offset=0,
        store_size=0,
        sys_flag=0,
        born_timestamp_ms=1,
        born_host=("127.0.0.1", 1),
        store_timestamp_ms=2,
        store_host=("127.0.0.1", 2),
    )


def test_rows_seen_missing_and_unexpected() -> None:
    check = RowIdCheck(4)
    check.add(QA0, _stored(0, "K0", 0))
    check.add(QA1, _stored(2, "K2", 0))
    check.add(QA1, _stored(9, "K9", 1))  # outside 0..rows-1
    check.add(QA1, _stored(0, "KX", 2, body=b"not json"))
    assert (check.verified, check.missing, check.duplicates, check.unexpected) == (2, 2, 0, 2)
    assert check.report()["duplicate_kinds"] == {}


def test_extra_copies_are_classified_by_place_and_uniq_key() -> None:
    check = RowIdCheck(5)
    for row_id in range(5):
        check.add(QA0, _stored(row_id, f"K{row_id}", row_id))
    check.add(QA0, _stored(0, "K0", 7))  # the same message stored again on its queue: a retry to the same queue
    check.add(QB0, _stored(1, "K1", 0))  # the same message on another broker: the gateway retried elsewhere
    check.add(QB0, _stored(1, "K1", 1))
    check.add(QA1, _stored(2, "NEW", 0))  # a new message for the row: re-sent above the gateway
    check.add(QB0, _stored(3, "NEW3", 2))
    assert check.duplicates == 5
    assert check.report()["duplicate_kinds"] == {
        "another broker, new UNIQ_KEY": 1,
        "another broker, same UNIQ_KEY": 2,
        "another queue of the same broker, new UNIQ_KEY": 1,
        "same queue, same UNIQ_KEY": 1,
    }
    first = check.duplicate_samples[0]
    assert first["row_id"] == 0
    assert first["first"] == f"{QA0} @ 0"
    assert first["copy"] == f"{QA0} @ 7"
    assert first["same_uniq_key"] is True


def test_samples_are_bounded() -> None:
    check = RowIdCheck(1)
    for offset in range(DUPLICATE_SAMPLES + 6):
        check.add(QA0, _stored(0, "K0", offset))
    assert check.duplicates == DUPLICATE_SAMPLES + 5
    assert len(check.report()["duplicate_samples"]) == DUPLICATE_SAMPLES


def test_make_runs_report_names_the_kinds_only_when_there_are_extra_copies() -> None:
    outcome = PublishOutcome({"published": 2, "per_broker": {"broker-a": 2}, "failed": 0, "retried": 0}, 1.0)
    check = RowIdCheck(2)
    check.add(QA0, _stored(0, "K0", 0))
    check.add(QA0, _stored(1, "K1", 1))
    assert "duplicate_kinds" not in final_report(outcome, check)
    check.add(QB0, _stored(1, "K1", 0))
    report = json.loads(json.dumps(final_report(outcome, check)))  # what `make run` prints
    assert report["duplicates"] == 1
    assert report["duplicate_kinds"] == {"another broker, same UNIQ_KEY": 1}
    assert report["duplicate_samples"][0]["row_id"] == 1
