"""Long polling through a real in-process gRPC broker: a pull that finds nothing is held and answered as soon as a
message is stored (every store put path wakes it), the broker's cap and the timeout answer PULL_NOT_FOUND, the
bound refuses with POLLING_FULL, a cancelled call frees its slot, shutdown answers held pulls, the client's
deadline covers the hold, and a pull's commit offset reaches the offset manager (on a master only)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import RunningBrokers, send_request, stream_send, stream_send_message_batch
from consumer_testkit import wait_until
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq_broker.controller import BrokerController
from mq_broker.store import native_append
from mq_client.broker_client import BrokerClient
from mq_common.batch_codec import encode_batch
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties, iter_messages
from mq_common.errors import MQBrokerError
from mq_common.protocol import PullStatus
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub

HOLD_MS = 60_000  # never reached: every wait in these tests ends on an event or on the 30 s guard below
GUARD_S = 30.0
GROUP = "LongPollGroup"
APPEND_PATHS = ["c-append", "python-append"] if native_append.AVAILABLE else ["python-append"]


def pull_request(
    topic: str, queue_offset: int = 0, suspend_ms: int = HOLD_MS, **kw: object
) -> broker_pb2.PullMessageRequest:
    fields: dict[str, object] = {
        "consumer_group": GROUP,
        "topic": topic,
        "queue_id": 0,
        "queue_offset": queue_offset,
        "max_msg_nums": 32,
        "suspend_timeout_ms": suspend_ms,
        **kw,
    }
    return broker_pb2.PullMessageRequest(**fields)  # type: ignore[arg-type]


async def create_topic(stub: Stub, topic: str) -> None:
    """An empty topic of 4 queues: a pull at offset 0 finds nothing (PULL_NOT_FOUND)."""
    config = common_pb2.TopicConfig(topic_name=topic, read_queue_nums=4, write_queue_nums=4, perm=6)
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def parked(controller: BrokerController) -> int:
    assert controller.long_polling is not None
    return controller.long_polling.parked_count


async def start(brokers: RunningBrokers, root: Path, **overrides: object) -> tuple[BrokerController, Stub]:
    values: dict[str, object] = {"broker_suspend_max_time_ms": HOLD_MS, **overrides}
    return await brokers.start(root, **values)


@pytest.mark.parametrize("append_path", APPEND_PATHS)
@pytest.mark.parametrize("send_kind", ["SendBatch", "SendMessageBatch"])
async def test_held_pull_is_answered_by_the_next_message(
    brokers: RunningBrokers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, append_path: str, send_kind: str
) -> None:
    if append_path == "python-append":
        monkeypatch.setattr(native_append, "AVAILABLE", False)
    controller, stub = await start(brokers, tmp_path / "store")
    first = await stream_send(stub, send_request("Held", b"already-there", 0))
    assert first.code == ResponseCode.SUCCESS, first.remark
    call = stub.PullMessage(pull_request("Held", queue_offset=1), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    assert not call.done(), "held, not answered"

    if send_kind == "SendBatch":
        sent = await stream_send(stub, send_request("Held", b"arrived", 0))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
    else:
        body = encode_batch([(b"arrived", encode_properties({"TAGS": "A"}), 0), (b"second", "", 0)])
        batch = await stream_send_message_batch(
            stub, broker_pb2.SendMessageBatchRequest(topic="Held", default_topic="TBW102", queue_id=0, body=body)
        )
        assert batch.code == ResponseCode.SUCCESS, batch.remark

    answer = await call  # the hold is 60 s, the guard 30 s: only the arrival can have answered it
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert next(iter_messages(answer.message_bytes)).body == b"arrived"
    assert answer.next_begin_offset >= 2
    assert parked(controller) == 0


async def test_arrival_on_another_queue_or_topic_does_not_answer(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store")
    assert (await stream_send(stub, send_request("Quiet", b"x", 1))).code == ResponseCode.SUCCESS
    call = stub.PullMessage(pull_request("Quiet", queue_id=0), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    assert (await stream_send(stub, send_request("Quiet", b"other queue", 1))).code == ResponseCode.SUCCESS
    assert (await stream_send(stub, send_request("Noise", b"other topic", 0))).code == ResponseCode.SUCCESS
    assert not call.done()
    assert parked(controller) == 1
    assert (await stream_send(stub, send_request("Quiet", b"mine", 0))).code == ResponseCode.SUCCESS
    answer = await call
    assert [m.body for m in iter_messages(answer.message_bytes)] == [b"mine"]


async def test_hold_is_capped_by_the_broker_then_answers_not_found(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store", broker_suspend_max_time_ms=200)
    assert (await stream_send(stub, send_request("Capped", b"x", 0))).code == ResponseCode.SUCCESS
    answer = await stub.PullMessage(pull_request("Capped", queue_offset=1, suspend_ms=HOLD_MS), timeout=GUARD_S)
    assert (answer.code, answer.status) == (ResponseCode.PULL_NOT_FOUND, broker_pb2.PULL_STATUS_NO_NEW_MSG)
    assert answer.next_begin_offset == 1
    assert parked(controller) == 0


async def test_only_not_found_is_held(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store")
    assert (await stream_send(stub, send_request("Busy", b"x", 0))).code == ResponseCode.SUCCESS
    found = await stub.PullMessage(pull_request("Busy"), timeout=GUARD_S)
    assert found.code == ResponseCode.SUCCESS
    moved = await stub.PullMessage(pull_request("Busy", queue_offset=7), timeout=GUARD_S)
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED
    no_suspend = await stub.PullMessage(pull_request("Busy", queue_offset=1, suspend_ms=0), timeout=GUARD_S)
    assert no_suspend.code == ResponseCode.PULL_NOT_FOUND
    assert parked(controller) == 0


async def test_bound_refuses_with_polling_full(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store", max_pull_polling_size=1)
    await create_topic(stub, "Bounded")
    held = stub.PullMessage(pull_request("Bounded"), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    refused = await stub.PullMessage(pull_request("Bounded"), timeout=GUARD_S)
    assert refused.code == ResponseCode.POLLING_FULL
    assert "at most 1" in refused.remark
    assert (await stream_send(stub, send_request("Bounded", b"x", 0))).code == ResponseCode.SUCCESS
    assert (await held).code == ResponseCode.SUCCESS


async def test_cancelled_call_frees_its_slot(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store", max_pull_polling_size=1)
    await create_topic(stub, "Gone")
    call = stub.PullMessage(pull_request("Gone"), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    call.cancel()
    await wait_until(lambda: parked(controller) == 0)
    again = stub.PullMessage(pull_request("Gone"), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    assert (await stream_send(stub, send_request("Gone", b"x", 0))).code == ResponseCode.SUCCESS
    assert (await again).code == ResponseCode.SUCCESS


async def test_shutdown_answers_held_pulls(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store")
    await create_topic(stub, "Closing")
    call = stub.PullMessage(pull_request("Closing"), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    stopping = asyncio.create_task(controller.stop())
    answer = await call
    assert (answer.code, answer.status) == (ResponseCode.PULL_NOT_FOUND, broker_pb2.PULL_STATUS_NO_NEW_MSG)
    await stopping


async def test_client_deadline_covers_the_hold(brokers: RunningBrokers, tmp_path: Path) -> None:
    """The broker holds for 4 s; the client's own timeout is 2 s: its deadline must be suspend + timeout."""
    controller, stub = await start(brokers, tmp_path / "store", broker_suspend_max_time_ms=4_000)
    await create_topic(stub, "Patient")
    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        result = await client.pull_message(
            controller.broker_addr,
            "Patient",
            0,
            0,
            32,
            timeout_ms=2_000,
            consumer_group=GROUP,
            suspend_timeout_ms=4_000,
        )
        assert result.status is PullStatus.NO_NEW_MSG
    finally:
        await pool.close()


async def test_pull_commits_its_offset_on_a_master_only(brokers: RunningBrokers, tmp_path: Path) -> None:
    master, stub = await start(brokers, tmp_path / "master")
    assert (await stream_send(stub, send_request("Committed", b"x", 0))).code == ResponseCode.SUCCESS
    answer = await stub.PullMessage(pull_request("Committed", suspend_ms=0, commit_offset=1), timeout=GUARD_S)
    assert answer.code == ResponseCode.SUCCESS
    assert master.consumer_offsets is not None
    assert master.consumer_offsets.query_offset(GROUP, "Committed", 0) == 1
    caught_up = await stub.PullMessage(pull_request("Committed", 1, suspend_ms=0, commit_offset=0), timeout=GUARD_S)
    assert caught_up.code == ResponseCode.PULL_NOT_FOUND
    assert master.consumer_offsets.query_offset(GROUP, "Committed", 0) == 0, "committed whatever the outcome"
    unset = await stub.PullMessage(pull_request("Committed", suspend_ms=0), timeout=GUARD_S)
    assert unset.code == ResponseCode.SUCCESS
    assert master.consumer_offsets.query_offset(GROUP, "Committed", 0) == 0, "no commit_offset: nothing committed"
    negative = await stub.PullMessage(pull_request("Committed", suspend_ms=0, commit_offset=-1), timeout=GUARD_S)
    assert negative.code == ResponseCode.INVALID_PARAMETER

    slave, slave_stub = await start(brokers, tmp_path / "slave", broker_id=1)
    assert (await stream_send(slave_stub, send_request("Committed", b"x", 0))).code == ResponseCode.SUCCESS
    on_slave = await slave_stub.PullMessage(pull_request("Committed", suspend_ms=0, commit_offset=1), timeout=GUARD_S)
    assert on_slave.code == ResponseCode.SUCCESS
    assert slave.consumer_offsets is not None
    assert slave.consumer_offsets.query_offset(GROUP, "Committed", 0) == -1


async def test_client_pull_commit_offset_and_polling_full(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "store", max_pull_polling_size=1)
    await create_topic(stub, "ViaClient")
    held = stub.PullMessage(pull_request("ViaClient"), timeout=GUARD_S)
    await wait_until(lambda: parked(controller) == 1)
    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        with pytest.raises(MQBrokerError) as refused:
            await client.pull_message(
                controller.broker_addr, "ViaClient", 0, 0, 32, consumer_group=GROUP, suspend_timeout_ms=HOLD_MS
            )
        assert refused.value.code == ResponseCode.POLLING_FULL
        assert (await stream_send(stub, send_request("ViaClient", b"x", 0))).code == ResponseCode.SUCCESS
        assert (await held).code == ResponseCode.SUCCESS
        result = await client.pull_message(
            controller.broker_addr, "ViaClient", 0, 0, 32, consumer_group=GROUP, commit_offset=1
        )
        assert [m.body for m in result.messages] == [b"x"]
        assert controller.consumer_offsets is not None
        assert controller.consumer_offsets.query_offset(GROUP, "ViaClient", 0) == 1
    finally:
        await pool.close()
