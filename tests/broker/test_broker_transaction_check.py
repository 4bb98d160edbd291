"""TransactionalMessageCheckService through an in-process broker: an open transaction older than
transaction_timeout_ms is checked back every transaction_check_interval_ms (a copy at the end of the half queue,
TRANSACTION_CHECK_TIMES + 1, handed to the check listener), the answer naming the copy ends it once (a late answer for
the first half message is refused), a young one is not checked before its time, one never answered goes to
TRANS_CHECK_MAX_TIME_TOPIC after transaction_check_max checks, and the progress (CID_RMQ_SYS_TRANS offsets) and the
ended transactions survive a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
from broker_grpc_testkit import RunningBrokers
from broker_transaction_testkit import COMMIT, ROLLBACK, end_request, now_ms, pulled, send_half, stored
from mq.broker.v1 import broker_pb2, transaction_pb2, transaction_pb2_grpc
from mq_broker.controller import BrokerController
from mq_broker.metrics import BrokerMetrics
from mq_common.codec import MessageExt, decode_message
from mq_common.constants import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, MixAll
from mq_common.metrics import NodeIdentity
from mq_common.response_code import ResponseCode
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

FAST: dict[str, Any] = {
    "transaction_timeout_ms": 300,
    "transaction_check_interval_ms": 100,
    "transaction_check_max": 3,
}


def listen(controller: BrokerController) -> list[MessageExt]:
    checks: list[MessageExt] = []
    assert controller.transaction_check is not None
    controller.transaction_check.listeners.append(checks.append)
    return checks


async def wait_checks(checks: list[MessageExt], count: int, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while True:
            if len(checks) >= count:
                return
            await asyncio.sleep(0.02)


def answer(copy: MessageExt, kind: int) -> broker_pb2.EndTransactionRequest:
    return broker_pb2.EndTransactionRequest(
        producer_group=copy.properties["PGROUP"],
        tran_state_table_offset=copy.queue_offset,
        commit_log_offset=copy.commit_log_offset,
        commit_or_rollback=kind,
        from_transaction_check=True,
        msg_id=copy.properties["UNIQ_KEY"],
        transaction_id=copy.properties["UNIQ_KEY"],
        topic=copy.properties["REAL_TOPIC"],
    )


async def test_an_open_transaction_is_checked_back_and_the_answer_ends_it_once(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    controller, stub = await brokers.start(tmp_path, **FAST)
    checks = listen(controller)
    sent = await send_half(stub, "TX1")
    done = await send_half(stub, "TX2")
    assert (await stub.EndTransaction(end_request(done, ROLLBACK))).code == ResponseCode.SUCCESS
    await wait_checks(checks, 1)
    copy = checks[0]
    assert copy.properties["UNIQ_KEY"] == "TX1", "the rolled-back one is never checked"
    assert (copy.topic, copy.properties["TRANSACTION_CHECK_TIMES"]) == (TRANS_HALF_TOPIC, "1")
    # After the original; after TX2 too, unless a loaded machine let TX1 age past the timeout before TX2 was sent.
    assert copy.queue_offset > sent.queue_offset, "a copy at the end of the half queue"
    assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == str(sent.queue_offset)
    reply = await stub.EndTransaction(answer(copy, COMMIT))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    (msg,) = await pulled(stub)
    assert (msg.uniq_key, msg.body) == ("TX1", b"TX1")
    assert "TRAN_PREPARED_QUEUE_OFFSET" not in msg.properties
    late = await stub.EndTransaction(end_request(sent, COMMIT))
    assert (late.code, "already committed" in late.remark) == (ResponseCode.ILLEGAL_OPERATION, True), late.remark
    seen = len(checks)
    await asyncio.sleep(0.5)
    assert len(checks) == seen, "an ended transaction is not checked again"
    assert len(await pulled(stub)) == 1
    state = controller.transaction_state
    assert state is not None
    assert state.ended == {}, "forgotten once its last copy is behind the progress"
    assert controller.consumer_offsets is not None
    progress = controller.consumer_offsets.query_offset(MixAll.CID_SYS_RMQ_TRANS, TRANS_HALF_TOPIC, 0)
    assert progress == state.half_progress > copy.queue_offset


async def test_an_answer_for_an_older_copy_ends_the_transaction_too(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **FAST)
    checks = listen(controller)
    await send_half(stub, "TX1")
    await wait_checks(checks, 2)
    first, second = checks[0], checks[1]
    assert second.properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert (await stub.EndTransaction(answer(first, ROLLBACK))).code == ResponseCode.SUCCESS
    again = await stub.EndTransaction(answer(second, COMMIT))
    assert (again.code, "already rolled back" in again.remark) == (ResponseCode.ILLEGAL_OPERATION, True)
    assert await pulled(stub) == []


async def test_a_young_transaction_is_not_checked_before_its_timeout(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **{**FAST, "transaction_timeout_ms": 1500})
    checks = listen(controller)
    born = now_ms()
    await send_half(stub, "TX1", born_ms=born)
    await asyncio.sleep(0.8)
    assert checks == []
    await wait_checks(checks, 1)
    assert now_ms() - born >= 1500


async def test_never_answered_goes_to_the_check_max_topic(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **FAST)
    checks = listen(controller)
    sent = await send_half(stub, "TX1")
    (discarded,) = await stored(controller, TRANS_CHECK_MAX_TIME_TOPIC, 1)
    assert [c.properties["TRANSACTION_CHECK_TIMES"] for c in checks] == ["1", "2", "3"]
    assert (discarded.properties["UNIQ_KEY"], discarded.properties["REAL_TOPIC"]) == ("TX1", "TxTopic")
    late = await stub.EndTransaction(end_request(sent, COMMIT, from_transaction_check=True))
    assert late.code == ResponseCode.ILLEGAL_OPERATION, late.remark
    last = await stub.EndTransaction(answer(checks[-1], COMMIT))
    assert (last.code, "discarded" in last.remark) == (ResponseCode.ILLEGAL_OPERATION, True), last.remark
    assert await pulled(stub) == []


async def test_progress_and_ended_transactions_survive_a_restart(brokers: RunningBrokers, tmp_path: Path) -> None:
    slow = {**FAST, "transaction_check_interval_ms": 60_000}
    controller, stub = await brokers.start(tmp_path, **FAST)
    checks = listen(controller)
    committed = await send_half(stub, "TX1")
    await send_half(stub, "TX2")
    await wait_checks(checks, 2)
    (copy1,) = [c for c in checks if c.properties["UNIQ_KEY"] == "TX1"][:1]
    assert (await stub.EndTransaction(answer(copy1, COMMIT))).code == ResponseCode.SUCCESS
    await brokers.stop_all()
    restarted, stub2 = await brokers.start(tmp_path, **slow)
    state = restarted.transaction_state
    assert state is not None
    assert state.half_progress > 0, "the progress came back from the consumer offsets"
    late = await stub2.EndTransaction(end_request(committed, COMMIT))
    assert late.code == ResponseCode.ILLEGAL_OPERATION, late.remark
    later = listen(restarted)
    assert restarted.transaction_check is not None
    await restarted.transaction_check.check()
    keys = {c.properties["UNIQ_KEY"] for c in later}
    assert keys == {"TX2"}, "only the open one is checked after the restart"
    assert len(await pulled(stub2)) == 1


async def test_checks_reach_one_registered_gateway_stream_per_check(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **FAST)
    manager = controller.producer_manager
    assert manager is not None
    await send_half(stub, "TX0")
    async with asyncio.timeout(10):
        while True:
            if manager.dropped > 0:
                break  # checked once with no gateway registered: dropped, asked again next interval
            await asyncio.sleep(0.02)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{controller.port}") as ch:
        checks_stub = transaction_pb2_grpc.TransactionCheckStub(ch)
        outbox: asyncio.Queue[transaction_pb2.TransactionChecksRequest] = asyncio.Queue()
        outbox.put_nowait(transaction_pb2.TransactionChecksRequest(client_id="gw-1", producer_groups=["PG"]))

        async def requests() -> Any:
            while True:
                yield await outbox.get()

        call = checks_stub.TransactionChecks(requests())
        async with asyncio.timeout(10):
            check = await call.read()
        assert (check.producer_group, check.topic, check.msg_id) == ("PG", "TxTopic", "TX0")
        assert check.broker_name == controller.settings.broker_name
        copy = decode_message(check.message_bytes)
        assert (copy.queue_offset, copy.commit_log_offset) == (check.tran_state_table_offset, check.commit_log_offset)
        reply = await stub.EndTransaction(answer(copy, COMMIT))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        call.cancel()
    assert [m.uniq_key for m in await pulled(stub)] == ["TX0"]


async def test_a_pass_stops_before_a_transaction_being_ended(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **{**FAST, "transaction_check_interval_ms": 60_000})
    checks = listen(controller)
    sent = await send_half(stub, "TX1")
    state, service = controller.transaction_state, controller.transaction_check
    assert state is not None
    assert service is not None
    await stored(controller, TRANS_HALF_TOPIC, 1)
    state.ending.add(sent.queue_offset)
    result = await service.check()
    assert (result.checked, state.half_progress, checks) == (0, 0, []), "left for the next pass"
    state.ending.clear()
    assert (await service.check()).checked == 1
    assert (await stub.EndTransaction(answer(checks[0], COMMIT))).code == ResponseCode.SUCCESS
    await service.check()  # passes the ended copy and forgets the transaction
    assert state.ended == {}
    for copy_or_first in (answer(checks[0], ROLLBACK), end_request(sent, COMMIT, from_transaction_check=True)):
        refused = await stub.EndTransaction(copy_or_first)
        assert refused.code == ResponseCode.ILLEGAL_OPERATION, refused.remark
    assert len(await pulled(stub)) == 1


async def test_transaction_metrics_count_opens_ends_and_checks(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **{**FAST, "transaction_check_interval_ms": 60_000})
    metrics = BrokerMetrics(NodeIdentity("c", "broker", "broker-a"), max_topics=10, flush_disk_type="SYNC_FLUSH")
    state, service, check = controller.transaction_state, controller.transaction, controller.transaction_check
    assert state is not None
    assert service is not None
    assert check is not None
    service.metrics = check.metrics = metrics
    metrics.bind_half_messages(state.open_counts)
    checks = listen(controller)
    sent = [await send_half(stub, f"TX{i}") for i in range(3)]
    assert state.open_counts() == {"TxTopic": 3}
    assert (await stub.EndTransaction(end_request(sent[0], COMMIT))).code == ResponseCode.SUCCESS
    assert (await stub.EndTransaction(end_request(sent[1], ROLLBACK))).code == ResponseCode.SUCCESS
    await stored(controller, TRANS_HALF_TOPIC, 3)
    await check.check()
    assert [c.properties["UNIQ_KEY"] for c in checks] == ["TX2"]
    got = {
        (s.name, s.labels.get("topic", "")): s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
    }
    assert got[("rocketmq_half_messages", "TxTopic")] == 1
    assert got[("rocketmq_commit_messages_total", "TxTopic")] == 1
    assert got[("rocketmq_rollback_messages_total", "TxTopic")] == 1
    assert got[("rocketmq_finish_message_latency_count", "TxTopic")] == 2
    assert got[("mq_broker_transaction_checks_total", "TxTopic")] == 1
    await brokers.stop_all()
    restarted, _ = await brokers.start(tmp_path, **{**FAST, "transaction_check_interval_ms": 60_000})
    assert restarted.transaction_state is not None
    assert restarted.transaction_state.open_counts() == {"TxTopic": 1}, "recounted from the half queue"


async def test_a_run_of_open_transactions_is_copied_in_one_put(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path, **{**FAST, "transaction_check_interval_ms": 60_000})
    checks = listen(controller)
    sent = [await send_half(stub, f"TX{i}") for i in range(6)]
    assert (await stub.EndTransaction(end_request(sent[3], ROLLBACK))).code == ResponseCode.SUCCESS
    await stored(controller, TRANS_HALF_TOPIC, 6)
    state, service = controller.transaction_state, controller.transaction_check
    assert state is not None
    assert service is not None
    puts: list[list[str]] = []
    put_messages = service.store.put_messages

    async def recording(batch: Any) -> Any:
        puts.append([m.body.decode() for m in batch])
        return await put_messages(batch)

    service.store.put_messages = recording  # type: ignore[method-assign]
    result = await service.check()
    assert puts == [["TX0", "TX1", "TX2"], ["TX4", "TX5"]], "one put per run; the rolled-back one ends a run"
    assert (result.checked, result.passed) == (5, 1)
    assert [c.properties["UNIQ_KEY"] for c in checks] == ["TX0", "TX1", "TX2", "TX4", "TX5"]
    assert [c.queue_offset for c in checks] == [6, 7, 8, 9, 10], "copies at the end of the half queue, in order"
    assert state.half_progress == 6
    for copy in checks:
        assert (await stub.EndTransaction(answer(copy, COMMIT))).code == ResponseCode.SUCCESS
    assert sorted(m.uniq_key or "" for m in await pulled(stub)) == ["TX0", "TX1", "TX2", "TX4", "TX5"]
