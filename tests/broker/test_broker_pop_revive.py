"""POP revive over the broker's gRPC API, in process: a message whose invisible time ends un-acked comes back from
%RETRY%<group> with delivery attempt 2 under its original topic; past the group's retryMaxTimes it goes to
%DLQ%<group>; a change of invisible time to 0 redelivers at once; a clean restart keeps what was in flight; the
revive offsets move to the end once everything is resolved."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from consumer_testkit import wait_until
from mq.broker.v1 import broker_pb2
from mq_broker.consumer.pop.revive_log import REVIVE_GROUP
from mq_common.codec import iter_messages
from mq_common.constants import MessageConst
from mq_common.protocol import ReceiptHandle, SubscriptionGroupConfig
from mq_common.protocol.convert import subscription_group_config_to_proto
from mq_common.response_code import ResponseCode
from pop_testkit import GROUP, ack, change_invisible, create_topic, pop, pop_all, pop_broker, popped, send

TOPIC = "ReviveTopic"


async def test_unacked_message_is_redelivered_from_the_retry_topic(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store") as (controller, stub):
        await create_topic(stub, TOPIC)
        await send(stub, TOPIC, [b"r0", b"r1"])
        first = popped(await pop(stub, TOPIC, invisible_time_ms=1_000))
        assert [m.body for m, _ in first] == [b"r0", b"r1"]
        assert (await ack(stub, TOPIC, [first[1][1]])).code == ResponseCode.SUCCESS
        again = await pop_all(stub, TOPIC, 1, invisible_time_ms=60_000)
        assert [m.body for m, _ in again] == [b"r0"]
        message, handle_text = again[0]
        assert message.topic == TOPIC  # the retry record is handed out under its original topic
        assert message.reconsume_times == 1  # delivery attempt 2
        assert message.properties[MessageConst.RETRY_TOPIC] == TOPIC
        assert message.uniq_key == "r0"
        handle = ReceiptHandle.decode(handle_text)
        assert handle.topic_type == "1"
        assert handle.real_topic(TOPIC, GROUP) == f"%RETRY%{GROUP}"
        assert controller.pop is not None
        assert controller.pop.inflight_count(GROUP, f"%RETRY%{GROUP}", handle.queue_id) == 1
        assert (await ack(stub, TOPIC, [handle_text])).code == ResponseCode.SUCCESS
        assert controller.pop.inflight_by_group_topic() == {}
        replay = await ack(stub, TOPIC, [handle_text])
        assert replay.code == ResponseCode.NO_MESSAGE
        assert "not in flight" in replay.remark
        assert (await pop(stub, TOPIC, poll_time_ms=1_500)).code == ResponseCode.POLLING_TIMEOUT


async def test_past_retry_max_times_the_message_goes_to_the_dlq(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store") as (_controller, stub):
        await create_topic(stub, TOPIC)
        config = subscription_group_config_to_proto(SubscriptionGroupConfig(GROUP, retry_max_times=1))
        assert (await stub.UpdateSubscriptionGroup(broker_pb2.UpdateSubscriptionGroupRequest(config=config))).code == 0
        await send(stub, TOPIC, [b"d0"])
        assert len((await pop(stub, TOPIC, invisible_time_ms=1_000)).messages) == 1
        retried = await pop_all(stub, TOPIC, 1, invisible_time_ms=1_000)
        assert [(m.body, m.reconsume_times) for m, _ in retried] == [(b"d0", 1)]
        dlq = f"%DLQ%{GROUP}"

        async def dead_letters() -> list[bytes]:
            reply = await stub.PullMessage(
                broker_pb2.PullMessageRequest(consumer_group="reader", topic=dlq, queue_id=0, max_msg_nums=32)
            )
            return [m.body for m in iter_messages(reply.message_bytes)] if reply.code == ResponseCode.SUCCESS else []

        deadline = time.monotonic() + 30
        found: list[bytes] = []
        while not found and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            found = await dead_letters()
        assert found == [b"d0"]
        assert (await pop(stub, TOPIC, poll_time_ms=1_500)).code == ResponseCode.POLLING_TIMEOUT


async def test_change_invisible_time_to_zero_redelivers_at_once(tmp_path: Path) -> None:
    async with pop_broker(tmp_path / "store") as (_controller, stub):
        await create_topic(stub, TOPIC)
        await send(stub, TOPIC, [b"n0"])
        ((_, handle),) = popped(await pop(stub, TOPIC, invisible_time_ms=600_000))
        assert (await change_invisible(stub, TOPIC, handle, 0)).code == ResponseCode.SUCCESS
        again = await pop_all(stub, TOPIC, 1)
        assert [(m.body, m.reconsume_times) for m, _ in again] == [(b"n0", 1)]


async def test_clean_restart_keeps_messages_in_flight(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with pop_broker(store) as (_controller, stub):
        await create_topic(stub, TOPIC)
        await send(stub, TOPIC, [b"k0", b"k1", b"k2"])
        handles = [h for _, h in popped(await pop(stub, TOPIC, invisible_time_ms=2_000))]
        changed = await change_invisible(stub, TOPIC, handles[2], 60_000)
        assert changed.code == ResponseCode.SUCCESS
        assert (await ack(stub, TOPIC, [handles[1]])).code == ResponseCode.SUCCESS
    async with pop_broker(store) as (controller, stub):
        assert controller.pop is not None
        assert controller.pop.inflight_count(GROUP, TOPIC, 0) == 2
        # the handles of before the restart still ack (the checkpoints are the same)
        assert (await ack(stub, TOPIC, [changed.receipt_handle])).code == ResponseCode.SUCCESS
        again = await pop_all(stub, TOPIC, 1)
        assert [(m.body, m.reconsume_times) for m, _ in again] == [(b"k0", 1)]
        assert (await ack(stub, TOPIC, [again[0][1]])).code == ResponseCode.SUCCESS
        assert controller.pop.inflight_by_group_topic() == {}
        # everything resolved: every revive queue's offset reaches its end
        assert controller.store is not None
        assert controller.consumer_offsets is not None
        revive_topic = controller.pop.config.revive_topic

        def revive_offsets_at_end() -> bool:
            assert controller.store is not None
            assert controller.consumer_offsets is not None
            store, offsets = controller.store, controller.consumer_offsets
            return all(  # an unused revive queue has no offset: its scan starts at its (empty) beginning
                max(offsets.query_offset(REVIVE_GROUP, revive_topic, q), store.get_min_offset_in_queue(revive_topic, q))
                == store.get_max_offset_in_queue(revive_topic, q)
                for q in range(8)
            )

        await wait_until(revive_offsets_at_end)
        used = [q for q in range(8) if controller.store.get_max_offset_in_queue(revive_topic, q) > 0]
        assert used
        assert all(controller.consumer_offsets.query_offset(REVIVE_GROUP, revive_topic, q) > 0 for q in used)
