"""POP acks over the broker's gRPC API, in process: acks carried by the next PopMessage (ack_receipt_handles,
answered per handle in ack_codes / ack_remarks) and ack records stored without waiting for the group commit
(WAIT=false) while checkpoints wait."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mq_broker.consumer.pop.ack_processor import MAX_ACK_HANDLES
from mq_broker.consumer.pop.revive_log import ACK_TAG, BATCH_ACK_TAG, CK_TAG
from mq_broker.controller import BrokerController
from mq_common.codec import decode_message
from mq_common.constants import MessageConst
from mq_common.response_code import ResponseCode
from pop_testkit import GROUP, ack, create_topic, pop, pop_broker, popped, send

if TYPE_CHECKING:
    from pop_testkit import Stub

TOPIC = "PopAckTopic"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    async with pop_broker(tmp_path / "store") as started:
        await create_topic(started[1], TOPIC, queues=1)
        yield started


def _inflight(controller: BrokerController) -> int:
    assert controller.pop is not None
    return controller.pop.inflight_count(GROUP, TOPIC, 0)


async def test_pop_acks_the_handles_it_carries_then_pops(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [b"m0", b"m1", b"m2", b"m3"])
    first = [h for _, h in popped(await pop(stub, TOPIC, max_msg_nums=2))]
    reply = await pop(stub, TOPIC, max_msg_nums=1, acks=[first[0], "garbage", first[1], first[0]])
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert [m.body for m, _ in popped(reply)] == [b"m2"]
    assert list(reply.ack_codes) == [
        ResponseCode.SUCCESS, ResponseCode.INVALID_PARAMETER, ResponseCode.SUCCESS, ResponseCode.NO_MESSAGE,
    ]  # fmt: skip
    assert reply.ack_remarks[0] == ""
    assert "acked already" in reply.ack_remarks[3]
    assert _inflight(controller) == 1  # m2 only
    replay = await ack(stub, TOPIC, first)
    assert list(replay.codes) == [ResponseCode.NO_MESSAGE] * 2
    # a pop that finds nothing still acks, and answers POLLING_TIMEOUT with the codes
    last = [h for _, h in popped(reply)] + [h for _, h in popped(await pop(stub, TOPIC))]
    empty = await pop(stub, TOPIC, acks=last)
    assert (empty.code, len(empty.messages), list(empty.ack_codes)) == (ResponseCode.POLLING_TIMEOUT, 0, [0, 0])
    assert _inflight(controller) == 0


async def test_a_pop_without_acks_answers_no_ack_codes(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    await send(stub, TOPIC, [b"m0"])
    reply = await pop(stub, TOPIC)
    assert (reply.code, len(reply.messages), list(reply.ack_codes)) == (ResponseCode.SUCCESS, 1, [])


async def test_too_many_handles_refuse_the_call_before_anything_is_popped(
    broker: tuple[BrokerController, Stub],
) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [b"m0"])
    handle = popped(await pop(stub, TOPIC, max_msg_nums=1))[0][1]
    await send(stub, TOPIC, [b"m1"])
    refused = await pop(stub, TOPIC, acks=[handle] * (MAX_ACK_HANDLES + 1))
    assert (refused.code, len(refused.messages)) == (ResponseCode.INVALID_PARAMETER, 0), refused.remark
    assert _inflight(controller) == 1  # m0 still in flight, m1 not popped
    assert [m.body for m, _ in popped(await pop(stub, TOPIC, acks=[handle]))] == [b"m1"]


async def test_ack_records_do_not_wait_for_the_flush_checkpoints_do(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    await send(stub, TOPIC, [b"m0", b"m1", b"m2"])
    handles = [h for _, h in popped(await pop(stub, TOPIC, max_msg_nums=2))]
    await ack(stub, TOPIC, handles[:1])
    await pop(stub, TOPIC, acks=handles[1:])
    store, pop_service = controller.store, controller.pop
    assert store is not None
    assert pop_service is not None
    revive_topic = pop_service.config.revive_topic
    waits: dict[str, list[str]] = {}
    for queue_id in range(pop_service.config.revive_queue_num):
        result = store.get_messages(revive_topic, queue_id, 0, 32, None)
        for record in result.messages:
            properties = decode_message(record).properties
            tag = properties[MessageConst.TAGS]
            waits.setdefault(tag, []).append(properties.get(MessageConst.WAIT_STORE_MSG_OK, "true"))
    assert waits[CK_TAG] == ["true", "true"]  # two pops that found messages
    assert sorted(waits[ACK_TAG] + waits.get(BATCH_ACK_TAG, [])) == ["false", "false"]
