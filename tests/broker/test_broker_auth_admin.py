"""The broker's ACL 2.0 admin RPCs through a real in-process gRPC broker and mq_client's AuthAdminCalls: every
RPC's success and refusal codes (RocketMQ's remarks), RocketMQ's merge semantics, and users/ACLs surviving a
restart (config/users.json, config/acls.json)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from broker_grpc_testkit import RunningBrokers
from mq.broker.v1 import broker_pb2
from mq_client.auth_admin_calls import AuthAdminCalls
from mq_common.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
)
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol.auth import DeleteAclRequestHeader, ListAclRequestHeader, UserInfo, UserUpdate
from mq_common.response_code import ResponseCode


def entry(
    resource: str, *actions: Action, decision: Decision = Decision.ALLOW, ips: tuple[str, ...] = ()
) -> PolicyEntry:
    return PolicyEntry(Resource.parse(resource), frozenset(actions), decision, ips)


def acl(subject: str, *entries: PolicyEntry) -> Acl:
    return Acl(subject, (Policy(PolicyType.CUSTOM, entries),))


@pytest.fixture
async def calls() -> AsyncIterator[AuthAdminCalls]:
    pool = ChannelPool()
    try:
        yield AuthAdminCalls(pool)
    finally:
        await pool.close()


async def refused(call: object, code: int) -> str:
    with pytest.raises(MQError) as info:
        await call  # type: ignore[misc]
    assert info.value.code == code, info.value.remark
    return info.value.remark


async def test_user_rpcs(brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls) -> None:
    controller, _ = await brokers.start(tmp_path / "store")
    addr = f"127.0.0.1:{controller.port}"
    assert await calls.get_user(addr, "alice") is None
    await calls.create_user(addr, User("alice", "alice-secret"))
    await calls.create_user(addr, User("bob", "bob-secret", UserType.SUPER))
    assert await refused(calls.create_user(addr, User("alice", "other")), ResponseCode.NO_PERMISSION) == (
        "The user is existed"
    )
    # auth is off: the password is served (components read it to verify signatures)
    assert await calls.get_user(addr, "alice") == User("alice", "alice-secret")
    await calls.update_user(addr, UserUpdate("alice", user_status=UserStatus.DISABLE))
    assert await calls.get_user(addr, "alice") == User("alice", "alice-secret", UserType.NORMAL, UserStatus.DISABLE)
    await calls.update_user(addr, UserUpdate("alice", password="new-secret", user_status=UserStatus.ENABLE))
    assert (await calls.get_user(addr, "alice")) == User("alice", "new-secret")
    remark = await refused(calls.update_user(addr, UserUpdate("carol", password="x")), ResponseCode.NO_PERMISSION)
    assert remark == "The user is not exist"
    assert await calls.list_user(addr) == [
        UserInfo("alice", UserType.NORMAL, UserStatus.ENABLE),
        UserInfo("bob", UserType.SUPER, UserStatus.ENABLE),
    ]
    assert [u.username for u in await calls.list_user(addr, "ob")] == ["bob"]
    await calls.delete_user(addr, "bob")
    await calls.delete_user(addr, "nobody")  # RocketMQ: nothing to delete is a success
    assert [u.username for u in await calls.list_user(addr)] == ["alice"]
    assert await calls.get_user_info(addr, "alice") == UserInfo("alice", UserType.NORMAL, UserStatus.ENABLE)


async def test_malformed_user_is_invalid_parameter(brokers: RunningBrokers, tmp_path: Path) -> None:
    _, stub = await brokers.start(tmp_path / "store")
    for user in (broker_pb2.User(username="", password="x"), broker_pb2.User(username="a b", password="x"),
                 broker_pb2.User(username="a", password="")):  # fmt: skip
        resp = await stub.CreateUser(broker_pb2.CreateUserRequest(user=user))
        assert resp.code == ResponseCode.INVALID_PARAMETER, resp
    resp = await stub.GetUser(broker_pb2.GetUserRequest(username=" "))
    assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, "The username is blank")


async def test_acl_rpcs_merge_and_delete(brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls) -> None:
    controller, _ = await brokers.start(tmp_path / "store")
    addr = f"127.0.0.1:{controller.port}"
    first = acl("User:alice", entry("Topic:orders", Action.PUB), entry("Group:g1", Action.SUB))
    remark = await refused(calls.create_acl(addr, first), ResponseCode.NO_PERMISSION)
    assert remark == "The subject of User:alice is not exist."
    await calls.create_user(addr, User("alice", "alice-secret"))
    await calls.create_acl(addr, first)
    # UpdateAcl: the entry of a known resource is replaced, a new one appended
    changed = acl("User:alice", entry("Topic:orders", Action.SUB, decision=Decision.DENY, ips=("127.0.0.0/8",)),
                  entry("Topic:pay*", Action.PUB))  # fmt: skip
    await calls.update_acl(addr, changed)
    got = await calls.get_acl(addr, "User:alice")
    assert got == acl(
        "User:alice",
        entry("Topic:orders", Action.SUB, decision=Decision.DENY, ips=("127.0.0.0/8",)),
        entry("Group:g1", Action.SUB),
        entry("Topic:pay*", Action.PUB),
    )
    listed = await calls.list_acl(addr, ListAclRequestHeader(resource_filter="Topic"))
    assert [[e.resource.key for e in a.policies[0].entries] for a in listed] == [["Topic:orders", "Topic:pay*"]]
    assert await calls.list_acl(addr, ListAclRequestHeader(subject_filter="bob")) == []
    await calls.delete_acl(addr, DeleteAclRequestHeader("User:alice", resources=(Resource.parse("Topic:orders"),)))
    got = await calls.get_acl(addr, "User:alice")
    assert got is not None
    assert [e.resource.key for e in got.policies[0].entries] == ["Group:g1", "Topic:pay*"]
    await calls.delete_acl(addr, DeleteAclRequestHeader("User:alice"))
    assert await calls.get_acl(addr, "User:alice") is None
    remark = await refused(calls.delete_acl(addr, DeleteAclRequestHeader("User:alice")), ResponseCode.NO_PERMISSION)
    assert remark == "The acl is not exist."
    assert await refused(calls.get_acl(addr, "User:nobody"), ResponseCode.NO_PERMISSION) == "The subject is not exist."


async def test_acl_refusals(brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls) -> None:
    controller, stub = await brokers.start(tmp_path / "store")
    addr = f"127.0.0.1:{controller.port}"
    await calls.create_user(addr, User("alice", "alice-secret"))
    any_action = acl("User:alice", entry("Topic:x", Action.ANY))
    assert (
        await refused(calls.create_acl(addr, any_action), ResponseCode.NO_PERMISSION) == "The actions can not be Any."
    )
    assert await refused(calls.update_acl(addr, Acl("User:alice")), ResponseCode.NO_PERMISSION) == (
        "The policies is empty."
    )
    bad = broker_pb2.Acl(
        subject="User:alice",
        policies=[
            broker_pb2.Policy(entries=[broker_pb2.PolicyEntry(resource="Queue:x", actions=[broker_pb2.ACTION_PUB])])
        ],
    )
    resp = await stub.CreateAcl(broker_pb2.CreateAclRequest(acl=bad))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "Queue:x" in resp.remark
    bad_ip = acl("User:alice", entry("Topic:x", Action.PUB)).policies[0].entries[0]
    proto_ip = broker_pb2.PolicyEntry(
        resource=bad_ip.resource.key, actions=[broker_pb2.ACTION_PUB], source_ips=["nope"]
    )
    resp = await stub.UpdateAcl(broker_pb2.UpdateAclRequest(acl=broker_pb2.Acl(subject="User:alice",
                                policies=[broker_pb2.Policy(entries=[proto_ip])])))  # fmt: skip
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert await calls.get_acl(addr, "User:alice") is None  # nothing stored from refused requests


async def test_delete_user_deletes_its_acl(brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls) -> None:
    controller, _ = await brokers.start(tmp_path / "store")
    addr = f"127.0.0.1:{controller.port}"
    await calls.create_user(addr, User("alice", "alice-secret"))
    await calls.create_acl(addr, acl("User:alice", entry("Topic:x", Action.PUB)))
    await calls.delete_user(addr, "alice")
    await calls.create_user(addr, User("alice", "again"))
    assert await calls.get_acl(addr, "User:alice") is None


async def test_users_and_acls_survive_a_restart(brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls) -> None:
    root = tmp_path / "store"
    controller, _ = await brokers.start(root)
    addr = f"127.0.0.1:{controller.port}"
    await calls.create_user(addr, User("alice", "alice-secret"))
    the_acl = acl("User:alice", entry("Topic:ord*", Action.PUB, Action.SUB, ips=("127.0.0.1",)))
    await calls.create_acl(addr, the_acl)
    await calls.create_user(addr, User("bob", "bob-secret"))
    await calls.delete_user(addr, "bob")
    await brokers.stop_all()
    stored = json.loads((root / "config" / "acls.json").read_text())
    assert stored["acls"]["User:alice"]["policies"][0]["entries"][0]["resource"] == "Topic:ord*"
    assert (root / "config" / "users.json.bak").exists()
    controller, _ = await brokers.start(root)
    addr = f"127.0.0.1:{controller.port}"
    assert await calls.get_user(addr, "alice") == User("alice", "alice-secret")
    assert await calls.get_user(addr, "bob") is None
    assert await calls.get_acl(addr, "User:alice") == the_acl


async def test_init_users_created_once_as_super_users(
    brokers: RunningBrokers, tmp_path: Path, calls: AuthAdminCalls
) -> None:
    root = tmp_path / "store"
    settings = {
        "init_authentication_user": json.dumps({"username": "root", "password": "root-secret"}),
        "inner_client_authentication_credentials": json.dumps({"accessKey": "inner", "secretKey": "inner-secret"}),
    }
    controller, _ = await brokers.start(root, **settings)
    addr = f"127.0.0.1:{controller.port}"
    assert await calls.get_user(addr, "root") == User("root", "root-secret", UserType.SUPER)
    assert await calls.get_user(addr, "inner") == User("inner", "inner-secret", UserType.SUPER)
    await calls.update_user(addr, UserUpdate("root", password="rotated"))
    await brokers.stop_all()
    controller, _ = await brokers.start(root, **settings)  # an existing user is left as it is
    addr = f"127.0.0.1:{controller.port}"
    assert await calls.get_user(addr, "root") == User("root", "rotated", UserType.SUPER)


async def test_corrupt_users_file_refuses_to_start(brokers: RunningBrokers, tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    (root / "config" / "users.json").write_text('{"users": {"a": {"username": "a"}}}')
    with pytest.raises(RuntimeError, match=r"users\.json"):
        await brokers.start(root)
