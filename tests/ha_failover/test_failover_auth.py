"""Users and ACLs across a failover (real processes, controller mode, authentication and authorisation on): a user and
its ACL created on the master reach the slave through SlaveSynchronize within a few rounds, and so do an update and a
delete; the slave's config/users.json and acls.json survive its restart; after SIGKILL of the master the elected slave
authenticates and authorises that user (a send through the gateway, pulls signed by it straight at the new master),
refuses its old secret, and no process logged a secret."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Final

import grpc
import pytest
from failover_testkit import GROUP, PEER, start_group, wait_for, wait_master, wait_sync_state_set
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_client.auth_admin_calls import AuthAdminCalls
from mq_common.auth.interceptor import signing_interceptors
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_common.auth.settings import Credentials
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.protocol.auth import ListAclRequestHeader, UserUpdate
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, read_all

pytestmark = pytest.mark.integration
APP: Final = "spark-app"
GONE: Final = "gone-app"
SECRET_1: Final = "app-secret-Qw81"
SECRET_2: Final = "app-secret-Zr44"
GONE_SECRET: Final = "gone-secret-Lp07"
READ_GROUP: Final = "mq_local_read_all"  # mq_local.testing.read_all's consumer group


def entry(resource: str, *actions: Action) -> PolicyEntry:
    return PolicyEntry(Resource.parse(resource), frozenset(actions))


async def auth_view(calls: AuthAdminCalls, addr: str) -> tuple[object, ...]:
    """What a broker holds: its users (without passwords), its ACLs, and APP with its password (None: unknown)."""
    return (
        await calls.list_user(addr),
        await calls.list_acl(addr, ListAclRequestHeader()),
        await calls.get_user(addr, APP),
    )


async def wait_same_auth(calls: AuthAdminCalls, master: str, slave: str, what: str) -> None:
    async def same() -> bool:
        return await auth_view(calls, master) == await auth_view(calls, slave)

    await wait_for(same, f"the slave holds the master's users and ACLs ({what})", deadline_s=20.0)


async def send_as(cluster: LocalCluster, topic: str, credentials: Credentials, body: bytes) -> int:
    """One v1 Send through the gateway signed with ``credentials``; the answer's code (-1: a gRPC error)."""
    channel = grpc.aio.insecure_channel(cluster.gateway_addr, interceptors=signing_interceptors(credentials))
    try:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        reply = await stub.Send(
            gateway_pb2.SendRequest(message=gateway_pb2.Message(topic=topic, body=body)), timeout=10
        )
        return reply.result.code
    except grpc.RpcError:
        return -1
    finally:
        await channel.close()


async def test_promoted_slave_serves_the_masters_users_and_acls(tmp_path: Path) -> None:
    with start_group(tmp_path / "cluster", auth=True) as cluster:
        spec = cluster.spec
        admin = spec.admin_credentials
        assert admin is not None
        master, slave = cluster.broker_addrs[GROUP], cluster.slave_addrs[PEER]
        topic = await make_topic(cluster, "authsync", queues=1)
        pool = ChannelPool()
        try:
            calls = AuthAdminCalls(pool, (admin.access_key, admin.secret_key))
            await calls.create_user(master, User(APP, SECRET_1))
            await calls.create_acl(
                master, Acl(f"User:{APP}", (Policy(entries=(entry(f"Topic:{topic}", Action.PUB),)),))
            )
            await calls.create_user(master, User(GONE, GONE_SECRET))
            await calls.create_acl(master, Acl(f"User:{GONE}", (Policy(entries=(entry("Topic:*", Action.SUB),)),)))
            await wait_same_auth(calls, master, slave, "created")
            assert await calls.get_user(slave, GONE) == User(GONE, GONE_SECRET)

            await calls.update_user(master, UserUpdate(APP, password=SECRET_2))
            reads = (entry(f"Topic:{topic}", Action.PUB, Action.SUB), entry(f"Group:{READ_GROUP}", Action.SUB))
            await calls.update_acl(master, Acl(f"User:{APP}", (Policy(entries=reads),)))
            await calls.delete_user(master, GONE)
            await wait_same_auth(calls, master, slave, "updated and deleted")
            assert await calls.get_user(slave, APP) == User(APP, SECRET_2)
            assert await calls.get_user(slave, GONE) is None

            await asyncio.to_thread(cluster.stop_broker, PEER)
            config = spec.broker_store_dir(PEER) / "config"
            users = json.loads((config / "users.json").read_text(encoding="utf-8"))["users"]
            assert users[APP]["password"] == SECRET_2
            assert GONE not in users
            acls = json.loads((config / "acls.json").read_text(encoding="utf-8"))["acls"]
            assert set(acls) == {f"User:{APP}"}
            assert {e["resource"] for e in acls[f"User:{APP}"]["policies"][0]["entries"]} == {
                f"Topic:{topic}",
                f"Group:{READ_GROUP}",
            }
            await asyncio.to_thread(cluster.start_broker, PEER)
            assert await calls.get_user(slave, APP) == User(APP, SECRET_2)
            await wait_sync_state_set(cluster, 2)

            await asyncio.to_thread(cluster.kill_broker, GROUP)
            await wait_master(cluster, PEER)
        finally:
            await pool.close()

        codes: list[int] = []

        async def answered() -> bool:  # routes and the gateway follow the new master within a few seconds
            codes.append(await send_as(cluster, topic, Credentials(APP, SECRET_2), b"after-failover"))
            return codes[-1] in (ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION)

        await wait_for(answered, "a send signed by the app user answered by the new master", deadline_s=30.0)
        assert codes[-1] == ResponseCode.SUCCESS, codes
        stored = await read_all(cluster.namesrv_addr, topic, credentials=Credentials(APP, SECRET_2))
        assert [m.body for _, m in stored] == [b"after-failover"]
        with pytest.raises(MQError) as old_secret:
            await read_all(cluster.namesrv_addr, topic, credentials=Credentials(APP, SECRET_1))
        assert old_secret.value.code == ResponseCode.NO_PERMISSION

        logs = "".join(proc.log_path.read_text(errors="replace") for proc in cluster.processes())
        for secret in (SECRET_1, SECRET_2, GONE_SECRET):
            assert secret not in logs
