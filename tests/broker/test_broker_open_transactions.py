"""TransactionAdmin.QueryOpenTransactions through an in-process broker: a topic's open transactions (not the
committed, rolled-back or other topics' ones) with producer group, keys, age and check count; one UNIQ_KEY's state
(OPEN, COMMITTED, ROLLED_BACK, CHECK_MAX, UNKNOWN), also after the check progress passed it; bad input; and the
CommitLog files an open half message needs kept by the CleanService until the transaction ends."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
from broker_grpc_testkit import CHANNEL_OPTIONS, RunningBrokers, send_request, stream_send, stream_send_batch
from broker_transaction_testkit import COMMIT, ROLLBACK, TOPIC, end_request, send_half, stored
from mq.broker.v1 import broker_pb2_grpc, transaction_pb2, transaction_pb2_grpc
from mq_broker.controller import BrokerController
from mq_broker.transaction.open_transactions import OpenTransactions
from mq_broker.transaction.transaction_state import SCAN_BATCH
from mq_common.constants import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode

MANUAL: dict[str, Any] = {  # checks only when the test runs a pass
    "transaction_timeout_ms": 300,
    "transaction_check_interval_ms": 3_600_000,
    "transaction_check_max": 2,
}
HOUR_S = 3600


def admin_stub(controller: BrokerController) -> tuple[grpc.aio.Channel, transaction_pb2_grpc.TransactionAdminAsyncStub]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{controller.port}", options=CHANNEL_OPTIONS)
    return channel, transaction_pb2_grpc.TransactionAdminStub(channel)


async def query(
    stub: transaction_pb2_grpc.TransactionAdminAsyncStub, topic: str = TOPIC, **kw: Any
) -> transaction_pb2.QueryOpenTransactionsResponse:
    resp: transaction_pb2.QueryOpenTransactionsResponse = await stub.QueryOpenTransactions(
        transaction_pb2.QueryOpenTransactionsRequest(topic=topic, **kw)
    )
    return resp


async def state_of(stub: transaction_pb2_grpc.TransactionAdminAsyncStub, uniq: str) -> str:
    resp = await query(stub, uniq_key=uniq)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp.state


async def test_open_transactions_of_a_topic_and_each_state(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **MANUAL)
    channel, admin = admin_stub(controller)
    try:
        born_ms = time.time_ns() // 1_000_000 - 5_000
        opened = await send_half(stub, "TX-OPEN", born_ms, KEYS="order-1 order-2", PGROUP="PG")
        committed = await send_half(stub, "TX-COMMIT", born_ms)
        rolled = await send_half(stub, "TX-ROLLBACK", born_ms)
        await send_half(stub, "TX-LATER", born_ms + 1)
        other = send_request("OtherTxTopic", b"x", 0, UNIQ_KEY="TX-OTHER", TRAN_MSG="true")
        other.sys_flag = 4  # TRANSACTION_PREPARED_TYPE
        assert (await stream_send(stub, other)).code == ResponseCode.SUCCESS
        assert (await stub.EndTransaction(end_request(committed, COMMIT))).code == ResponseCode.SUCCESS
        assert (await stub.EndTransaction(end_request(rolled, ROLLBACK))).code == ResponseCode.SUCCESS

        resp = await query(admin)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.total_open == 2
        assert [t.msg_id for t in resp.transactions] == ["TX-OPEN", "TX-LATER"], "oldest first, ended ones left out"
        first = resp.transactions[0]
        assert (first.producer_group, first.transaction_id, first.keys, first.tags) == (
            "PG", "TX-OPEN", "order-1 order-2", "T"
        )  # fmt: skip
        assert first.born_timestamp_ms == born_ms
        assert 5_000 <= first.age_ms < 60_000
        assert first.check_times == 0
        assert first.prepared_queue_offset == first.queue_offset == opened.queue_offset
        assert first.commit_log_offset == decode_offset_msg_id(opened.msg_id)[2]
        assert [t.msg_id for t in (await query(admin, max_num=1)).transactions] == ["TX-OPEN"]
        assert (await query(admin, max_num=1)).total_open == 2
        assert [t.msg_id for t in (await query(admin, "OtherTxTopic")).transactions] == ["TX-OTHER"]
        assert (await query(admin, "NoSuchTopic")).total_open == 0

        assert await state_of(admin, "TX-COMMIT") == "COMMITTED"
        assert await state_of(admin, "TX-ROLLBACK") == "ROLLED_BACK"
        assert await state_of(admin, "TX-NEVER-SENT") == "UNKNOWN"
        one = await query(admin, uniq_key="TX-OPEN")
        assert (one.state, one.transaction.msg_id, one.transaction.check_times) == ("OPEN", "TX-OPEN", 0)
        assert one.total_open == 2

        check = controller.transaction_check
        assert check is not None
        await check.check()  # checked once: a copy with TRANSACTION_CHECK_TIMES 1 at the end of the half queue
        resp = await query(admin)
        assert [(t.msg_id, t.check_times) for t in resp.transactions] == [("TX-OPEN", 1), ("TX-LATER", 1)]
        assert resp.transactions[0].prepared_queue_offset == opened.queue_offset
        assert resp.transactions[0].queue_offset > opened.queue_offset, "the newest copy"
        one = await query(admin, uniq_key="TX-OPEN")
        assert (one.state, one.transaction.check_times) == ("OPEN", 1)
        # the ended ones are behind the check progress now and forgotten: their state comes from what they left
        assert await state_of(admin, "TX-COMMIT") == "COMMITTED"
        assert await state_of(admin, "TX-ROLLBACK") == "ROLLED_BACK"

        await check.check()
        await check.check()  # transaction_check_max 2 reached: both go to TRANS_CHECK_MAX_TIME_TOPIC
        await stored(controller, TRANS_CHECK_MAX_TIME_TOPIC, 2)
        resp = await query(admin)
        assert (list(resp.transactions), resp.total_open) == ([], 0)
        assert await state_of(admin, "TX-OPEN") == "CHECK_MAX"
        await check.check()  # passed and forgotten: still CHECK_MAX
        assert await state_of(admin, "TX-LATER") == "CHECK_MAX"
    finally:
        await channel.close()


async def test_bad_input_gets_a_code_and_a_remark(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, _stub = await brokers.start(tmp_path, **MANUAL)
    channel, admin = admin_stub(controller)
    try:
        for request, code, remark in [
            ({"topic": ""}, ResponseCode.INVALID_PARAMETER, "topic"),
            ({"topic": "bad topic!"}, ResponseCode.INVALID_PARAMETER, "topic"),
            ({"topic": TOPIC, "max_num": -1}, ResponseCode.INVALID_PARAMETER, "maxNum -1"),
            ({"topic": TOPIC, "max_num": 10_000_000}, ResponseCode.INVALID_PARAMETER, "out of range"),
        ]:
            resp = await admin.QueryOpenTransactions(transaction_pb2.QueryOpenTransactionsRequest(**request))
            assert resp.code == code, (request, resp)
            assert remark in resp.remark.lower() or remark in resp.remark, (request, resp.remark)
    finally:
        await channel.close()


async def _fill_commit_log(stub: broker_pb2_grpc.BrokerAsyncStub, files: int) -> None:
    body = b"x" * 8 * 1024
    for i in range(files * 8):  # 64 KiB files
        answer = await stream_send(stub, send_request("FillTopic", body, 0, UNIQ_KEY=f"fill-{i}"))
        assert answer.code == ResponseCode.SUCCESS, answer.remark


class _Disk:
    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def __call__(self, path: Path) -> float:
        return self.ratio


async def test_commit_log_files_holding_open_half_messages_stay_until_the_transaction_ends(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    """The broker's keep_from is the lower of the held timers' offset and the check progress's half record: an
    expired file holding an open half message stays (short of forced cleaning), and goes once it is ended and the
    check progress passed it."""
    controller, stub = await brokers.start(tmp_path, **MANUAL)
    store, check = controller.store, controller.transaction_check
    assert store is not None
    assert check is not None
    await _fill_commit_log(stub, 2)
    half = await send_half(stub, "TX-HELD")
    half_offset = decode_offset_msg_id(half.msg_id)[2]
    await _fill_commit_log(stub, 4)
    keep_from = store.clean_service.keep_from
    assert keep_from is not None
    assert keep_from() == half_offset, "the open half message's CommitLog offset"

    clean = store.clean_service
    later = time.time() + 73 * HOUR_S  # every file expired
    clean.clock_s = lambda: later
    clean.delete_when_hours = frozenset({time.localtime(later).tm_hour})
    clean.disk_usage_ratio = _Disk(0.10)
    await asyncio.to_thread(clean.run_once)
    assert 0 < store.commit_log.min_offset <= half_offset, "the files before it go, the one holding it stays"
    assert store.lookup_message_by_offset(half_offset) is not None

    assert (await stub.EndTransaction(end_request(half, ROLLBACK))).code == ResponseCode.SUCCESS
    assert keep_from() == half_offset, "ended, but the check progress has not passed it yet"
    await check.check()
    assert keep_from() is None
    await asyncio.to_thread(clean.run_once)
    assert store.commit_log.min_offset > half_offset


async def test_forced_cleaning_ignores_open_half_messages(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **MANUAL)
    store = controller.store
    assert store is not None
    half = await send_half(stub, "TX-FORCED")
    half_offset = decode_offset_msg_id(half.msg_id)[2]
    await _fill_commit_log(stub, 4)
    clean = store.clean_service
    clean.disk_usage_ratio = _Disk(0.95)  # past disk_space_clean_forcibly_ratio
    await asyncio.to_thread(clean.run_once)
    assert store.commit_log.min_offset > half_offset


async def test_the_scan_yields_to_the_event_loop_between_slices(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **MANUAL)
    count = 3 * SCAN_BATCH + 5
    for start in range(0, count, 64):
        requests = []
        for i in range(start, min(count, start + 64)):
            request = send_request(TOPIC, b"h", 1, UNIQ_KEY=f"TX-{i:05d}", TRAN_MSG="true")
            request.sys_flag = 4  # TRANSACTION_PREPARED_TYPE
            requests.append(request)
        answers = await stream_send_batch(stub, *requests)
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
    store = controller.store
    assert store is not None
    assert controller.transaction_state is not None
    async with asyncio.timeout(10):  # the ConsumeQueue is built asynchronously
        while True:
            if store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0) >= count:
                break
            await asyncio.sleep(0.02)
    queries = OpenTransactions(store, controller.transaction_state)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks
    result = await queries.query(TOPIC, max_num=10)
    ticker.cancel()
    assert ticks - before >= 3, "the loop ran between the slices"
    assert result.total_open == count
    assert [t.msg_id for t in result.transactions] == [f"TX-{i:05d}" for i in range(10)]
