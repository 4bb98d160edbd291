"""SlaveSynchronize's copy of the users and ACLs (beyond RocketMQ) between two real in-process gRPC brokers with
authentication and authorisation on: one round replaces the slave's users and ACLs with the master's (updates and
deletes too) and persists them; an unchanged round writes nothing; each part fails alone; the sync RPCs give users
and their passwords only to components and super users, never to an unsigned caller or a normal user."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from broker_grpc_testkit import RunningBrokers
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_broker.auth.metadata_manager import ACLS_FILE, USERS_FILE
from mq_broker.controller import BrokerController
from mq_broker.ha.master_calls import MASTER_CALL_TIMEOUT_MS, MasterCalls
from mq_broker.ha.slave_synchronize import SlaveSynchronize
from mq_client.auth_admin_calls import AuthAdminCalls
from mq_common.auth.interceptor import signing_pool
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User, UserType
from mq_common.auth.settings import Credentials
from mq_common.auth.signature import sign
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol.auth import ListAclRequestHeader, UserUpdate
from mq_common.response_code import ResponseCode

ROOT = ("root", "root-secret-9")
APP = ("app", "app-secret-1")
OTHER = ("other", "other-secret-1")


def auth_settings(**overrides: object) -> dict[str, object]:
    return {
        "authentication_enabled": True,
        "authorization_enabled": True,
        "init_authentication_user": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        **overrides,
    }


def acl_of(username: str, *resources: str) -> Acl:
    entries = tuple(PolicyEntry(Resource.parse(r), frozenset({Action.PUB, Action.SUB})) for r in resources)
    return Acl(f"User:{username}", (Policy(entries=entries),))


def addr_of(controller: BrokerController) -> str:
    return f"127.0.0.1:{controller.port}"


@pytest.fixture
async def pools() -> AsyncIterator[tuple[ChannelPool, ChannelPool]]:
    """(a pool signing with the super user ROOT, as a slave signs with the inner credentials; a pool signing with
    the normal user APP)."""
    root, app = signing_pool(None, Credentials(*ROOT)), signing_pool(None, Credentials(*APP))
    try:
        yield root, app
    finally:
        await root.close()
        await app.close()


async def pair(
    brokers: RunningBrokers, tmp_path: Path, pool: ChannelPool, **slave_overrides: object
) -> tuple[BrokerController, BrokerController, SlaveSynchronize]:
    """A master with users APP and OTHER and their ACLs, a second broker as its slave (started as a master: only its
    tables matter), and a SlaveSynchronize from the first into the second (rounds run by the test)."""
    master, _ = await brokers.start(tmp_path / "master", **auth_settings())
    slave, _ = await brokers.start(tmp_path / "slave", **auth_settings(**slave_overrides))
    calls = AuthAdminCalls(pool)
    for user, topic in ((APP, "orders"), (OTHER, "audit")):
        await calls.create_user(addr_of(master), User(*user))
        await calls.create_acl(addr_of(master), acl_of(user[0], f"Topic:{topic}"))
    assert slave.servicer is not None
    tables = slave.servicer._metadata_tables
    assert tables is not None
    assert tables.auth is slave.auth_metadata
    sync = SlaveSynchronize(
        MasterCalls(pool, MASTER_CALL_TIMEOUT_MS),
        tables,
        master_addr=lambda: addr_of(master),
        broker_addr=lambda: addr_of(slave),
        interval_ms=1000,
        commit_log_max_offset=lambda: 0,
    )
    return master, slave, sync


async def test_a_round_copies_users_and_acls_with_updates_and_deletes(
    brokers: RunningBrokers, tmp_path: Path, pools: tuple[ChannelPool, ChannelPool]
) -> None:
    root_pool, _ = pools
    master, slave, sync = await pair(brokers, tmp_path, root_pool)
    assert slave.auth_metadata is not None
    assert slave.auth_metadata.get_user(APP[0]) is None
    assert await sync.sync_all()
    assert slave.auth_metadata.get_user(APP[0]) == User(*APP)
    assert slave.auth_metadata.acl_of("User:app") == acl_of(APP[0], "Topic:orders")
    assert slave.auth_metadata.get_user(ROOT[0]) == User(*ROOT, UserType.SUPER)

    calls, master_addr = AuthAdminCalls(root_pool), addr_of(master)
    await calls.update_user(master_addr, UserUpdate(APP[0], password="app-secret-2"))
    await calls.update_acl(master_addr, acl_of(APP[0], "Topic:payments"))
    await calls.delete_user(master_addr, OTHER[0])
    assert await sync.sync_all()
    assert slave.auth_metadata.get_user(APP[0]) == User(APP[0], "app-secret-2")
    assert slave.auth_metadata.get_user(OTHER[0]) is None
    assert slave.auth_metadata.acl_of("User:other") is None
    everything = ListAclRequestHeader()
    assert slave.auth_metadata.list_acls(everything) == master.auth_metadata.list_acls(everything)  # type: ignore[union-attr]

    config = tmp_path / "slave" / "config"
    users = json.loads((config / USERS_FILE).read_text(encoding="utf-8"))
    assert users["users"][APP[0]]["password"] == "app-secret-2"
    assert OTHER[0] not in users["users"]
    acls = json.loads((config / ACLS_FILE).read_text(encoding="utf-8"))
    assert set(acls["acls"]) == {"User:app"}
    written = {name: (config / name).stat().st_mtime_ns for name in (USERS_FILE, ACLS_FILE)}
    assert await sync.sync_all()  # nothing changed on the master: nothing is written
    assert {name: (config / name).stat().st_mtime_ns for name in written} == written


async def test_each_part_fails_alone(
    brokers: RunningBrokers, tmp_path: Path, pools: tuple[ChannelPool, ChannelPool]
) -> None:
    """The slave holds at most one ACL: the ACL part fails (INVALID_PARAMETER, logged), users still arrive."""
    root_pool, _ = pools
    _master, slave, sync = await pair(brokers, tmp_path, root_pool, auth_max_acls=1)
    assert await sync.sync_all()
    assert slave.auth_metadata is not None
    assert slave.auth_metadata.get_user(OTHER[0]) == User(*OTHER)
    assert slave.auth_metadata.list_acls(ListAclRequestHeader()) == []


async def test_a_normal_user_gets_no_users_through_the_sync_calls(
    brokers: RunningBrokers, tmp_path: Path, pools: tuple[ChannelPool, ChannelPool]
) -> None:
    """A slave whose calls are signed by a normal user (not a component, not a super user) copies nothing: the master
    refuses ListUser and ListAcl with NO_PERMISSION 16, as it refuses GetAllTopicConfig."""
    root_pool, app_pool = pools
    master, slave, _ = await pair(brokers, tmp_path, root_pool)
    master_calls = MasterCalls(app_pool, MASTER_CALL_TIMEOUT_MS)
    for call in (master_calls.get_all_users, master_calls.get_all_acls, master_calls.get_all_topic_config):
        with pytest.raises(MQError) as info:
            await call(addr_of(master))
        assert info.value.code == ResponseCode.NO_PERMISSION
        assert APP[1] not in info.value.remark
    tables = slave.servicer._metadata_tables  # type: ignore[union-attr]
    assert tables is not None
    sync = SlaveSynchronize(
        master_calls,
        tables,
        master_addr=lambda: addr_of(master),
        broker_addr=lambda: "",
        interval_ms=1000,
        commit_log_max_offset=lambda: 0,
    )
    assert await sync.sync_all()
    assert slave.auth_metadata is not None
    assert slave.auth_metadata.get_user(APP[0]) is None


async def test_list_user_answers_passwords_only_to_components_and_super_users(
    brokers: RunningBrokers, tmp_path: Path, pools: tuple[ChannelPool, ChannelPool]
) -> None:
    """The RPC itself: unsigned and normal callers get NO_PERMISSION and no user; a super user and a verified
    component certificate get every user with its password."""
    root_pool, _ = pools
    master, _slave, _ = await pair(brokers, tmp_path, root_pool)
    channel = grpc.aio.insecure_channel(addr_of(master))
    try:
        await expect_list_user_guarded(master, broker_pb2_grpc.BrokerStub(channel))  # type: ignore[arg-type]
    finally:
        await channel.close()


async def expect_list_user_guarded(master: BrokerController, stub: broker_pb2_grpc.BrokerAsyncStub) -> None:
    request = broker_pb2.ListUserRequest()
    for metadata in (None, sign(APP[0], APP[1], datetime.now(UTC))):
        refused = await stub.ListUser(request, metadata=metadata)
        assert refused.code == ResponseCode.NO_PERMISSION, refused.remark
        assert not refused.users
        acls = await stub.ListAcl(broker_pb2.ListAclRequest(), metadata=metadata)
        assert acls.code == ResponseCode.NO_PERMISSION
        assert not acls.acls
    as_root = await stub.ListUser(request, metadata=sign(ROOT[0], ROOT[1], datetime.now(UTC)))
    assert {u.username: u.password for u in as_root.users}[APP[0]] == APP[1]
    assert master.servicer is not None
    master.servicer._component_identity = lambda _context: "broker.pyrocketmq"
    as_component = await stub.ListUser(request)
    assert as_component.code == ResponseCode.SUCCESS, as_component.remark
    assert {u.username: u.password for u in as_component.users}[APP[0]] == APP[1]


async def test_with_auth_off_users_are_copied_too(brokers: RunningBrokers, tmp_path: Path) -> None:
    """Auth off (no user is checked): the users an admin created are copied all the same, ready for when auth is
    turned on; a round against a master without users writes no users file."""
    master, _ = await brokers.start(tmp_path / "master")
    slave, _ = await brokers.start(tmp_path / "slave")
    pool = ChannelPool()
    try:
        tables = slave.servicer._metadata_tables  # type: ignore[union-attr]
        assert tables is not None
        sync = SlaveSynchronize(
            MasterCalls(pool, MASTER_CALL_TIMEOUT_MS),
            tables,
            master_addr=lambda: addr_of(master),
            broker_addr=lambda: addr_of(slave),
            interval_ms=1000,
            commit_log_max_offset=lambda: 0,
        )
        assert await sync.sync_all()
        assert not (tmp_path / "slave" / "config" / USERS_FILE).exists()
        await AuthAdminCalls(pool).create_user(addr_of(master), User(*APP))
        assert await sync.sync_all()
        assert slave.auth_metadata is not None
        assert slave.auth_metadata.get_user(APP[0]) == User(*APP)
    finally:
        await pool.close()
