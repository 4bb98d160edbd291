"""The name server's route changes under authentication, against real processes (mqnamesrv + mqbroker + mqgateway
started by mq_local with ``auth=True``): DeleteTopicInNamesrv, UnregisterBroker and RegisterBroker need a component
certificate or a super user's signature (NO_PERMISSION 16 otherwise, nothing changed); the brokers register by
signing with the inner credentials; reads stay open; mqadmin deleteTopic signs; with auth off nothing changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from mq_client.admin.cli import app
from mq_common.auth.interceptor import signing_pool
from mq_common.auth.settings import Credentials
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.namesrv_client import NameServerClient
from mq_common.protocol import BrokerRegistration
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.testing import make_topic, spec_for_tests
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    spec = spec_for_tests(tmp_path_factory.mktemp("namesrv-auth"), 1, auth=True, start_wait_s=60.0)
    with LocalCluster(spec) as cluster:  # start() waits until the broker registered: signed by its inner keys
        yield cluster


def _super(cluster: LocalCluster) -> Credentials:
    credentials = cluster.spec.admin_credentials
    assert credentials is not None
    return credentials


@pytest.fixture
async def pools(auth_cluster: LocalCluster) -> AsyncIterator[dict[str, NameServerClient]]:
    """Name server clients: unsigned, signed with a wrong secret, by an unknown user, by the super user."""
    root = _super(auth_cluster)
    made: dict[str, ChannelPool] = {
        "unsigned": signing_pool(None, None),
        "wrong": signing_pool(None, Credentials(root.access_key, "not-the-secret")),
        "stranger": signing_pool(None, Credentials("stranger", "stranger-secret")),
        "super": signing_pool(None, root),
    }
    try:
        yield {name: NameServerClient([auth_cluster.namesrv_addr], pool) for name, pool in made.items()}
    finally:
        for pool in made.values():
            await pool.close()


def _refused(exc: pytest.ExceptionInfo[MQError], rpc: str, cluster: LocalCluster) -> None:
    assert exc.value.code == ResponseCode.NO_PERMISSION
    assert rpc in exc.value.remark
    assert _super(cluster).secret_key not in exc.value.remark


async def test_route_deletion_needs_a_super_user(
    auth_cluster: LocalCluster, pools: dict[str, NameServerClient]
) -> None:
    topic = await make_topic(auth_cluster, "namesrv_auth_delete")
    for name in ("unsigned", "wrong", "stranger"):
        with pytest.raises(MQError) as refused:
            await pools[name].delete_topic_in_namesrv(topic)
        _refused(refused, "DeleteTopicInNamesrv", auth_cluster)
        assert (await pools["unsigned"].get_route_info_by_topic(topic)).queue_datas, name  # the route is kept
    await pools["super"].delete_topic_in_namesrv(topic)
    with pytest.raises(MQError) as gone:
        await pools["unsigned"].get_route_info_by_topic(topic)
    assert gone.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_a_strangers_unregistration_and_registration_are_refused(
    auth_cluster: LocalCluster, pools: dict[str, NameServerClient]
) -> None:
    broker_name, broker_addr = next(iter(auth_cluster.broker_addrs.items()))
    cluster_name = auth_cluster.spec.cluster_name
    real = BrokerRegistration(cluster_name, broker_name, 0, broker_addr)
    impostor = BrokerRegistration(cluster_name, broker_name, 0, "127.0.0.9:1")
    for name in ("unsigned", "wrong", "stranger"):
        with pytest.raises(MQError) as unregister:
            await pools[name].unregister_broker(auth_cluster.namesrv_addr, real)
        _refused(unregister, "UnregisterBroker", auth_cluster)
        with pytest.raises(MQError) as register:
            await pools[name].register_broker(auth_cluster.namesrv_addr, impostor)
        _refused(register, "RegisterBroker", auth_cluster)
    info = await pools["unsigned"].get_broker_cluster_info()  # reads stay open
    assert dict(info.broker_addr_table[broker_name].broker_addrs) == {0: broker_addr}
    assert await pools["unsigned"].get_all_topic_list()


def test_mqadmin_delete_topic_signs_its_name_server_call(auth_cluster: LocalCluster) -> None:
    topic = asyncio.run(make_topic(auth_cluster, "namesrv_auth_mqadmin"))
    root = _super(auth_cluster)
    env = {"COLUMNS": "250", "MQ_NAMESRV_ADDR": "", "MQ_ACCESS_KEY": root.access_key, "MQ_SECRET_KEY": root.secret_key}
    args = ["-n", auth_cluster.namesrv_addr, "deleteTopic", "-t", topic, "-c", auth_cluster.spec.cluster_name]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "from NameServer success" in result.stdout
    assert root.secret_key not in result.output

    async def routed() -> bool:
        pool = ChannelPool(None)
        try:
            await NameServerClient([auth_cluster.namesrv_addr], pool).get_route_info_by_topic(topic)
        except MQError as exc:
            return exc.code != ResponseCode.TOPIC_NOT_EXIST
        finally:
            await pool.close()
        return True

    assert not asyncio.run(routed())


async def test_with_auth_off_unsigned_route_changes_are_taken(tmp_path_factory: pytest.TempPathFactory) -> None:
    spec = spec_for_tests(tmp_path_factory.mktemp("namesrv-no-auth"), 1)
    pool = ChannelPool(None)
    try:
        with LocalCluster(spec) as cluster:
            client = NameServerClient([cluster.namesrv_addr], pool)
            topic = await make_topic(cluster, "namesrv_no_auth")
            await client.delete_topic_in_namesrv(topic)
            with pytest.raises(MQError) as gone:
                await client.get_route_info_by_topic(topic)
            assert gone.value.code == ResponseCode.TOPIC_NOT_EXIST
            broker_name, broker_addr = next(iter(cluster.broker_addrs.items()))
            # unsigned and taken (the broker registers again at its next interval)
            await client.unregister_broker(
                cluster.namesrv_addr, BrokerRegistration(spec.cluster_name, broker_name, 0, broker_addr)
            )
    finally:
        await pool.close()
