"""The broker over gRPC, in process: send (SendStream frames) / pull round trip, a batch frame, bad inputs,
topic admin, catch-all.

Each broker runs on 127.0.0.1 with a free port and a temporary store; its name server address is unreachable,
which registration must tolerate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from broker_grpc_testkit import RunningBrokers, send_request, stream_send, stream_send_batch
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq.common.v1 import common_pb2
from mq_broker.controller import BrokerController
from mq_common.codec import iter_messages
from mq_common.message_id import decode_offset_msg_id
from mq_common.response_code import ResponseCode

if TYPE_CHECKING:
    Stub = broker_pb2_grpc.BrokerAsyncStub
FIVE_MIB = 5 * 1024 * 1024


@pytest.fixture
async def broker(brokers: RunningBrokers, tmp_path: Path) -> tuple[BrokerController, Stub]:
    """Auto-create on (TBW102 with 4 queues)."""
    return await brokers.start(tmp_path / "store")


@pytest.fixture
async def strict_broker(brokers: RunningBrokers, tmp_path: Path) -> tuple[BrokerController, Stub]:
    """Auto-create off; topic "Known" (4 queues) created through the admin call."""
    controller, stub = await brokers.start(tmp_path / "strict", auto_create_topic_enable=False)
    resp = await stub.CreateTopic(
        broker_pb2.CreateTopicRequest(
            topic_config=common_pb2.TopicConfig(topic_name="Known", read_queue_nums=4, write_queue_nums=4, perm=6)
        )
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return controller, stub


async def pull_all(stub: Stub, topic: str, queue_id: int, subscription: str = "*") -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = 0
    for _ in range(100):
        resp = await stub.PullMessage(
            broker_pb2.PullMessageRequest(
                consumer_group="CG",
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_msg_nums=32,
                subscription=subscription,
            )
        )
        if resp.status != broker_pb2.PULL_STATUS_FOUND:
            break
        out.extend((m.queue_offset, m.body) for m in iter_messages(resp.message_bytes))
        offset = resp.next_begin_offset
    return out


async def test_send_and_pull_round_trip(broker: tuple[BrokerController, Stub]) -> None:
    controller, stub = broker
    resp = await stream_send(stub, send_request("Orders", b"order-1", 2, TAGS="TagA", UNIQ_KEY="ABC123"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (resp.queue_id, resp.queue_offset, resp.transaction_id) == (2, 0, "ABC123")
    assert decode_offset_msg_id(resp.msg_id) == ("127.0.0.1", controller.port, 0)

    pulled = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="Orders", queue_id=2, queue_offset=0, max_msg_nums=10)
    )
    assert pulled.code == ResponseCode.SUCCESS
    assert pulled.status == broker_pb2.PULL_STATUS_FOUND
    assert (pulled.message_count, pulled.next_begin_offset, pulled.min_offset, pulled.max_offset) == (1, 1, 0, 1)
    (msg,) = iter_messages(pulled.message_bytes)
    assert (msg.topic, msg.body, msg.queue_id, msg.queue_offset) == ("Orders", b"order-1", 2, 0)
    assert msg.properties["TAGS"] == "TagA"
    assert msg.properties["CLUSTER"] == "DefaultCluster"
    assert msg.born_host[0] == "127.0.0.1"  # empty born_host: the peer address
    assert msg.store_host == ("127.0.0.1", controller.port)
    assert msg.offset_msg_id == resp.msg_id

    caught_up = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="Orders", queue_id=2, queue_offset=1, max_msg_nums=10)
    )
    assert (caught_up.code, caught_up.status) == (ResponseCode.PULL_NOT_FOUND, broker_pb2.PULL_STATUS_NO_NEW_MSG)
    beyond = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="Orders", queue_id=2, queue_offset=7, max_msg_nums=1)
    )
    assert (beyond.status, beyond.next_begin_offset) == (broker_pb2.PULL_STATUS_OFFSET_ILLEGAL, 1)


async def test_auto_created_topic_takes_min_queue_nums(broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = broker
    req = send_request("Small", queue_id=1)
    req.default_topic_queue_nums = 2
    assert (await stream_send(stub, req)).code == ResponseCode.SUCCESS
    stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="Small"))
    assert [(o.queue_id, o.max_offset) for o in stats.offsets] == [(0, 0), (1, 1)]
    assert stats.offsets[1].last_update_timestamp_ms > 0
    late = await stream_send(stub, send_request("Small", queue_id=3))
    assert late.code == ResponseCode.INVALID_PARAMETER
    assert "request queueId[3] is illegal" in late.remark


async def test_send_batch_checks_each_item(strict_broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = strict_broker
    requests = [send_request("Known", f"m{i}".encode(), i % 4, TAGS="TagA" if i % 2 else "TagB") for i in range(40)]
    requests.insert(5, send_request("Known", b""))  # empty body
    requests.insert(9, send_request("Unknown"))  # no such topic
    codes = [r.code for r in await stream_send_batch(stub, *requests)]
    assert len(codes) == 42
    assert codes[5] == ResponseCode.MESSAGE_ILLEGAL
    assert codes[9] == ResponseCode.TOPIC_NOT_EXIST
    assert [c for i, c in enumerate(codes) if i not in (5, 9)] == [ResponseCode.SUCCESS] * 40
    for q in range(4):
        pulled = await pull_all(stub, "Known", q)
        assert [body for _, body in pulled] == [f"m{i}".encode() for i in range(q, 40, 4)]
        assert [off for off, _ in pulled] == list(range(10))
    only_a = await pull_all(stub, "Known", 1, "TagA")
    assert len(only_a) == 10  # queue 1 holds odd i: all TagA
    assert await pull_all(stub, "Known", 0, "TagA || TagC") == []


async def test_bad_inputs_get_a_code_and_a_remark(strict_broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = strict_broker
    empty = await stream_send(stub, send_request("Known", b""))
    assert (empty.code, empty.remark) == (ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
    illegal = await stream_send(stub, send_request("bad topic!"))
    assert illegal.code == ResponseCode.INVALID_PARAMETER
    assert "contains illegal characters" in illegal.remark
    big = await stream_send(stub, send_request("Known", b"x" * FIVE_MIB))
    assert big.code == ResponseCode.MESSAGE_ILLEGAL
    assert "msg body length limit 4194304B" in big.remark
    unknown = await stream_send(stub, send_request("NotThere"))
    assert (unknown.code, unknown.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "topic[NotThere] not exist, apply first please!",
    )
    out_of_range = await stream_send(stub, send_request("Known", queue_id=99))
    assert out_of_range.code == ResponseCode.INVALID_PARAMETER
    assert out_of_range.remark.startswith("request queueId[99] is illegal, TopicConfig [topicName=Known")
    forbidden = await stream_send(stub, send_request("SCHEDULE_TOPIC_XXXX"))
    assert (forbidden.code, forbidden.remark) == (
        ResponseCode.NO_PERMISSION,
        "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
    )

    def pull(**kw: object) -> broker_pb2.PullMessageRequest:
        fields: dict[str, object] = {
            "consumer_group": "CG",
            "topic": "Known",
            "queue_id": 0,
            "queue_offset": 0,
            "max_msg_nums": 8,
            **kw,
        }
        return broker_pb2.PullMessageRequest(**fields)  # type: ignore[arg-type]

    negative = await stub.PullMessage(pull(max_msg_nums=-1))
    assert negative.code == ResponseCode.INVALID_PARAMETER
    assert "maxMsgNums" in negative.remark
    assert (await stub.PullMessage(pull(queue_offset=-5))).code == ResponseCode.INVALID_PARAMETER
    assert (await stub.PullMessage(pull(topic="NotThere"))).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await stub.PullMessage(pull(queue_id=4))).code == ResponseCode.INVALID_PARAMETER
    assert (await stub.PullMessage(pull(subscription="||"))).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED

    # The broker keeps serving.
    ok = await stream_send(stub, send_request("Known", b"still here", 0))
    assert ok.code == ResponseCode.SUCCESS
    assert await pull_all(stub, "Known", 0) == [(0, b"still here")]


async def test_topic_admin(strict_broker: tuple[BrokerController, Stub]) -> None:
    _controller, stub = strict_broker

    def config(name: str, queues: int, perm: int = 6) -> common_pb2.TopicConfig:
        return common_pb2.TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues, perm=perm)

    missing = await stub.UpdateTopic(broker_pb2.UpdateTopicRequest(topic_config=config("Nope", 4)))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    grown = await stub.UpdateTopic(broker_pb2.UpdateTopicRequest(topic_config=config("Known", 8)))
    assert grown.code == ResponseCode.SUCCESS
    assert (await stream_send(stub, send_request("Known", queue_id=7))).code == ResponseCode.SUCCESS
    stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="Known"))
    assert stats.code == ResponseCode.SUCCESS
    assert [(o.broker_name, o.queue_id, o.max_offset) for o in stats.offsets][-1] == ("broker-a", 7, 1)
    assert len(stats.offsets) == 8
    # perm is taken as is: 0 is "neither read nor write", not "unset"
    closed = await stub.UpdateTopic(broker_pb2.UpdateTopicRequest(topic_config=config("Known", 8, perm=0)))
    assert closed.code == ResponseCode.SUCCESS
    assert (await stream_send(stub, send_request("Known", queue_id=7))).code == ResponseCode.NO_PERMISSION
    bad_name = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config("a b", 4)))
    assert bad_name.code == ResponseCode.INVALID_PARAMETER
    system = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=config("SELF_TEST_TOPIC", 4)))
    assert (system.code, system.remark) == (
        ResponseCode.INVALID_PARAMETER,
        "The topic[SELF_TEST_TOPIC] is conflict with system topic.",
    )
    assert (await stub.CreateTopic(broker_pb2.CreateTopicRequest())).code == ResponseCode.INVALID_PARAMETER
    unknown = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="Nope"))
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST


async def test_unexpected_failure_becomes_system_error(
    broker: tuple[BrokerController, Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    controller, stub = broker
    store = controller.store
    assert store is not None

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "get_messages", broken)
    resp = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="TBW102", queue_id=0, max_msg_nums=1)
    )
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "PullMessage failed on an internal error; the service logged the cause"
    monkeypatch.undo()
    assert (await stream_send(stub, send_request("After"))).code == ResponseCode.SUCCESS


async def test_health_is_serving_and_restart_keeps_messages(brokers: RunningBrokers, tmp_path: Path) -> None:
    root = tmp_path / "store"
    controller, stub = await brokers.start(root)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{controller.port}")
    try:
        health = health_pb2_grpc.HealthStub(channel)
        check = await health.Check(health_pb2.HealthCheckRequest(service="mq.broker.v1.Broker"))
        assert check.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await channel.close()
    assert (await stream_send(stub, send_request("Kept", b"one", 1))).code == ResponseCode.SUCCESS
    await brokers.stop_all()
    assert not (root / "abort").exists()
    _controller, stub = await brokers.start(root)
    assert await pull_all(stub, "Kept", 1) == [(0, b"one")]


async def test_read_only_broker_refuses_sends_and_masks_advertised_perms(
    brokers: RunningBrokers, tmp_path: Path
) -> None:
    controller, stub = await brokers.start(tmp_path / "ro", broker_permission=4)
    refused = await stream_send(stub, send_request("Anything"))
    assert (refused.code, refused.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] sending message is forbidden",
    )
    advertised = controller.build_registration().topic_configs
    assert advertised["TBW102"].perm == 4  # RWX & R--
    pulled = await stub.PullMessage(
        broker_pb2.PullMessageRequest(consumer_group="CG", topic="TBW102", queue_id=0, max_msg_nums=1)
    )
    assert pulled.status == broker_pb2.PULL_STATUS_NO_NEW_MSG  # reads still served
