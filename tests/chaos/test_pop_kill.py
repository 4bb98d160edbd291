"""kill -9 proof for POP's in-flight state: a real ``mqbroker`` hands out messages by PopMessage, some are acked,
the group's offset is persisted past all of them, and the broker is SIGKILLed. After a restart on the same store,
every popped-but-unacked message comes back (rebuilt from the revive log, revived through %RETRY%<group> with
delivery attempt 2) and no acked one does: nothing in flight is lost, nothing acked is redelivered.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from chaos_testkit import BrokerProcesses, broker_env
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq_common.codec import MessageExt, decode_message, encode_properties
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.response_code import ResponseCode

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(600)]

TOPIC: Final = "PopKillTopic"
GROUP: Final = "pop_kill_group"
MESSAGES: Final = 40
ACKED_EVERY: Final = 3  # every third message is acked before the kill
INVISIBLE_TIME_MS: Final = 10_000
"""Long enough for the pops, the acks and the offset persist before the kill; revive comes after the restart."""
RPC_TIMEOUT_S: Final = 30.0
DEADLINE_S: Final = 90.0


async def setup_topic(stub: Any) -> None:
    config = common_pb2.TopicConfig(topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2, perm=6)
    reply = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config), timeout=RPC_TIMEOUT_S)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    call = stub.SendStream()
    requests = [
        broker_pb2.SendMessageRequest(
            producer_group="PG",
            topic=TOPIC,
            queue_id=i % 2,
            born_timestamp_ms=1,
            properties=encode_properties({"UNIQ_KEY": f"k{i}"}),
            body=f"body-{i}".encode(),
        )
        for i in range(MESSAGES)
    ]
    await call.write(broker_pb2.SendStreamRequest(frame_id=1, batch=broker_pb2.SendBatchRequest(requests=requests)))
    await call.done_writing()
    async for answer in call:
        assert [r.code for r in answer.batch.responses] == [ResponseCode.SUCCESS] * MESSAGES


async def pop_some(stub: Any, invisible_time_ms: int, poll_time_ms: int) -> list[tuple[MessageExt, str]]:
    reply = await stub.PopMessage(
        broker_pb2.PopMessageRequest(
            consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32, invisible_time_ms=invisible_time_ms,
            poll_time_ms=poll_time_ms, init_mode=1,
        ),
        timeout=RPC_TIMEOUT_S + poll_time_ms / 1000,
    )  # fmt: skip
    assert reply.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), (reply.code, reply.remark)
    return [(decode_message(m.message), m.receipt_handle) for m in reply.messages]


def persisted_offsets(store: Path) -> int:
    """Sum of the group's persisted offsets of TOPIC (consumerOffset.json), 0 before the first write."""
    try:
        table = json.loads((store / "config" / "consumerOffset.json").read_text())["offsetTable"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0
    return sum(table.get(f"{TOPIC}@{GROUP}", {}).values())


async def test_sigkill_with_popped_unacked_messages_redelivers_them(brokers: BrokerProcesses, tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = broker_env(
        store, 1024 * 1024, "SYNC_FLUSH",
        MQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS="100", MQ_BROKER_REVIVE_INTERVAL_MS="200",
    )  # fmt: skip
    broker = brokers.start(env)
    async with grpc.aio.insecure_channel(broker.addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        await setup_topic(stub)
        popped: list[tuple[MessageExt, str]] = []
        while len(popped) < MESSAGES:
            popped += await pop_some(stub, INVISIBLE_TIME_MS, 1_000)
        acked = {m.uniq_key for m, _ in popped[::ACKED_EVERY]}
        reply = await stub.AckMessage(
            broker_pb2.AckMessageRequest(
                consumer_group=GROUP, topic=TOPIC, receipt_handles=[h for _, h in popped[::ACKED_EVERY]]
            ),
            timeout=RPC_TIMEOUT_S,
        )
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        deadline = time.monotonic() + DEADLINE_S
        while persisted_offsets(store) < MESSAGES:  # the normal topic's offsets are past every message
            assert time.monotonic() < deadline, "consumer offsets not persisted"
            await asyncio.sleep(0.05)
    broker.kill()
    unacked = {m.uniq_key for m, _ in popped} - acked
    assert len(unacked) == MESSAGES - len(acked)

    broker = brokers.start(env)
    recovered = [e for e in broker.events() if e.get("event") == "pop_inflight_recovered"]
    assert [e.get("messages") for e in recovered] == [len(unacked)]
    async with grpc.aio.insecure_channel(broker.addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        again: dict[str | None, MessageExt] = {}
        deadline = time.monotonic() + DEADLINE_S
        while set(again) != unacked and time.monotonic() < deadline:
            for message, _handle in await pop_some(stub, 600_000, 1_000):
                assert message.uniq_key not in again, f"{message.uniq_key} redelivered twice"
                again[message.uniq_key] = message
        assert set(again) == unacked
        assert all(m.reconsume_times == 1 and m.topic == TOPIC for m in again.values())
        # nothing acked comes back (a few revive rounds later)
        assert await pop_some(stub, 600_000, 3_000) == []
