"""Delay levels and timer messages through an in-process broker (HookUtils#handleScheduleMessage,
ScheduleMessageService, TimerMessageStore): held, delivered at (never before) their time on their real topic and
queue with their properties, refused with MESSAGE_ILLEGAL and a remark when malformed, and delivered exactly once
across a restart even when the checkpoints are lost (the DELIVERED_FROM_OFFSET walk)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from broker_grpc_testkit import RunningBrokers, send_request, stream_send_message_batch
from broker_timer_testkit import TOPIC, now_ms, pulled, send, start, wait_for
from mq.broker.v1 import broker_pb2
from mq_common.constants import SCHEDULE_TOPIC, TIMER_TOPIC
from mq_common.response_code import ResponseCode


async def test_delay_level_message_arrives_after_its_level(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path)
    sent_ms = now_ms()
    answer = await send(stub, "D1", DELAY="2")
    assert (answer.code, answer.queue_id) == (ResponseCode.SUCCESS, 1), answer.remark
    assert await pulled(stub) == [], "held on SCHEDULE_TOPIC_XXXX, not on the topic"
    (msg,) = await wait_for(stub, 1)
    assert msg.store_timestamp_ms >= sent_ms + 400, "level 2 = 400 ms"
    assert (msg.topic, msg.queue_id, msg.body, msg.uniq_key, msg.tags) == (TOPIC, 1, b"D1", "D1", "T")
    assert "DELAY" not in msg.properties
    assert "REAL_TOPIC" not in msg.properties
    held = controller.store.lookup_message_by_offset(int(msg.properties["DELIVERED_FROM_OFFSET"]))
    assert held is not None
    assert (held.topic, held.queue_id) == (SCHEDULE_TOPIC, 1)
    assert (held.properties["REAL_TOPIC"], held.properties["REAL_QID"]) == (TOPIC, "1")


async def test_timer_message_fires_at_its_time_not_before(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await start(brokers, tmp_path)
    due_ms = now_ms() + 700
    assert (await send(stub, "T1", TIMER_DELIVER_MS=str(due_ms))).code == ResponseCode.SUCCESS
    relative = now_ms()
    assert (await send(stub, "T2", TIMER_DELAY_MS="300")).code == ResponseCode.SUCCESS
    assert (await send(stub, "T3", TIMER_DELAY_SEC="1")).code == ResponseCode.SUCCESS
    found = {m.uniq_key: m for m in await wait_for(stub, 3)}
    assert int(found["T1"].properties["TIMER_DEQUEUE_MS"]) >= due_ms
    assert found["T1"].properties["TIMER_DELIVER_MS"] == str(due_ms), "kept: the delivery time consumers see"
    assert int(found["T1"].properties["TIMER_OUT_MS"]) == due_ms
    assert found["T2"].store_timestamp_ms >= relative + 300
    assert found["T3"].store_timestamp_ms >= relative + 1000
    assert found["T1"].store_timestamp_ms - due_ms < 1000, "fired within the second"


async def test_a_time_just_past_is_delivered_at_once(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await start(brokers, tmp_path)
    answer = await send(stub, "P1", TIMER_DELIVER_MS=str(now_ms() - 200))
    assert answer.code == ResponseCode.SUCCESS
    (msg,) = await pulled(stub)
    assert "DELIVERED_FROM_OFFSET" not in msg.properties, "stored on the topic directly"


async def test_bad_delays_are_refused_and_store_nothing(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await start(brokers, tmp_path, timer_max_delay_sec=3600)
    cases = {
        "level out of range": ({"DELAY": "4"}, "out of range [0, 3]"),
        "level not a number": ({"DELAY": "soon"}, "out of range"),
        "negative level": ({"DELAY": "-1"}, "out of range"),
        "malformed time": ({"TIMER_DELIVER_MS": "tomorrow"}, "is not an integer"),
        "beyond the max delay": ({"TIMER_DELAY_SEC": "3601"}, "more than the max delay 3600000 ms"),
        "far in the past": ({"TIMER_DELIVER_MS": str(now_ms() - 60_000)}, "in the past"),
        "broker-only property": ({"TIMER_OUT_MS": str(now_ms() + 5000)}, "written by the broker only"),
        "fake delivery proof": ({"DELIVERED_FROM_OFFSET": "0"}, "written by the broker only"),
    }
    for name, (props, remark) in cases.items():
        answer = await send(stub, name.replace(" ", "_"), **props)
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL, name
        assert remark in answer.remark, (name, answer.remark)
    assert controller.store.find_consume_queue(SCHEDULE_TOPIC, 0) is None
    assert controller.store.find_consume_queue(TIMER_TOPIC, 0) is None
    assert await pulled(stub) == []
    disabled, stub2 = await start(brokers, tmp_path / "off", timer_wheel_enable=False)
    answer = await send(stub2, "X", TIMER_DELAY_MS="500")
    assert (answer.code, answer.remark) == (
        ResponseCode.MESSAGE_ILLEGAL,
        "accurate timer message is not enabled, timerWheelEnable is false",
    )
    assert disabled.store.find_consume_queue(TIMER_TOPIC, 0) is None


async def test_a_message_batch_cannot_be_delayed(brokers: RunningBrokers, tmp_path: Path) -> None:
    _controller, stub = await start(brokers, tmp_path)
    single = send_request(TOPIC, b"x", 0, DELAY="1")
    request = broker_pb2.SendMessageBatchRequest(
        producer_group="PG", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        properties=single.properties, body=b"\x00",
    )  # fmt: skip
    answer = await stream_send_message_batch(stub, request)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert "not supported for batching" in answer.remark


async def test_delivered_once_after_restarts_even_without_checkpoints(brokers: RunningBrokers, tmp_path: Path) -> None:
    """Deliveries made after the last checkpoint (here: all of them, the checkpoints are wiped) are found in the
    CommitLog on start and not made again; pending ones survive the restart and fire once."""
    root = tmp_path / "store"
    controller, stub = await start(brokers, root)
    for i in range(5):
        assert (await send(stub, f"L{i}", DELAY="1")).code == ResponseCode.SUCCESS
        assert (await send(stub, f"T{i}", TIMER_DELAY_MS="100")).code == ResponseCode.SUCCESS
    late_due = now_ms() + 2500
    assert (await send(stub, "LATE", TIMER_DELIVER_MS=str(late_due))).code == ResponseCode.SUCCESS
    await wait_for(stub, 10)
    await brokers.stop_all()
    config_dir = root / "config"
    for name in ("timerCheckpoint.json", "delayOffset.json"):
        for path in (config_dir / name, config_dir / f"{name}.bak"):
            path.unlink(missing_ok=True)
    controller, stub = await start(brokers, root)
    assert controller.scheduled is not None
    assert len(controller.scheduled.timers.wheel) == 1, "only LATE is pending"
    assert controller.scheduled.schedule.behind() == {1: 0}
    found = await wait_for(stub, 11)
    await asyncio.sleep(0.5)  # a duplicate would have had time to arrive
    keys = sorted(m.uniq_key or "" for m in await pulled(stub))
    assert keys == sorted([*(f"L{i}" for i in range(5)), *(f"T{i}" for i in range(5)), "LATE"])
    late = next(m for m in found if m.uniq_key == "LATE")
    assert int(late.properties["TIMER_DEQUEUE_MS"]) >= late_due
    checkpoint = json.loads((config_dir / "timerCheckpoint.json").read_text())
    assert checkpoint["queueOffset"] == 6
    assert checkpoint["firedUntilMs"] > late_due
