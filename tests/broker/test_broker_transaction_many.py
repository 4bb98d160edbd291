"""Whole transactions sent and ended the way the Spark sink does, through an in-process broker: one multi-message send
(a SendBatch frame of independent requests, the gateway's batched hop) of half messages stores each as its own half
message (RMQ_SYS_TRANS_HALF_TOPIC, REAL_TOPIC / REAL_QID, indexed), none visible until committed, and so does a
MessageBatch (one body of many messages) with the transaction flag, which RocketMQ refuses (this project's extension,
tests/broker/test_broker_half_batch.py); a half
message with CHECK_IMMUNITY_TIME_IN_SECONDS is neither checked nor discarded before its immunity ends (it is copied
unchecked each pass, putImmunityMsgBackToHalfQueue), then is checked as any other; checks nobody can answer are
logged once per group and pass; and after a restart that lost the in-memory record of ended transactions (the check
progress moved past them), a repeated commit is answered as already ended and a commit of a rolled-back one is
refused (the summary op records, found through the IndexFile)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from broker_grpc_testkit import RunningBrokers, send_request, stream_send_batch, stream_send_message_batch
from broker_transaction_testkit import COMMIT, ROLLBACK, TOPIC, now_ms, pulled, stored
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.batch_codec import encode_batch
from mq_common.codec import MessageExt, encode_properties
from mq_common.constants import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, MessageSysFlag
from mq_common.response_code import ResponseCode
from structlog.testing import capture_logs

TRANSACTION = broker_pb2.END_TRANSACTION_SCOPE_TRANSACTION
SLOW: dict[str, Any] = {"transaction_check_interval_ms": 60_000}


def whole(txid: str, kind: int) -> broker_pb2.EndTransactionRequest:
    return broker_pb2.EndTransactionRequest(
        producer_group="PG", transaction_id=txid, commit_or_rollback=kind, topic=TOPIC, scope=TRANSACTION
    )


def half_request(uniq: str, txid: str, born_ms: int = 1_700_000_000_000, **props: str) -> broker_pb2.SendMessageRequest:
    request: broker_pb2.SendMessageRequest = send_request(
        TOPIC, uniq.encode(), 1, UNIQ_KEY=uniq, TRAN_MSG="true", __transactionId__=txid, **props
    )
    request.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    request.born_timestamp_ms = born_ms
    return request


async def send_many(
    stub: broker_pb2_grpc.BrokerAsyncStub, txid: str, count: int, born_ms: int = 1_700_000_000_000, **props: str
) -> None:
    """``count`` half messages of ``txid`` in ONE multi-message send (born in 2023 unless ``born_ms``)."""
    answers = await stream_send_batch(
        stub, *(half_request(f"{txid}-{i}", txid, born_ms, **props) for i in range(count))
    )
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * count, answers[0].remark


def on_topic(controller: BrokerController) -> int:
    assert controller.store is not None
    return controller.store.get_max_offset_in_queue(TOPIC, 1)


async def test_one_multi_message_send_stores_independent_half_messages(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **SLOW)
    await send_many(stub, "job-p0-a0-t1", 40)
    halves = await stored(controller, TRANS_HALF_TOPIC, 40)
    assert [(h.properties["REAL_TOPIC"], h.properties["REAL_QID"]) for h in halves] == [(TOPIC, "1")] * 40
    assert [h.queue_offset for h in halves] == list(range(40)), "each its own half message"
    assert {h.properties["PGROUP"] for h in halves} == {"PG"}
    assert await pulled(stub) == [], "nothing visible before the commit"
    answer = await stub.EndTransaction(whole("job-p0-a0-t1", COMMIT))
    assert (answer.code, answer.ended_count) == (ResponseCode.SUCCESS, 40), answer.remark
    assert on_topic(controller) == 40


async def test_a_message_batch_with_the_transaction_flag_is_stored_as_half_messages(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    controller, stub = await brokers.start(tmp_path, **SLOW)
    body = encode_batch(
        [(b"one", encode_properties({"UNIQ_KEY": "U1"}), 0), (b"two", encode_properties({"UNIQ_KEY": "U2"}), 0)]
    )
    request = broker_pb2.SendMessageBatchRequest(
        producer_group="PG",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        properties=encode_properties({"TRAN_MSG": "true"}),
        body=body,
    )
    answer = await stream_send_message_batch(stub, request)
    assert (answer.code, answer.queue_id, answer.message_count) == (ResponseCode.SUCCESS, 1, 2), answer.remark
    halves = await stored(controller, TRANS_HALF_TOPIC, 2)
    assert [(h.body, h.properties["REAL_TOPIC"], h.properties["PGROUP"]) for h in halves] == [
        (b"one", TOPIC, "PG"),
        (b"two", TOPIC, "PG"),
    ]
    assert on_topic(controller) == 0


async def test_a_repeated_commit_after_a_restart_is_already_ended(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **SLOW)
    await send_many(stub, "done", 300)  # more than one chunk (WHOLE_CHUNK 256)
    await send_many(stub, "undone", 5)
    assert (await stub.EndTransaction(whole("done", COMMIT))).ended_count == 300
    assert (await stub.EndTransaction(whole("undone", ROLLBACK))).ended_count == 5
    assert controller.transaction_check is not None
    assert controller.transaction_state is not None
    await controller.transaction_check.check()  # passes over both: the progress moves past every half message
    assert controller.transaction_state.half_progress == 305
    await brokers.stop_all()
    restarted, stub2 = await brokers.start(tmp_path, **SLOW)
    again = await stub2.EndTransaction(whole("done", COMMIT))
    assert (again.code, again.ended_count, again.already_ended) == (ResponseCode.SUCCESS, 0, 300), again.remark
    refused = await stub2.EndTransaction(whole("undone", COMMIT))
    assert (refused.code, "rolled back" in refused.remark) == (ResponseCode.ILLEGAL_OPERATION, True), refused.remark
    unknown = await stub2.EndTransaction(whole("never-sent", COMMIT))
    assert (unknown.code, unknown.ended_count, unknown.already_ended) == (ResponseCode.SUCCESS, 0, 0)
    assert on_topic(restarted) == 300, "nothing committed twice"


async def test_a_half_message_with_immunity_is_not_checked_before_it_ends(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    fast = {"transaction_timeout_ms": 200, "transaction_check_interval_ms": 100, "transaction_check_max": 2}
    controller, stub = await brokers.start(tmp_path, **fast)
    checks: list[MessageExt] = []
    assert controller.transaction_check is not None
    controller.transaction_check.listeners.append(checks.append)
    await send_many(stub, "immune", 3, now_ms(), CHECK_IMMUNITY_TIME_IN_SECONDS="2")
    await send_many(stub, "plain", 1)  # born in 2023: checked at once
    await asyncio.sleep(1.2)  # ~12 passes: far more than transaction_check_max
    assert {c.properties["__transactionId__"] for c in checks} == {"plain"}, "the immune ones are not checked"
    discarded = await stored(controller, TRANS_CHECK_MAX_TIME_TOPIC, 1)
    assert [m.properties["__transactionId__"] for m in discarded] == ["plain"]
    answer = await stub.EndTransaction(whole("immune", COMMIT))
    assert (answer.code, answer.ended_count) == (ResponseCode.SUCCESS, 3), "still open: committed whole"
    assert len(await pulled(stub)) == 3
    left_born = now_ms()
    await send_many(stub, "left", 2, left_born, CHECK_IMMUNITY_TIME_IN_SECONDS="1")
    async with asyncio.timeout(10):
        while True:
            if sum(c.properties["__transactionId__"] == "left" for c in checks) >= 2:
                break
            await asyncio.sleep(0.05)
    assert now_ms() - left_born >= 1000, "checked once its immunity ended"


async def test_checks_nobody_can_answer_are_logged_once_per_group_and_pass(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    controller, stub = await brokers.start(tmp_path, **SLOW)
    await send_many(stub, "job-a", 50)
    answers = await stream_send_batch(stub, *(half_request(f"other-{i}", "job-b") for i in range(3)))
    assert {a.code for a in answers} == {ResponseCode.SUCCESS}
    assert controller.transaction_check is not None
    with capture_logs() as logs:
        result = await controller.transaction_check.check()
    assert result.checked == 53
    lines = [e for e in logs if e["event"] == "transaction_check_no_producer"]
    assert [(e["producer_group"], e["checks"]) for e in lines] == [("PG", 53)], "one line per group and pass"
