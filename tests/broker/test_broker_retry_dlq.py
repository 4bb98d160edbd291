"""ConsumerSendMsgBack through the in-process gRPC broker (AbstractSendMessageProcessor#consumerSendMsgBack): the
message comes back on %RETRY%<group> with its fields kept and the retry properties set, again and again, until its
reconsume times reach the limit (the group's retryMaxTimes or the request's) or the delay level is negative: then
%DLQ%<group>. Refusals: unknown group, consumeEnable off, broker not writeable, bad CommitLog offset. A retry waits its
delay level on SCHEDULE_TOPIC_XXXX first (the levels here are milliseconds, so the tests wait little)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broker_grpc_testkit import RunningBrokers, send_request, stream_send
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.controller import BrokerController
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt, iter_messages
from mq_common.constants import MessageSysFlag, PermName
from mq_common.errors import MQBrokerError
from mq_common.protocol import ConsumerSendMsgBackRequestHeader, SubscriptionGroupConfig
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub

GROUP = "RetryGroup"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"


def set_group(controller: BrokerController, **fields: object) -> None:
    assert controller.subscription_groups is not None
    config = SubscriptionGroupConfig(GROUP, **fields)  # type: ignore[arg-type]
    controller.subscription_groups.update_subscription_group_config(config)


FAST_DELAY_LEVELS = " ".join(f"{10 * n}ms" for n in range(1, 19))
"""18 levels of 10 ms .. 180 ms: retries arrive quickly."""
ARRIVAL_WAIT_S = 10.0


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, Stub]]:
    running = RunningBrokers()
    try:
        yield await running.start(tmp_path / "store", message_delay_level=FAST_DELAY_LEVELS)
    finally:
        await running.stop_all()


async def pull_all(stub: Stub, topic: str, queue_id: int = 0, want: int = 1) -> list[MessageExt]:
    """Every message of the queue, once at least ``want`` are there (or after ARRIVAL_WAIT_S: what there is)."""
    deadline = asyncio.get_running_loop().time() + ARRIVAL_WAIT_S
    while True:
        resp = await stub.PullMessage(
            broker_pb2.PullMessageRequest(
                consumer_group=GROUP, topic=topic, queue_id=queue_id, queue_offset=0, max_msg_nums=32
            )
        )
        found = list(iter_messages(resp.message_bytes)) if resp.status == broker_pb2.PULL_STATUS_FOUND else []
        if len(found) >= want or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.02)


async def send_original(stub: Stub, **props: str) -> MessageExt:
    sent = await stream_send(
        stub, send_request("Orders", b"order-1", 0, TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="UNIQ1", **props)
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    (original,) = await pull_all(stub, "Orders")
    return original


async def send_back(stub: Stub, offset: int, **fields: object) -> broker_pb2.ConsumerSendMsgBackResponse:
    values: dict[str, object] = {"group": GROUP, "offset": offset, "origin_topic": "Orders", **fields}
    return await stub.ConsumerSendMsgBack(broker_pb2.ConsumerSendMsgBackRequest(**values))  # type: ignore[arg-type]


async def test_send_back_goes_to_the_retry_topic(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    original = await send_original(stub)
    resp = await send_back(stub, original.commit_log_offset)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "")

    (retry,) = await pull_all(stub, RETRY)
    assert (retry.topic, retry.queue_id, retry.body, retry.flag) == (RETRY, 0, b"order-1", original.flag)
    assert (retry.born_timestamp_ms, retry.born_host) == (original.born_timestamp_ms, original.born_host)
    assert retry.reconsume_times == 1
    props = retry.properties
    assert (props["TAGS"], props["KEYS"], props["UNIQ_KEY"]) == ("TagA", "k1 k2", "UNIQ1")
    assert (props["RETRY_TOPIC"], props["ORIGIN_MESSAGE_ID"], props["RECONSUME_TIME"]) == ("Orders", "UNIQ1", "1")
    assert "DELAY" not in props
    assert props["WAIT"] == "true"
    assert int(props["DELIVERED_FROM_OFFSET"]) > original.commit_log_offset
    assert controller.topics is not None
    config = controller.topics.select_topic_config(RETRY)
    assert config is not None
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (
        1,
        1,
        PermName.PERM_READ | PermName.PERM_WRITE,
    )

    again = await send_back(stub, retry.commit_log_offset, delay_level=5)
    assert again.code == ResponseCode.SUCCESS, again.remark
    second = (await pull_all(stub, RETRY, want=2))[1]
    assert second.reconsume_times == 2
    assert second.properties["RETRY_TOPIC"] == "Orders", "the first topic stays"
    assert second.properties["ORIGIN_MESSAGE_ID"] == "UNIQ1"
    assert second.properties["RECONSUME_TIME"] == "2"


async def test_past_retry_max_times_goes_to_the_dlq(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    set_group(controller, retry_max_times=2)
    assert controller.retry_dlq is not None
    dead: list[tuple[str, str]] = []
    controller.retry_dlq.on_send_to_dlq = lambda group, topic: dead.append((group, topic))
    offset = (await send_original(stub)).commit_log_offset
    for times in (1, 2):
        assert (await send_back(stub, offset)).code == ResponseCode.SUCCESS
        retried = (await pull_all(stub, RETRY, want=times))[-1]
        assert retried.reconsume_times == times
        offset = retried.commit_log_offset
    assert not dead
    assert (await send_back(stub, offset)).code == ResponseCode.SUCCESS
    assert len(await pull_all(stub, RETRY)) == 2, "reconsume times 2 >= retryMaxTimes 2: not retried again"
    (dlq,) = await pull_all(stub, DLQ)
    assert (dlq.topic, dlq.queue_id, dlq.reconsume_times, dlq.body) == (DLQ, 0, 3, b"order-1")
    assert (dlq.properties["RETRY_TOPIC"], dlq.properties["DELAY"]) == ("Orders", "0")
    assert dead == [(GROUP, "Orders")]
    assert controller.topics is not None
    config = controller.topics.select_topic_config(DLQ)
    assert config is not None
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (1, 1, 6)


async def test_request_limit_and_negative_delay_go_to_the_dlq(broker: tuple[BrokerController, Stub]) -> None:
    _, stub = broker
    original = await send_original(stub)
    assert (await send_back(stub, original.commit_log_offset, delay_level=-1)).code == ResponseCode.SUCCESS
    assert (await send_back(stub, original.commit_log_offset)).code == ResponseCode.SUCCESS
    (retried,) = await pull_all(stub, RETRY)
    assert (await send_back(stub, retried.commit_log_offset, max_reconsume_times=1)).code == ResponseCode.SUCCESS
    assert [m.reconsume_times for m in await pull_all(stub, DLQ)] == [1, 2]
    assert len(await pull_all(stub, RETRY)) == 1


async def test_compressed_original_comes_back_inflated(broker: tuple[BrokerController, Stub]) -> None:
    _, stub = broker
    body = b"compressible " * 1000
    request = send_request("Zipped", zlib.compress(body), 0, UNIQ_KEY="Z1")
    request.sys_flag = MessageSysFlag.COMPRESSED_FLAG
    assert (await stream_send(stub, request)).code == ResponseCode.SUCCESS
    (original,) = await pull_all(stub, "Zipped")
    assert original.body == body
    assert (await send_back(stub, original.commit_log_offset, origin_topic="Zipped")).code == ResponseCode.SUCCESS
    (retry,) = await pull_all(stub, RETRY)
    assert retry.body == body
    assert not retry.sys_flag & MessageSysFlag.COMPRESSED_FLAG


async def test_retry_queue_is_one_of_the_groups_retry_queues(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    set_group(controller, retry_queue_nums=4)
    original = await send_original(stub)
    for _ in range(8):
        assert (await send_back(stub, original.commit_log_offset)).code == ResponseCode.SUCCESS
    assert controller.topics is not None
    config = controller.topics.select_topic_config(RETRY)
    assert config is not None
    assert config.write_queue_nums == 4
    assert controller.scheduled is not None
    schedule = controller.scheduled.schedule
    async with asyncio.timeout(ARRIVAL_WAIT_S):  # every retry delivered from the schedule topic
        while True:
            if sum(schedule.behind().values()) == 0:
                break
            await asyncio.sleep(0.02)
    per_queue = [len(await pull_all(stub, RETRY, q, want=0)) for q in range(4)]
    assert sum(per_queue) == 8


async def test_no_retry_queues_means_success_and_nothing_stored(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    set_group(controller, retry_queue_nums=0)
    original = await send_original(stub)
    assert (await send_back(stub, original.commit_log_offset)).code == ResponseCode.SUCCESS
    assert controller.topics is not None
    assert controller.topics.select_topic_config(RETRY) is None


async def test_bad_offsets_are_refused(broker: tuple[BrokerController, Stub]) -> None:
    _, stub = broker
    original = await send_original(stub)
    for offset in (original.commit_log_offset + 1, 10**9, -1):
        resp = await send_back(stub, offset)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")


async def test_group_and_broker_refusals(brokers: RunningBrokers, tmp_path: Path) -> None:
    controller, stub = await brokers.start(tmp_path / "strict", auto_create_subscription_group=False)
    original = await send_original_as_tools(stub)
    unknown = await send_back(stub, original.commit_log_offset)
    assert (unknown.code, unknown.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        f"subscription group not exist, {GROUP}",
    )
    set_group(controller, consume_enable=False)
    disabled = await send_back(stub, original.commit_log_offset)
    assert (disabled.code, disabled.remark) == (
        ResponseCode.NO_PERMISSION,
        f"subscription group no permission, {GROUP}",
    )

    read_only, ro_stub = await brokers.start(tmp_path / "read-only", broker_permission=PermName.PERM_READ)
    refused = await send_back(ro_stub, 0)
    assert (refused.code, refused.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] sending message is forbidden",
    )
    assert read_only.topics is not None
    assert read_only.topics.select_topic_config(RETRY) is None


async def send_original_as_tools(stub: Stub) -> MessageExt:
    """send_original for a broker without auto-created groups: pulls as the system group TOOLS_CONSUMER."""
    sent = await stream_send(stub, send_request("Orders", b"order-1", 0, UNIQ_KEY="UNIQ1"))
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    resp = await stub.PullMessage(
        broker_pb2.PullMessageRequest(
            consumer_group="TOOLS_CONSUMER", topic="Orders", queue_id=0, queue_offset=0, max_msg_nums=1
        )
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    (original,) = iter_messages(resp.message_bytes)
    return original


async def test_broker_client_send_back(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    original = await send_original(stub)
    pool = ChannelPool()
    try:
        client = BrokerClient(pool)
        header = ConsumerSendMsgBackRequestHeader(
            group=GROUP, offset=original.commit_log_offset, origin_msg_id="UNIQ1", origin_topic="Orders"
        )
        await client.consumer_send_msg_back(controller.broker_addr, header)
        with pytest.raises(MQBrokerError) as bad:
            await client.consumer_send_msg_back(
                controller.broker_addr, ConsumerSendMsgBackRequestHeader(group=GROUP, offset=7)
            )
        assert bad.value.code == ResponseCode.SYSTEM_ERROR
    finally:
        await pool.close()
    assert [m.reconsume_times for m in await pull_all(stub, RETRY)] == [1]
