"""A real cluster with authentication and authorisation on (``mqlocal up --auth``'s processes, plaintext): the
generated credentials are private files; the gateway's own calls to the brokers (SendStream included) are signed
with the inner credentials, so a user with Pub stores v1 and v2 sends; unsigned calls, a wrong secret and a user
without Pub are refused and store nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest
from apache.rocketmq.v2 import definition_pb2, service_pb2, service_pb2_grpc
from mq.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from mq_common.auth.interceptor import signing_interceptors
from mq_common.auth.model import Acl, Action, Policy, PolicyEntry, Resource, User
from mq_common.auth.settings import Credentials
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import add_user, make_topic, read_all, spec_for_tests

pytestmark = pytest.mark.integration
SECRET = "writer-secret-Ux4"
V2_META = (("x-mq-client-id", "auth-test-client"), ("x-mq-language", "PYTHON"))


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("auth-cluster") / "data", 1, auth=True)
    with LocalCluster(spec) as cluster:
        yield cluster


@pytest.fixture
async def topic(auth_cluster: LocalCluster) -> str:
    name = await make_topic(auth_cluster, "auth_cluster")
    entry = PolicyEntry(Resource.parse(f"Topic:{name}"), frozenset({Action.PUB}))
    user = f"writer-{name[-8:]}"
    await add_user(auth_cluster, User(user, SECRET), Acl(f"User:{user}", (Policy(entries=(entry,)),)))
    return name


def stored(cluster: LocalCluster, topic: str) -> list[bytes]:
    creds = cluster.spec.admin_credentials
    return [m.body for _, m in asyncio.run(read_all(cluster.namesrv_addr, topic, credentials=creds))]


def test_credentials_are_private_files(auth_cluster: LocalCluster) -> None:
    files = auth_cluster.spec.auth_files
    assert files is not None
    assert files.directory.stat().st_mode & 0o777 == 0o700
    for path in (files.credentials_file, files.admin_env_file):
        assert path.stat().st_mode & 0o777 == 0o600
    assert files.super_user().access_key == "rocketmq"
    logs = "".join(proc.log_path.read_text(errors="replace") for proc in auth_cluster.processes())
    assert files.super_user().secret_key not in logs
    assert files.inner().secret_key not in logs


async def send_batch(cluster: LocalCluster, topic: str, credentials: Credentials | None) -> list[int]:
    channel = grpc.aio.insecure_channel(cluster.gateway_addr, interceptors=signing_interceptors(credentials))
    try:
        stub = gateway_pb2_grpc.ProducerGatewayStub(channel)
        messages = [gateway_pb2.Message(topic=topic, body=f"v1-{i}".encode()) for i in range(3)]
        reply = await stub.SendBatch(gateway_pb2.SendBatchRequest(messages=messages), timeout=30)
        return [r.code for r in reply.results]
    finally:
        await channel.close()


async def test_v1_and_v2_sends_of_a_user_with_pub_are_stored(auth_cluster: LocalCluster, topic: str) -> None:
    user = f"writer-{topic[-8:]}"
    assert await send_batch(auth_cluster, topic, Credentials(user, SECRET)) == [0, 0, 0]
    channel = grpc.aio.insecure_channel(
        auth_cluster.gateway_addr, interceptors=signing_interceptors(Credentials(user, SECRET))
    )
    try:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        message = definition_pb2.Message(topic=definition_pb2.Resource(name=topic), body=b"v2-0")
        message.system_properties.message_id = "01AUTHCLUSTER0000000000000000000A"
        reply = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[message]), metadata=V2_META)
        assert reply.status.code == definition_pb2.OK, reply.status
    finally:
        await channel.close()
    bodies = await asyncio.to_thread(stored, auth_cluster, topic)
    assert sorted(bodies) == [b"v1-0", b"v1-1", b"v1-2", b"v2-0"]


async def test_unsigned_wrong_secret_and_no_pub_are_refused(auth_cluster: LocalCluster, topic: str) -> None:
    refused = [ResponseCode.NO_PERMISSION] * 3
    assert await send_batch(auth_cluster, topic, None) == refused
    assert await send_batch(auth_cluster, topic, Credentials(f"writer-{topic[-8:]}", "wrong")) == refused
    other = await make_topic(auth_cluster, "auth_cluster_other")
    assert await send_batch(auth_cluster, other, Credentials(f"writer-{topic[-8:]}", SECRET)) == refused
    assert await asyncio.to_thread(stored, auth_cluster, topic) == []
    assert await asyncio.to_thread(stored, auth_cluster, other) == []
