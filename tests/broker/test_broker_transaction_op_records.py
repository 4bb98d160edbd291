"""A whole-transaction end's records: real messages built from the raw half records (the same as from decoded ones),
op records that list many half queue offsets (RocketMQ 5's merged op messages, joined by ','), read back after a
restart and by a promoted slave fed the master's CommitLog, while single op records and RocketMQ's body-only ones
still read. Stores in-process, no gRPC."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from broker_grpc_testkit import RunningBrokers
from broker_testkit import open_store, store_config
from broker_transaction_testkit import send_half
from mq.broker.v1 import broker_pb2
from mq_broker.metrics import BrokerMetrics
from mq_broker.store.config import BrokerRole
from mq_broker.store.message import MessageExtBrokerInner, PutMessageResult
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.transaction.check_service import TransactionalMessageCheckService, Waiting
from mq_broker.transaction.half_message import (
    COMMIT,
    PREPARED_QUEUE_OFFSETS,
    REMOVE_TAG,
    ROLLBACK,
    HalfMessageError,
    check_copy,
    committed_message,
    half_placement,
    op_record,
    op_record_ends,
    op_record_many,
)
from mq_broker.transaction.half_record import (
    NATIVE,
    committed_record,
    parse_half_record,
    property_value,
    without_properties,
)
from mq_broker.transaction.open_transactions import OpenTransactions
from mq_broker.transaction.transaction_state import TransactionState
from mq_broker.transaction.transactional_message_service import OP_RUN, TransactionalMessageService
from mq_common.codec import MessageDecodeError, decode_message, encode_message, encode_properties, host_to_bytes
from mq_common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageConst, MessageSysFlag
from mq_common.errors import MQBrokerError
from mq_common.metrics import NodeIdentity
from mq_common.protocol.transaction import EndTransactionRequestHeader, EndTransactionScope
from mq_common.response_code import ResponseCode
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
TX_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
TX_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
TX_SCOPE = broker_pb2.END_TRANSACTION_SCOPE_TRANSACTION
NOT_COMMITTED = ("REAL_TOPIC", "REAL_QID", "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET")
HOST_V4 = host_to_bytes("127.0.0.1", 40000)
HOST_V6 = host_to_bytes("::1", 40001)


def half(
    i: int, txid: str = "job-0-0", born_host: bytes = HOST_V4, uniq: str = "", **props: str
) -> MessageExtBrokerInner:
    """A half message of TxTopic as the send path stores it (half_placement), of producer group PG."""
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq or f"U{i:06d}", "__transactionId__": txid, **props}
    placed = half_placement("TxTopic", i % 3, props, PREPARED, "PG")
    return MessageExtBrokerInner.build(
        topic=placed.topic,
        queue_id=placed.queue_id,
        body=f"row-{i}".encode(),
        properties=placed.properties,
        sys_flag=placed.sys_flag,
        born_timestamp_ms=1_700_000_000_000 + i,
        born_host=born_host,
        reconsume_times=i % 2,
    )


def whole(txid: str, kind: int = MessageSysFlag.TRANSACTION_COMMIT_TYPE) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=0,
        commit_log_offset=0,
        commit_or_rollback=kind,
        transaction_id=txid,
        scope=EndTransactionScope.TRANSACTION,
    )


def raw_record(inner: MessageExtBrokerInner, queue_offset: int = 7) -> bytes:
    return encode_message(
        topic=inner.topic.encode(),
        body=inner.body,
        properties=inner.properties_string.encode(),
        queue_id=inner.queue_id,
        flag=inner.flag,
        queue_offset=queue_offset,
        physical_offset=4096,
        sys_flag=inner.sys_flag,
        born_timestamp_ms=inner.born_timestamp_ms,
        born_host=inner.born_host,
        store_timestamp_ms=1_700_000_000_500,
        store_host=HOST_V4,
        reconsume_times=inner.reconsume_times,
    )


def op_records(store: DefaultMessageStore) -> list[tuple[bytes, dict[str, str]]]:
    result = store.get_messages(TRANS_OP_HALF_TOPIC, 0, 0, 1000)
    return [(m.body, m.properties) for m in (decode_message(r) for r in result.messages)]


# --- the raw half record ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inner",
    [
        half(1),
        half(2, born_host=HOST_V6, TAGS="T", KEYS="a b"),
        half(3, WAIT="false", TRAN_PREPARED_QUEUE_OFFSET="1"),
        MessageExtBrokerInner.build(  # the client's TRAN_MSG first, REAL_* last: cut out wherever they are
            topic=TRANS_HALF_TOPIC,
            queue_id=0,
            body=b"",
            properties={"TRAN_MSG": "true", "PGROUP": "PG", "REAL_TOPIC": "T2", "REAL_QID": "5"},
            sys_flag=MessageSysFlag.BORNHOST_V6_FLAG,
            born_host=HOST_V6,
        ),
    ],
)
def test_the_real_message_from_the_raw_record_is_the_one_from_the_decoded_message(inner: MessageExtBrokerInner) -> None:
    raw = raw_record(inner)
    record = parse_half_record(raw)
    assert committed_record(record) == committed_message(decode_message(raw))
    assert committed_record(parse_half_record(raw, native=False)) == committed_message(decode_message(raw))
    assert parse_half_record(bytearray(raw)) == parse_half_record(memoryview(raw), native=False) == record
    assert (record.queue_offset, record.commit_log_offset, record.raw) == (7, 4096, raw)


def record_with_properties(text: bytes, sys_flag: int = 0, born_host: bytes = HOST_V4) -> bytes:
    return encode_message(
        topic=TRANS_HALF_TOPIC.encode(),
        body=b"body",
        properties=text,
        queue_id=0,
        flag=3,
        queue_offset=11,
        physical_offset=8192,
        sys_flag=sys_flag,
        born_timestamp_ms=5,
        born_host=born_host,
        store_timestamp_ms=6,
        store_host=HOST_V6,
        reconsume_times=2,
    )


ODD_TEXTS = [
    b"",
    b"REAL_TOPIC\x01T\x02REAL_QID\x012",  # no trailing separator
    b"A\x011\x02\x02REAL_TOPIC\x01T\x02noseparator\x02REAL_QID\x012\x02",  # an empty item, an item without \x01
    b"TAGS\x01a\x02TAGS\x01b\x02UNIQ_KEY\x01u\x02REAL_TOPIC\x01x\x02REAL_TOPIC\x01y\x02",  # repeated: the first
    b"TRAN_PREPARED_QUEUE_OFFSET\x0112a\x02WAIT\x01false\x02",  # not a number: the queue offset
    b"TRAN_PREPARED_QUEUE_OFFSET\x011234567890123456789\x02",  # too long for an offset
    b"TRAN_PREPARED_QUEUE_OFFSET\x01\x02WAIT\x01False\x02REAL_QID\x01\x02",
    "K\x01\u00e9\u4e2d\x02TRAN_PREPARED_QUEUE_OFFSET\x0142\x02TRAN_MSG\x01true\x02".encode(),
    b"REAL_TOPICX\x01no\x02XREAL_TOPIC\x01no\x02REAL_TOPIC\x01",
    b"__transactionId__\x01t-1\x02PGROUP\x01G\x02PGROUP\x01H\x02",
]


@pytest.mark.skipif(not NATIVE, reason="the C extension is off or not built")
@pytest.mark.parametrize("text", ODD_TEXTS)
def test_the_c_reader_reads_what_the_python_reader_reads(text: bytes) -> None:
    for raw in (record_with_properties(text), record_with_properties(text, MessageSysFlag.BORNHOST_V6_FLAG, HOST_V6)):
        record = parse_half_record(raw, native=True)
        assert record == parse_half_record(raw, native=False)
        assert (record.transaction_id, record.producer_group) == (
            property_value(record.properties, "__transactionId__") or "",
            property_value(record.properties, "PGROUP") or "",
        )
        assert record.committed_properties == without_properties(record.properties, NOT_COMMITTED)


@pytest.mark.skipif(not NATIVE, reason="the C extension is off or not built")
def test_the_c_reader_refuses_what_the_python_reader_refuses() -> None:
    raw = record_with_properties(b"A\x011\x02")
    damaged = bytearray(raw)
    damaged[raw.index(b"body")] ^= 0xFF
    not_utf8 = record_with_properties(b"A\x01\xff\x02")
    cases = [raw[:-1], raw[:50], raw + b"x", bytes(damaged), not_utf8, b"", bytes(100)]
    for bad in cases:
        for native in (True, False):
            with pytest.raises(MessageDecodeError):
                parse_half_record(bad, native=native)
    assert parse_half_record(bytes(damaged), check_crc=False, native=True) == parse_half_record(
        bytes(damaged), check_crc=False, native=False
    )


def test_a_bad_half_record_is_refused() -> None:
    raw = raw_record(half(1))
    with pytest.raises(MessageDecodeError):
        parse_half_record(raw[:-1])
    with pytest.raises(MessageDecodeError):
        parse_half_record(raw[:40])
    damaged = bytearray(raw)
    damaged[raw.index(b"row-1")] ^= 0xFF
    with pytest.raises(MessageDecodeError):
        parse_half_record(bytes(damaged))
    assert parse_half_record(bytes(damaged), check_crc=False).body == bytes(damaged[raw.index(b"row-1") :][:5])
    no_real_topic = MessageExtBrokerInner.build(topic=TRANS_HALF_TOPIC, queue_id=0, body=b"x", properties={"A": "1"})
    with pytest.raises(HalfMessageError):
        committed_record(parse_half_record(raw_record(no_real_topic)))


def test_property_text_lookups() -> None:
    text = encode_properties({"A": "1", "AB": "2", "B": "", "C": "x\x01y"})
    assert [property_value(text, k) for k in ("A", "AB", "B", "C", "D", "")] == ["1", "2", "", "x\x01y", None, None]
    assert without_properties(text, ("A", "C")) == encode_properties({"AB": "2", "B": ""})
    assert without_properties(text + "A\x013\x02", ("A",)) == encode_properties({"AB": "2", "B": "", "C": "x\x01y"})


# --- op records -----------------------------------------------------------------------------------------------------


def test_an_op_record_lists_many_offsets_and_names_copies_only_when_there_are_some() -> None:
    plain = op_record_many([(3, 3), (4, 4), (9, 9)], COMMIT, {"X": "y"})
    props = dict(p.split("\x01") for p in plain.properties_string.split("\x02") if p)
    assert (plain.topic, plain.body, props) == (
        TRANS_OP_HALF_TOPIC,
        b"3,4,9",
        {MessageConst.TAGS: REMOVE_TAG, "TRAN_END_TYPE": COMMIT, "X": "y"},
    )
    assert op_record_ends(plain.body, props) == [(3, COMMIT), (4, COMMIT), (9, COMMIT)]
    copied = op_record_many([(3, 3), (12, 4)], ROLLBACK)
    props = dict(p.split("\x01") for p in copied.properties_string.split("\x02") if p)
    assert props[PREPARED_QUEUE_OFFSETS] == "3,4"
    assert op_record_ends(copied.body, props) == [(3, ROLLBACK), (4, ROLLBACK)]
    assert op_record_many([(12, 4)], COMMIT) == op_record(12, 4, COMMIT), "one half message: the single op record"
    with pytest.raises(ValueError, match="at least one"):
        op_record_many([], COMMIT)


def test_old_single_and_rocketmq_body_only_op_records_still_read() -> None:
    single = {MessageConst.TAGS: REMOVE_TAG, "TRAN_END_TYPE": ROLLBACK, "TRAN_PREPARED_QUEUE_OFFSET": "2"}
    assert op_record_ends(b"17", single) == [(2, ROLLBACK)]
    assert op_record_ends(b"5,6, 8,x", {MessageConst.TAGS: REMOVE_TAG}) == [(5, ""), (6, ""), (8, "")]
    mismatched = {PREPARED_QUEUE_OFFSETS: "1", "TRAN_END_TYPE": COMMIT}
    assert op_record_ends(b"5,6", mismatched) == [(5, COMMIT), (6, COMMIT)], "a list that does not match: the body"


# --- stores ---------------------------------------------------------------------------------------------------------


async def test_a_whole_commit_is_read_back_after_a_restart_and_by_a_promoted_slave(tmp_path: Path) -> None:
    count = 300  # two chunks (WHOLE_CHUNK 256), runs of OP_RUN
    master = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    try:
        await master.put_messages([half(i) for i in range(count)])
        await master.put_messages([half(count, uniq="U000005")])  # a retried send: rolled back as a duplicate
        (stored,) = await master.put_messages([half(count + 1, txid="other")])
        first = decode_message(master.select_one_message_by_offset(stored.wrote_offset) or b"")
        await master.put_messages([check_copy(first, first.queue_offset, 1)])  # checked once: ended through its copy
        (old,) = await master.put_messages([half(count + 3, txid="old")])
        await master.put_messages([op_record(old.queue_offset, old.queue_offset, ROLLBACK)])  # an old single op record
        service = TransactionalMessageService(master, TransactionState(master, None), transaction_timeout_ms=6_000)
        result = await service.end_whole(whole("job-0-0"))
        assert (result.ended, result.duplicates) == (count + 1, 1)
        other = await service.end_whole(whole("other", MessageSysFlag.TRANSACTION_ROLLBACK_TYPE))
        assert other.ended == 1
        ops = op_records(master)
        runs = -(-256 // OP_RUN) + -(-(count - 256) // OP_RUN)
        assert len(ops) == 1 + runs + 1 + 1, "the old one, a run's op each, the duplicate's, the copy's rollback"
        assert ops[1][0] == ",".join(str(i) for i in range(OP_RUN)).encode()
        assert (ops[-1][0], ops[-1][1]["TRAN_PREPARED_QUEUE_OFFSET"]) == (str(count + 2).encode(), str(count + 1))
        assert [p.get("TRAN_DUPLICATE") for _, p in ops].count("true") == 1
        summaries = [p for _, p in ops if "TRAN_WHOLE_COUNT" in p]
        assert [p["TRAN_WHOLE_COUNT"] for p in summaries] == ["256", str(count + 1), "1"]
        assert on_queue(master) == count
    finally:
        master.shutdown()

    restarted = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    slave = open_store(store_config(tmp_path / "s", file_size=1 << 20, cq_units=1024, broker_role=BrokerRole.SLAVE))
    try:
        offset, end = 0, restarted.commit_log.max_offset
        while offset < end:
            size = restarted.commit_log.transfer_size(offset, 64 * 1024)
            data = restarted.commit_log.get_message(offset, size)
            assert data is not None
            assert slave.append_replicated(offset, data)
            offset += size
        slave.broker_role = BrokerRole.ASYNC_MASTER  # promoted
        for store in (restarted, slave):
            state = TransactionState(store, None)
            state.recover()
            ended = state.ended
            assert [ended.get(i) for i in range(count)] == [COMMIT] * count
            assert (ended.get(count), ended.get(count + 1), ended.get(count + 3)) == (ROLLBACK, ROLLBACK, ROLLBACK)
            assert state.duplicates == {count}
            assert state.open_counts() == {}
            service = TransactionalMessageService(store, state, transaction_timeout_ms=6_000)
            again = await service.end_whole(whole("job-0-0"))
            assert (again.ended, again.already_ended) == (0, count + 1), "idempotent after a restart / failover"
            with pytest.raises(MQBrokerError, match="rolled back"):
                await service.end_whole(whole("other"))
            assert on_queue(store) == count, "nothing committed twice"
    finally:
        restarted.shutdown()
        slave.shutdown()


def on_queue(store: DefaultMessageStore) -> int:
    return sum(store.get_max_offset_in_queue("TxTopic", q) for q in range(3))


async def test_the_check_pass_passes_over_a_committed_transaction_and_forgets_it(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    try:
        await store.put_messages([half(i) for i in range(100)])
        await store.put_messages([half(100, txid="open-one")])
        state = TransactionState(store, None)
        service = TransactionalMessageService(store, state, transaction_timeout_ms=6_000)
        assert (await service.end_whole(whole("job-0-0"))).ended == 100
        checker = TransactionalMessageCheckService(
            store,
            state,
            transaction_timeout_ms=6_000,
            transaction_check_interval_ms=60_000,
            transaction_check_max=15,
            clock_ms=lambda: 1_700_000_000_000 + 1_000,  # the open one is younger than the timeout: the pass stops
        )
        result = await checker.check()
        assert (result.passed, result.checked, state.half_progress) == (100, 0, 100)
        assert state.ended == {}, "passed over: forgotten"
        assert state.open_counts() == {"TxTopic": 1}
    finally:
        store.shutdown()


def test_the_op_progress_is_the_oldest_op_record_still_needed(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path / "m"))
    try:
        state = TransactionState(store, None)
        assert state.op_progress() == 0
        for identity, op_offset in ((1, 5), (2, 5), (3, 7), (4, 9), (5, 7)):  # merged op records end many
            state.mark_ended(identity, COMMIT, op_offset)
        state.mark_ended(1, ROLLBACK, 2)  # already ended: nothing changes
        seen = [state.op_progress()]
        for identity in (1, 3, 2, 5, 4):
            state.forget(identity)
            seen.append(state.op_progress())
        assert seen == [5, 5, 5, 7, 9, 0]
        state.mark_ended(6, COMMIT, 5)  # an offset forgotten before, named again
        assert state.op_progress() == 5
    finally:
        store.shutdown()


async def test_a_whole_commit_counts_its_ends_in_the_metrics(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    try:
        await store.put_messages([half(i) for i in range(50)] + [half(50, uniq="U000007")])
        state = TransactionState(store, None)
        service = TransactionalMessageService(store, state, transaction_timeout_ms=6_000)
        service.metrics = BrokerMetrics(NodeIdentity("c", "broker", "broker-a"), max_topics=10, flush_disk_type="x")
        service.metrics.bind_half_messages(state.open_counts)
        state.ensure_loaded()
        assert state.open_counts() == {"TxTopic": 51}
        result = await service.end_whole(whole("job-0-0"))
        assert (result.ended, result.duplicates) == (51, 1)
        got = {
            (s.name, s.labels.get("topic", "")): s.value
            for family in text_string_to_metric_families(generate_latest(service.metrics.registry).decode())
            for s in family.samples
        }
        assert got[("rocketmq_commit_messages_total", "TxTopic")] == 50
        assert got[("rocketmq_rollback_messages_total", "TxTopic")] == 1
        assert got[("rocketmq_finish_message_latency_count", "TxTopic")] == 51
        assert state.open_counts() == {}
    finally:
        store.shutdown()


async def test_after_the_check_pass_and_a_restart_the_summary_answers_a_repeated_end(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    """Past the check progress the half messages are not indexed any more: the summary op record (IndexFile) says how
    the transaction ended."""
    controller, stub = await brokers.start(tmp_path, transaction_check_interval_ms=600_000)
    for i in range(300):
        await send_half(stub, f"big-{i}", __transactionId__="big")
    await send_half(stub, "gone-0", __transactionId__="gone")
    commit = broker_pb2.EndTransactionRequest(
        producer_group="PG", transaction_id="big", commit_or_rollback=TX_COMMIT, scope=TX_SCOPE
    )
    rollback = broker_pb2.EndTransactionRequest(
        producer_group="PG", transaction_id="gone", commit_or_rollback=TX_ROLLBACK, scope=TX_SCOPE
    )
    assert (await stub.EndTransaction(commit)).ended_count == 300
    assert (await stub.EndTransaction(rollback)).ended_count == 1
    assert controller.transaction_check is not None
    passed = await controller.transaction_check.check()
    assert passed.passed == 301
    await brokers.stop_all()
    restarted, stub2 = await brokers.start(tmp_path, transaction_check_interval_ms=600_000)
    again = await stub2.EndTransaction(commit)
    assert (again.code, again.ended_count, again.already_ended) == (ResponseCode.SUCCESS, 0, 300), again.remark
    late_commit = broker_pb2.EndTransactionRequest(
        producer_group="PG", transaction_id="gone", commit_or_rollback=TX_COMMIT, scope=TX_SCOPE
    )
    late = await stub2.EndTransaction(late_commit)
    assert (late.code, "rolled back" in late.remark) == (ResponseCode.ILLEGAL_OPERATION, True), late.remark
    assert restarted.transaction is not None
    assert restarted.transaction.index.members("PG", "big") == {}, "not indexed: answered by the summary"


async def test_query_transactions_reads_the_merged_op_records(tmp_path: Path) -> None:
    store = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    try:
        await store.put_messages([half(i) for i in range(40)] + [half(40, txid="other"), half(41, txid="gone")])
        state = TransactionState(store, None)
        service = TransactionalMessageService(store, state, transaction_timeout_ms=6_000)
        assert (await service.end_whole(whole("job-0-0"))).ended == 40
        assert (await service.end_whole(whole("gone", TX_ROLLBACK))).ended == 1
        for fresh in (False, True):  # as ended, then recovered from the op records
            if fresh:
                state = TransactionState(store, None)
            query = OpenTransactions(store, state)
            states = [(await query.query("TxTopic", uniq_key=f"U{i:06d}")).state for i in (0, 33, 40, 41)]
            assert states == ["COMMITTED", "COMMITTED", "OPEN", "ROLLED_BACK"]
            assert (await query.query("TxTopic")).total_open == 1
    finally:
        store.shutdown()


async def test_immunity_copies_are_stored_in_runs_and_a_whole_commit_ends_them(tmp_path: Path) -> None:
    """Half messages with a CHECK_IMMUNITY_TIME_IN_SECONDS longer than the timeout (the Spark sink's) are copied
    unchecked by every pass: one put per run, not one per half message; the commit then names the copies."""
    store = open_store(store_config(tmp_path / "m", file_size=1 << 20, cq_units=1024))
    try:
        now_ms = 1_700_000_000_000 + 60_000
        await store.put_messages([half(i, CHECK_IMMUNITY_TIME_IN_SECONDS="3600") for i in range(100)])
        state = TransactionState(store, None)
        checker = TransactionalMessageCheckService(
            store,
            state,
            transaction_timeout_ms=6_000,
            transaction_check_interval_ms=60_000,
            transaction_check_max=15,
            clock_ms=lambda: now_ms,
        )
        told: list[object] = []
        checker.listeners.append(told.append)
        for raw in store.get_messages(TRANS_HALF_TOPIC, 0, 0, 3).messages:  # built from the fields: check_copy's
            waiting: list[Waiting] = []
            assert checker._immunity_copy(parse_half_record(raw), waiting)
            original = decode_message(raw)
            assert waiting[0][0] == check_copy(original, original.queue_offset, 0)
        puts: list[int] = []
        put_messages = store.put_messages

        async def counting(batch: Sequence[MessageExtBrokerInner], *, whole: bool = False) -> list[PutMessageResult]:
            puts.append(len(batch))
            return await put_messages(batch, whole=whole)

        store.put_messages = counting  # type: ignore[method-assign]
        result = await checker.check()
        assert (result.immunity_copies, result.checked, told, state.half_progress) == (100, 0, [], 100)
        assert puts == [64, 36], "a put per batch the pass reads"
        assert state.latest_copy == {i: 100 + i for i in range(100)}
        copies = [decode_message(r) for r in store.get_messages(TRANS_HALF_TOPIC, 0, 100, 200).messages]
        assert [c.properties["TRAN_PREPARED_QUEUE_OFFSET"] for c in copies] == [str(i) for i in range(100)]
        assert {c.properties["TRANSACTION_CHECK_TIMES"] for c in copies} == {"0"}
        service = TransactionalMessageService(store, state, transaction_timeout_ms=6_000)
        assert (await service.end_whole(whole("job-0-0"))).ended == 100
        first_op = op_records(store)[0]
        assert first_op[0] == ",".join(str(100 + i) for i in range(OP_RUN)).encode(), "the copies' offsets"
        assert first_op[1][PREPARED_QUEUE_OFFSETS] == ",".join(str(i) for i in range(OP_RUN)), "their identities"
        recovered = TransactionState(store, None)
        recovered.recover()
        assert all(recovered.ended.get(i) == COMMIT for i in range(100))
    finally:
        store.shutdown()
