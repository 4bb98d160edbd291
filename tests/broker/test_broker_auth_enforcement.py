"""The broker's own ACL 2.0 enforcement through a real in-process gRPC broker with authentication and authorization
on: unsigned or normal users' admin RPCs are refused with NO_PERMISSION 16 and change nothing (the issue's
"UpdateTopic perm 4 stopped all sends"), a super user may, a normal user with Topic:x Pub sends to the broker but
may not change the topic, and secrets are served only to super users."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from broker_grpc_testkit import ANSWER_WAIT_S, RunningBrokers, send_request
from mq.broker.v1 import broker_pb2, broker_pb2_grpc, transaction_pb2, transaction_pb2_grpc
from mq.common.v1 import common_pb2
from mq_broker.controller import BrokerController
from mq_client.auth_admin_calls import AuthAdminCalls
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_common.auth.signature import sign
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode

ROOT = ("root", "root-secret")
ALICE = ("alice", "alice-secret")
Metadata = tuple[tuple[str, str], ...]


def signed(credentials: tuple[str, str]) -> Metadata:
    return sign(credentials[0], credentials[1], datetime.now(UTC))


def topic_config(topic: str, perm: int = 6) -> common_pb2.TopicConfig:
    return common_pb2.TopicConfig(topic_name=topic, read_queue_nums=4, write_queue_nums=4, perm=perm)


async def send(
    stub: broker_pb2_grpc.BrokerAsyncStub, topic: str, metadata: Metadata | None
) -> broker_pb2.SendStreamResponse:
    call = stub.SendStream(metadata=metadata)
    batch = broker_pb2.SendBatchRequest(requests=[send_request(topic)])
    await call.write(broker_pb2.SendStreamRequest(frame_id=1, batch=batch))
    await call.done_writing()
    async with asyncio.timeout(ANSWER_WAIT_S):
        answers = [a async for a in call]
    assert len(answers) == 1
    return answers[0]


@pytest.fixture
async def secured(brokers: RunningBrokers, tmp_path: Path) -> tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub]:
    """A broker with auth on, super user root, normal user alice allowed Topic:x Pub."""
    controller, stub = await brokers.start(
        tmp_path / "store",
        authentication_enabled=True,
        authorization_enabled=True,
        auto_create_topic_enable=False,
        init_authentication_user=json.dumps({"username": ROOT[0], "password": ROOT[1]}),
    )
    pool = ChannelPool()
    try:
        calls = AuthAdminCalls(pool, ROOT)
        addr = f"127.0.0.1:{controller.port}"
        await calls.create_user(addr, User(*ALICE))
        entry = PolicyEntry(Resource.of_topic("x"), frozenset({Action.PUB}))
        await calls.create_acl(addr, Acl("User:alice", (Policy(entries=(entry,)),)))
    finally:
        await pool.close()
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=topic_config("x")), metadata=signed(ROOT))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return controller, stub


async def test_unsigned_create_topic_is_refused_and_changes_nothing(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    controller, stub = secured
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=topic_config("y")))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "not signed" in resp.remark
    assert controller.topics is not None
    assert "y" not in controller.topics.topic_config_table


async def test_wrong_signature_is_refused_without_the_secret(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    _, stub = secured
    resp = await stub.CreateTopic(
        broker_pb2.CreateTopicRequest(topic_config=topic_config("y")), metadata=signed((ROOT[0], "guessed"))
    )
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "User:root" in resp.remark
    assert ROOT[1] not in resp.remark
    assert "guessed" not in resp.remark


async def test_normal_user_sends_but_cannot_update_the_topic(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    controller, stub = secured
    update = broker_pb2.UpdateTopicRequest(topic_config=topic_config("x", perm=4))
    resp = await stub.UpdateTopic(update, metadata=signed(ALICE))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "User:alice has no permission to call UpdateTopic: it needs a super user or a component"
    assert (await stub.UpdateTopic(update)).code == ResponseCode.NO_PERMISSION
    assert controller.topics is not None
    assert controller.topics.topic_config_table["x"].perm == 6
    answer = await send(stub, "x", signed(ALICE))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.batch.responses[0].code == ResponseCode.SUCCESS


async def test_send_without_pub_is_refused(secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub]) -> None:
    _, stub = secured
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=topic_config("z")), metadata=signed(ROOT))
    assert resp.code == ResponseCode.SUCCESS
    answer = await send(stub, "z", signed(ALICE))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "User:alice" in answer.remark
    assert "Pub" in answer.remark
    assert "Topic:z" in answer.remark
    unsigned = await send(stub, "x", None)
    assert unsigned.code == ResponseCode.NO_PERMISSION
    stats = await stub.GetTopicStats(broker_pb2.GetTopicStatsRequest(topic="z"))
    assert all(o.max_offset == 0 for o in stats.offsets)


async def test_pull_needs_sub(secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub]) -> None:
    _, stub = secured
    pull = broker_pb2.PullMessageRequest(consumer_group="g", topic="x", queue_id=0, max_msg_nums=1)
    resp = await stub.PullMessage(pull, metadata=signed(ALICE))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "Sub" in resp.remark
    assert "Topic:x" in resp.remark


async def test_user_rpcs_need_a_super_user_and_secrets_go_only_to_it(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    controller, stub = secured
    get = broker_pb2.GetUserRequest(username="alice")
    as_alice = await stub.GetUser(get, metadata=signed(ALICE))
    assert as_alice.code == ResponseCode.NO_PERMISSION
    assert not as_alice.HasField("user")
    create = broker_pb2.CreateUserRequest(user=broker_pb2.User(username="mallory", password="m"))
    assert (await stub.CreateUser(create, metadata=signed(ALICE))).code == ResponseCode.NO_PERMISSION
    as_root = await stub.GetUser(get, metadata=signed(ROOT))
    assert as_root.code == ResponseCode.SUCCESS
    assert as_root.user.password == ALICE[1]
    pool = ChannelPool()
    try:
        with pytest.raises(MQError) as info:
            await AuthAdminCalls(pool, ALICE).get_acl(f"127.0.0.1:{controller.port}", "User:alice")
        assert info.value.code == ResponseCode.NO_PERMISSION
        root_calls = AuthAdminCalls(pool, ROOT)
        assert await root_calls.get_user(f"127.0.0.1:{controller.port}", "alice") == User(*ALICE)
    finally:
        await pool.close()


async def test_a_verified_component_passes_every_check(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    """The servicer's component_identity hook (wired to the TLS peer identity) names a component: it needs no
    signature and no ACL (the gateway has authorised its own client)."""
    controller, stub = secured
    assert controller.servicer is not None
    controller.servicer._component_identity = lambda _context: "mq-gateway"
    resp = await stub.CreateTopic(broker_pb2.CreateTopicRequest(topic_config=topic_config("w")))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    answer = await send(stub, "w", None)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.batch.responses[0].code == ResponseCode.SUCCESS


async def test_runtime_info_is_an_admin_rpc(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    """GetBrokerRuntimeInfo (clusterList's source) needs a super user: unsigned and normal users get NO_PERMISSION."""
    controller, stub = secured
    request = broker_pb2.GetBrokerRuntimeInfoRequest()
    for metadata in (None, signed(ALICE)):
        refused = await stub.GetBrokerRuntimeInfo(request, metadata=metadata)
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
        assert not refused.table
    allowed = await stub.GetBrokerRuntimeInfo(request, metadata=signed(ROOT))
    assert allowed.code == ResponseCode.SUCCESS, allowed.remark
    assert controller.store is not None
    assert allowed.table["commitLogMaxOffset"] == str(controller.store.commit_log.max_offset)


async def _frames(*frames: transaction_pb2.TransactionChecksRequest) -> Any:
    """The frames, then the stream stays open (as a gateway's)."""
    for frame in frames:
        yield frame
    await asyncio.Event().wait()


async def _ended_code(call: Any) -> grpc.StatusCode:
    try:
        async with asyncio.timeout(ANSWER_WAIT_S):
            async for _ in call:
                pass
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_transaction_checks_need_pub_on_the_producer_group(
    secured: tuple[BrokerController, broker_pb2_grpc.BrokerAsyncStub],
) -> None:
    """A TransactionChecks stream (a check carries the message) registers only groups its caller may Pub to."""
    controller, _ = secured
    manager = controller.producer_manager
    assert manager is not None
    frame = transaction_pb2.TransactionChecksRequest(client_id="gw", producer_groups=["PG"])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{controller.port}") as channel:
        stub = transaction_pb2_grpc.TransactionCheckStub(channel)
        for who in (ALICE, None):
            call = stub.TransactionChecks(_frames(frame), metadata=signed(who) if who else None)
            assert await _ended_code(call) == grpc.StatusCode.PERMISSION_DENIED, who
        assert manager.channels_of("PG") == []
        ok = stub.TransactionChecks(_frames(frame), metadata=signed(ROOT))
        async with asyncio.timeout(ANSWER_WAIT_S):
            while True:
                if manager.channels_of("PG"):
                    break
                await asyncio.sleep(0.02)
        ok.cancel()
