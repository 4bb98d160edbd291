"""RecallMessage and QueryTimers through an in-process broker (RecallMessageProcessor): a recalled timer never
fires; a recall of a garbage handle, another topic's or broker's handle, an unknown, an already recalled or an
already delivered message is refused with ILLEGAL_OPERATION and a remark saying why, and changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_grpc_testkit import RunningBrokers
from broker_timer_testkit import TOPIC, now_ms, pulled, send, start, wait_for
from mq.broker.v1 import broker_pb2
from mq_common.recall_handle import build_recall_handle
from mq_common.response_code import ResponseCode


async def recall(stub: object, handle: str, topic: str = TOPIC) -> broker_pb2.RecallMessageResponse:
    request = broker_pb2.RecallMessageRequest(producer_group="PG", topic=topic, recall_handle=handle)
    return await stub.RecallMessage(request)  # type: ignore[attr-defined, no-any-return]


async def state(stub: object, uniq: str) -> broker_pb2.QueryTimersResponse:
    request = broker_pb2.QueryTimersRequest(topic=TOPIC, uniq_key=uniq)
    return await stub.QueryTimers(request)  # type: ignore[attr-defined, no-any-return]


async def test_recalled_timer_never_fires(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path)
    broker = controller.settings.broker_name
    due = now_ms() + 1500
    for uniq in ("KEEP", "DROP"):
        assert (await send(stub, uniq, TIMER_DELIVER_MS=str(due))).code == ResponseCode.SUCCESS
    queried = await state(stub, "DROP")
    assert (queried.code, queried.state, queried.message_deliver_ms) == (ResponseCode.SUCCESS, "PENDING", due)
    assert (queried.pending_timers, queried.earliest_deliver_ms, queried.latest_deliver_ms) == (2, due, due)

    answer = await recall(stub, build_recall_handle(TOPIC, broker, due, "DROP"))
    assert (answer.code, answer.remark, answer.msg_id) == (ResponseCode.SUCCESS, "", "DROP")
    again = await recall(stub, build_recall_handle(TOPIC, broker, due, "DROP"))
    assert again.code == ResponseCode.ILLEGAL_OPERATION
    assert again.remark == "recall failed, message DROP is already recalled"
    assert (await state(stub, "DROP")).state == "RECALLED"
    assert (await state(stub, "KEEP")).pending_timers == 1

    (fired,) = await wait_for(stub, 1)
    assert fired.uniq_key == "KEEP"
    await asyncio.sleep(0.5)
    assert [m.uniq_key for m in await pulled(stub)] == ["KEEP"]
    assert (await state(stub, "KEEP")).state == "DELIVERED"
    assert (await state(stub, "DROP")).state == "RECALLED"
    late = await recall(stub, build_recall_handle(TOPIC, broker, due, "KEEP"))
    assert late.code == ResponseCode.ILLEGAL_OPERATION
    assert "is delivered" in late.remark
    assert controller.scheduled is not None
    assert not controller.scheduled.timers.recalled, "markers done"


async def test_bad_recalls_are_refused(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path, timer_max_delay_sec=3600)
    broker = controller.settings.broker_name
    due = now_ms() + 60_000
    assert (await send(stub, "M1", TIMER_DELIVER_MS=str(due))).code == ResponseCode.SUCCESS
    cases = {
        "garbage": ("%%%not-base64", TOPIC, ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
        "other topic": (build_recall_handle("Other", broker, due, "M1"), TOPIC, ResponseCode.ILLEGAL_OPERATION,
                        "recall failed, topic not match"),
        "other broker": (build_recall_handle(TOPIC, "broker-z", due, "M1"), TOPIC, ResponseCode.ILLEGAL_OPERATION,
                         "is for broker broker-z"),
        "unknown message": (build_recall_handle(TOPIC, broker, due, "NOPE"), TOPIC, ResponseCode.ILLEGAL_OPERATION,
                            "no timer message NOPE"),
        "wrong due time": (build_recall_handle(TOPIC, broker, due + 1, "M1"), TOPIC, ResponseCode.ILLEGAL_OPERATION,
                           "no timer message M1"),
        "beyond the max delay": (build_recall_handle(TOPIC, broker, now_ms() + 7_200_000, "M1"), TOPIC,
                                 ResponseCode.ILLEGAL_OPERATION, "timestamp invalid"),
        "unknown topic": (build_recall_handle("Nowhere", broker, due, "M1"), "Nowhere", ResponseCode.TOPIC_NOT_EXIST,
                          "the topic[Nowhere] not exist"),
    }  # fmt: skip
    for name, (handle, topic, code, remark) in cases.items():
        answer = await recall(stub, handle, topic)
        assert answer.code == code, (name, answer.remark)
        assert remark in answer.remark, (name, answer.remark)
    assert (await state(stub, "M1")).state == "PENDING", "nothing was recalled"
    assert controller.scheduled is not None
    assert not controller.scheduled.timers.recalled


async def test_recall_can_be_switched_off_and_a_slave_refuses(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path / "off", recall_message_enable=False)
    handle = build_recall_handle(TOPIC, controller.settings.broker_name, now_ms() + 5000, "A")
    answer = await recall(stub, handle)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
    slave, slave_stub = await start(brokers, tmp_path / "slave", broker_role="SLAVE", broker_id=1)
    answer = await recall(slave_stub, handle)
    assert answer.code == ResponseCode.SLAVE_NOT_AVAILABLE
    assert slave.scheduled is not None
    assert not slave.scheduled.timers.running, "a slave fires nothing"
