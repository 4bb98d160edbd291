"""A MessageBatch of half messages of one transaction (SEND_BATCH_MESSAGE with the PREPARED sysflag; this project's
extension, mq_broker.transaction.half_batch) against an in-process broker: stored in one put on the half queue as
the half messages single sends would store (REAL_TOPIC / REAL_QID, TRAN_MSG, PGROUP, __transactionId__, each
message's own properties, transaction type reset), invisible on the real topic, counted open, and committed whole by
one EndTransaction: every message once on its real queue with its keys, tag and properties. The C batch put and the
Python one (native_append off) both."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_grpc_testkit import RunningBrokers, send_request, stream_send, stream_send_message_batch
from broker_transaction_testkit import COMMIT, TOPIC, pulled, send_half, stored
from mq.broker.v1 import broker_pb2
from mq.common.v1 import common_pb2
from mq_broker.controller import BrokerController
from mq_broker.store import native_append
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_properties
from mq_common.constants import TRANS_HALF_TOPIC, MessageSysFlag
from mq_common.response_code import ResponseCode

PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
TXID = "job-p0-a0-t1"
# what mq_client.producer.batch_transaction puts in the batch's properties
TRANSACTION_PROPS = {"TRAN_MSG": "true", "PGROUP": "SPARK_job", "__transactionId__": TXID}


def half_batch(count: int, queue_id: int = 1, sys_flag: int = PREPARED) -> broker_pb2.SendMessageBatchRequest:
    body = encode_batch(
        (
            f"row-{i}".encode(),
            encode_properties(
                {
                    "CHECK_IMMUNITY_TIME_IN_SECONDS": "600",
                    "TAGS": "TagH",
                    "KEYS": f"k{i} shared",
                    "WAIT": "true",
                    "UNIQ_KEY": f"U{i:05d}",
                }
            ),
            i,
        )
        for i in range(count)
    )
    return broker_pb2.SendMessageBatchRequest(
        producer_group="gateway_group",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp_ms=1_700_000_000_000,
        properties=encode_properties(TRANSACTION_PROPS),
        body=body,
    )


def open_counts(controller: BrokerController) -> dict[str, int]:
    assert controller.transaction_state is not None
    return controller.transaction_state.open_counts()


@pytest.mark.parametrize("native", [True, False], ids=["c-put", "python-put"])
async def test_a_half_batch_is_stored_as_half_messages_and_committed_whole(
    brokers: RunningBrokers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    if not native:
        monkeypatch.setattr(native_append, "AVAILABLE", False)
    elif not native_append.AVAILABLE:
        pytest.skip("the broker's C extension is not built")
    controller, stub = await brokers.start(tmp_path)
    await send_half(stub, "before")  # one single half message first: the batch's half-queue offsets follow it
    answer = await stream_send_message_batch(stub, half_batch(6))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    # the real queue, the half queue's offsets (what a single half send answers), one offset msg id per message
    assert (answer.queue_id, answer.queue_offset, answer.message_count) == (1, 1, 6)
    assert len(answer.msg_id.split(",")) == 6
    halves = (await stored(controller, TRANS_HALF_TOPIC, 7))[1:]
    assert [h.body for h in halves] == [f"row-{i}".encode() for i in range(6)]
    for i, h in enumerate(halves):
        assert h.properties["REAL_TOPIC"] == TOPIC
        assert h.properties["REAL_QID"] == "1"
        assert (h.properties["TRAN_MSG"], h.properties["PGROUP"], h.properties["__transactionId__"]) == (
            "true",
            "SPARK_job",
            TXID,
        )
        assert (h.properties["UNIQ_KEY"], h.tags, h.keys) == (f"U{i:05d}", "TagH", [f"k{i}", "shared"])
        assert h.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "600"
        assert h.sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE == MessageSysFlag.TRANSACTION_NOT_TYPE
        assert (h.queue_offset, h.flag) == (1 + i, i)
    assert await pulled(stub) == [], "nothing on the real topic before the commit"
    assert open_counts(controller) == {TOPIC: 7}
    ended = await stub.EndTransaction(
        broker_pb2.EndTransactionRequest(
            producer_group="SPARK_job",
            transaction_id=TXID,
            commit_or_rollback=COMMIT,
            topic=TOPIC,
            scope=broker_pb2.END_TRANSACTION_SCOPE_TRANSACTION,
        )
    )
    assert (ended.code, ended.ended_count) == (ResponseCode.SUCCESS, 6), ended.remark
    real = await pulled(stub)
    assert [m.body for m in real] == [f"row-{i}".encode() for i in range(6)], "each message once, in order"
    for i, m in enumerate(real):
        assert (m.uniq_key, m.tags, m.keys, m.flag) == (f"U{i:05d}", "TagH", [f"k{i}", "shared"], i)
        assert m.properties["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "600"
        assert m.properties["__transactionId__"] == TXID
        assert "TRAN_MSG" not in m.properties
        assert "REAL_TOPIC" not in m.properties
    assert open_counts(controller) == {TOPIC: 1}, "only the single half message is left open"


async def test_a_batched_half_message_is_stored_as_its_single_send_would_be(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    controller, stub = await brokers.start(tmp_path)
    own = {"CHECK_IMMUNITY_TIME_IN_SECONDS": "600", "TAGS": "TagH", "KEYS": "k0 shared", "WAIT": "true"}
    single = send_request(TOPIC, b"row-0", 1, **TRANSACTION_PROPS, **own, UNIQ_KEY="U00000")
    single.sys_flag = PREPARED
    single.producer_group = "gateway_group"
    assert (await stream_send(stub, single)).code == ResponseCode.SUCCESS
    await stream_send_message_batch(stub, half_batch(1))
    alone, batched = await stored(controller, TRANS_HALF_TOPIC, 2)
    assert batched.properties == alone.properties
    assert (batched.topic, batched.queue_id, batched.sys_flag, batched.flag, batched.body) == (
        alone.topic,
        alone.queue_id,
        alone.sys_flag,
        alone.flag,
        alone.body,
    )


async def test_a_half_batch_to_a_topic_of_another_type_is_refused(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await brokers.start(tmp_path)
    config = common_pb2.TopicConfig(
        topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4, perm=6, attributes={"+message.type": "NORMAL"}
    )
    created = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config))
    assert created.code == ResponseCode.SUCCESS, created.remark
    answer = await stream_send_message_batch(stub, half_batch(3))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "TRANSACTION" in answer.remark
