"""END_TRANSACTION of a whole transaction (this project's extension, EndTransactionRequest.scope) through an
in-process broker: one call commits or rolls back every half message of (producer group, __transactionId__), is
idempotent, refuses to commit a transaction partly rolled back, commits a retried send (same UNIQ_KEY) once, rolls
back a producer group's leftovers, works in chunks, and finds the half messages again after a restart (the index is
rebuilt from the half queue)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_grpc_testkit import RunningBrokers
from broker_transaction_testkit import COMMIT, ROLLBACK, TOPIC, send_half, stored
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_common.constants import TRANS_OP_HALF_TOPIC
from mq_common.response_code import ResponseCode

TRANSACTION = broker_pb2.END_TRANSACTION_SCOPE_TRANSACTION
GROUP = broker_pb2.END_TRANSACTION_SCOPE_PRODUCER_GROUP


def whole(txid: str, kind: int, scope: int = TRANSACTION, group: str = "PG") -> broker_pb2.EndTransactionRequest:
    return broker_pb2.EndTransactionRequest(
        producer_group=group, transaction_id=txid, commit_or_rollback=kind, topic=TOPIC, scope=scope
    )


async def send_txn(stub: broker_pb2_grpc.BrokerAsyncStub, txid: str, count: int, prefix: str = "") -> None:
    for i in range(count):
        await send_half(stub, f"{prefix or txid}-{i}", __transactionId__=txid)


def on_topic(controller: BrokerController) -> int:
    assert controller.store is not None
    return controller.store.get_max_offset_in_queue(TOPIC, 1)


async def test_one_call_commits_every_half_message_of_a_transaction(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    await send_txn(stub, "job-0-0", 5)
    await send_txn(stub, "job-1-0", 3)
    await send_half(stub, "plain-tx")  # a RocketMQ transaction without a transaction id: never touched
    answer = await stub.EndTransaction(whole("job-0-0", COMMIT))
    assert (answer.code, answer.ended_count, answer.already_ended) == (ResponseCode.SUCCESS, 5, 0), answer.remark
    (op,) = await stored(controller, TRANS_OP_HALF_TOPIC, 1)  # RocketMQ 5's merged op record: offsets joined by ','
    assert (op.body, op.properties["TRAN_END_TYPE"]) == (b"0,1,2,3,4", "COMMIT")
    assert on_topic(controller) == 5
    again = await stub.EndTransaction(whole("job-0-0", COMMIT))
    assert (again.code, again.ended_count, again.already_ended) == (ResponseCode.SUCCESS, 0, 5), "idempotent"
    rolled = await stub.EndTransaction(whole("job-1-0", ROLLBACK))
    assert (rolled.code, rolled.ended_count) == (ResponseCode.SUCCESS, 3)
    late = await stub.EndTransaction(whole("job-1-0", COMMIT))
    assert (late.code, "rolled back" in late.remark) == (ResponseCode.ILLEGAL_OPERATION, True), late.remark
    unknown = await stub.EndTransaction(whole("nobody", COMMIT))
    assert (unknown.code, unknown.ended_count) == (ResponseCode.SUCCESS, 0)
    assert on_topic(controller) == 5, "nothing of the rolled-back transaction, nothing twice"
    assert controller.transaction_state is not None
    assert sorted(controller.transaction_state.open_counts().values()) == [1], "only the plain transaction is open"


async def test_a_retried_send_is_committed_once(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    await send_half(stub, "same-key", __transactionId__="t")
    await send_half(stub, "same-key", __transactionId__="t")  # the producer core's retry after a lost answer
    await send_half(stub, "other-key", __transactionId__="t")
    answer = await stub.EndTransaction(whole("t", COMMIT))
    assert (answer.code, answer.ended_count) == (ResponseCode.SUCCESS, 3), answer.remark
    assert "1 duplicates" in answer.remark
    assert on_topic(controller) == 2


async def test_a_producer_group_rollback_ends_its_leftovers_only(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    await send_txn(stub, "won", 2)
    await send_txn(stub, "lost-a", 2)
    await send_txn(stub, "lost-b", 1)
    assert (await stub.EndTransaction(whole("won", COMMIT))).code == ResponseCode.SUCCESS
    answer = await stub.EndTransaction(whole("", ROLLBACK, GROUP))
    assert (answer.code, answer.ended_count) == (ResponseCode.SUCCESS, 3), answer.remark
    assert on_topic(controller) == 2
    other = await stub.EndTransaction(whole("", ROLLBACK, GROUP, group="OTHER"))
    assert (other.code, other.ended_count) == (ResponseCode.SUCCESS, 0)


async def test_bad_whole_ends_are_refused(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await brokers.start(tmp_path)
    await send_txn(stub, "t", 1)
    cases = [
        whole("", COMMIT),
        whole("t", COMMIT, group=""),
        whole("", COMMIT, GROUP),
        whole("t", 0),
    ]
    for request in cases:
        answer = await stub.EndTransaction(request)
        assert answer.code == ResponseCode.INVALID_PARAMETER, (request, answer.remark)


async def test_many_half_messages_in_chunks_and_after_a_restart(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path)
    await send_txn(stub, "big", 300)
    await send_txn(stub, "after-restart", 4)
    answer = await stub.EndTransaction(whole("big", COMMIT))
    assert (answer.code, answer.ended_count) == (ResponseCode.SUCCESS, 300), answer.remark
    assert on_topic(controller) == 300
    await brokers.stop_all()
    restarted, stub2 = await brokers.start(tmp_path)
    again = await stub2.EndTransaction(whole("big", COMMIT))
    assert (again.code, again.ended_count) == (ResponseCode.SUCCESS, 0), again.remark
    answer2 = await stub2.EndTransaction(whole("after-restart", COMMIT))
    assert (answer2.code, answer2.ended_count) == (ResponseCode.SUCCESS, 4), answer2.remark
    assert on_topic(restarted) == 304


async def test_concurrent_ends_of_one_transaction_end_it_once(brokers: RunningBrokers, tmp_path: Path) -> None:
    """A retried end (the first one's caller gave up) waits for the first and then finds it done."""
    controller, stub = await brokers.start(tmp_path)
    await send_txn(stub, "t", 40)
    first, second = await asyncio.gather(
        stub.EndTransaction(whole("t", COMMIT)), stub.EndTransaction(whole("t", COMMIT))
    )
    assert (first.code, second.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS), (first.remark, second.remark)
    assert sorted([first.ended_count, second.ended_count]) == [0, 40]
    assert sorted([first.already_ended, second.already_ended]) == [0, 40]
    assert on_topic(controller) == 40
