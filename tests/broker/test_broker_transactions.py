"""Transaction half messages and END_TRANSACTION through an in-process broker (TransactionalMessageBridge,
EndTransactionProcessor): a half message waits on RMQ_SYS_TRANS_HALF_TOPIC, invisible on its topic; a commit stores
the real message (COMMIT type, no TRAN_MSG / REAL_*) and an op record, a rollback only the op record; every bad end
(unknown, foreign group, wrong offsets, already ended, late, on a slave) gets its code and remark and stores
nothing; a restarted broker still knows which transactions ended (from the op queue)."""

from __future__ import annotations

from pathlib import Path

from broker_grpc_testkit import RunningBrokers, send_request, stream_send, stream_send_message_batch
from broker_transaction_testkit import (
    COMMIT,
    ROLLBACK,
    TOPIC,
    end_request,
    now_ms,
    pulled,
    send_half,
    stored,
)
from mq.broker.v1 import broker_pb2
from mq_common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageSysFlag
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode


async def test_half_message_waits_then_commit_delivers_it(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    sent = await send_half(stub, "TX1", KEYS="k1")
    assert (sent.queue_id, sent.transaction_id) == (1, "TX1")
    assert await pulled(stub) == [], "a half message is not on its topic"
    (half,) = await stored(controller, TRANS_HALF_TOPIC, 1)
    assert (half.queue_offset, half.properties["REAL_TOPIC"], half.properties["REAL_QID"]) == (0, TOPIC, "1")
    assert half.properties["PGROUP"] == "PG"
    assert half.sys_flag & ROLLBACK == MessageSysFlag.TRANSACTION_NOT_TYPE, "dispatched to the half topic's CQ"
    answer = await stub.EndTransaction(end_request(sent, COMMIT))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    (msg,) = await pulled(stub)
    assert (msg.body, msg.uniq_key, msg.tags, msg.keys) == (b"TX1", "TX1", "T", ["k1"])
    assert msg.sys_flag & ROLLBACK == COMMIT
    for gone in ("TRAN_MSG", "REAL_TOPIC", "REAL_QID"):
        assert gone not in msg.properties
    (op,) = await stored(controller, TRANS_OP_HALF_TOPIC, 1)
    assert (op.body, op.tags, op.properties["TRAN_END_TYPE"]) == (b"0", "d", "COMMIT")
    assert controller.transaction_state is not None
    assert controller.transaction_state.ended == {0: "COMMIT"}


async def test_rollback_stores_only_the_op_record(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    await send_half(stub, "TX0")
    sent = await send_half(stub, "TX1")
    assert sent.queue_offset == 1
    answer = await stub.EndTransaction(end_request(sent, ROLLBACK))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    (op,) = await stored(controller, TRANS_OP_HALF_TOPIC, 1)
    assert (op.body, op.properties["TRAN_END_TYPE"]) == (b"1", "ROLLBACK")
    assert await pulled(stub) == []
    unknown = await stub.EndTransaction(end_request(sent, MessageSysFlag.TRANSACTION_NOT_TYPE))
    assert (unknown.code, "stays open" in unknown.remark) == (ResponseCode.SUCCESS, True)


async def test_bad_ends_are_refused_and_change_nothing(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    sent = await send_half(stub, "TX1")
    plain = await stream_send(stub, send_request(TOPIC, b"plain", 2, UNIQ_KEY="P1"))
    cases: dict[str, tuple[broker_pb2.EndTransactionRequest, int, str]] = {
        "no message there": (
            end_request(sent, COMMIT, commit_log_offset=10**9), ResponseCode.SYSTEM_ERROR, "Find prepared"),
        "a normal message": (
            end_request(sent, COMMIT, commit_log_offset=decode_offset_msg_id(plain.msg_id)[2]),
            ResponseCode.SYSTEM_ERROR, "Find prepared"),
        "mid-record offset": (
            end_request(sent, COMMIT, commit_log_offset=decode_offset_msg_id(sent.msg_id)[2] + 7),
            ResponseCode.SYSTEM_ERROR, "Find prepared"),
        "negative offset": (end_request(sent, COMMIT, commit_log_offset=-1), ResponseCode.SYSTEM_ERROR, "Find"),
        "foreign group": (end_request(sent, COMMIT, producer_group="other"), ResponseCode.SYSTEM_ERROR, "group wrong"),
        "queue offset": (
            end_request(sent, COMMIT, tran_state_table_offset=5), ResponseCode.SYSTEM_ERROR, "state table offset"),
        "transaction id": (
            end_request(sent, ROLLBACK, transaction_id="X"), ResponseCode.SYSTEM_ERROR, "transaction id wrong"),
        "topic": (end_request(sent, COMMIT, topic="Other"), ResponseCode.SYSTEM_ERROR, "topic wrong"),
        "bad kind": (end_request(sent, 4), ResponseCode.INVALID_PARAMETER, "none of"),
    }  # fmt: skip
    for name, (request, code, remark) in cases.items():
        answer = await stub.EndTransaction(request)
        assert (answer.code, remark in answer.remark) == (code, True), (name, answer.remark)
    assert await stored(controller, TRANS_OP_HALF_TOPIC) == []
    assert await pulled(stub) == []
    assert (await stub.EndTransaction(end_request(sent, ROLLBACK))).code == ResponseCode.SUCCESS
    for kind, word in ((COMMIT, "rolled back"), (ROLLBACK, "rolled back")):
        again = await stub.EndTransaction(end_request(sent, kind))
        assert (again.code, f"already {word}" in again.remark) == (ResponseCode.ILLEGAL_OPERATION, True), again.remark
    assert len(await stored(controller, TRANS_OP_HALF_TOPIC, 1)) == 1
    assert await pulled(stub) == []


async def test_duplicate_commit_is_refused_after_a_restart_too(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await brokers.start(tmp_path)
    sent = await send_half(stub, "TX1")
    assert (await stub.EndTransaction(end_request(sent, COMMIT))).code == ResponseCode.SUCCESS
    again = await stub.EndTransaction(end_request(sent, COMMIT))
    assert (again.code, "already committed" in again.remark) == (ResponseCode.ILLEGAL_OPERATION, True)
    await brokers.stop_all()
    _restarted, stub2 = await brokers.start(tmp_path)
    for kind in (COMMIT, ROLLBACK):
        late = await stub2.EndTransaction(end_request(sent, kind, from_transaction_check=True))
        assert (late.code, "already committed" in late.remark) == (ResponseCode.ILLEGAL_OPERATION, True), late.remark
    assert len(await pulled(stub2)) == 1, "committed once"


async def test_producer_end_after_the_immunity_time_is_refused(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await brokers.start(tmp_path, transaction_timeout_ms=1)
    # born_timestamp_ms of send_request is in 2023: far past any immunity time.
    sent = await send_half(stub, "TX1", CHECK_IMMUNITY_TIME_IN_SECONDS="1")
    late = await stub.EndTransaction(end_request(sent, COMMIT))
    assert (late.code, "immunity" in late.remark) == (ResponseCode.ILLEGAL_OPERATION, True), late.remark
    assert await pulled(stub) == []
    checked = await stub.EndTransaction(end_request(sent, COMMIT, from_transaction_check=True))
    assert checked.code == ResponseCode.SUCCESS, "a check answer is never too late"
    assert len(await pulled(stub)) == 1
    fresh = await send_half(stub, "TX2", born_ms=now_ms(), CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    assert (await stub.EndTransaction(end_request(fresh, ROLLBACK))).code == ResponseCode.SUCCESS


async def test_half_messages_are_not_batched_and_a_slave_ends_nothing(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await brokers.start(tmp_path)
    sent = await send_half(stub, "TX1")
    _slave, slave_stub = await brokers.start(tmp_path / "slave", broker_role="SLAVE", broker_id=1)
    answer = await slave_stub.EndTransaction(end_request(sent, COMMIT))
    assert answer.code == ResponseCode.SLAVE_NOT_AVAILABLE
    batch = broker_pb2.SendMessageBatchRequest(
        producer_group="PG", topic=TOPIC, queue_id=1, body=b"x", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE
    )
    refused = await stream_send_message_batch(stub, batch)
    assert (refused.code, "batch" in refused.remark) == (ResponseCode.MESSAGE_ILLEGAL, True), refused.remark
