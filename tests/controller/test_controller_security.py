"""The controller under mutual TLS and authentication: component-only writes, admin-only elections and reads; its
etcd serves mutual TLS too (the controller presents its own certificate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mq_common.auth.interceptor import signing_pool
from mq_common.auth.settings import Credentials
from mq_common.errors import MQError
from mq_common.response_code import ResponseCode
from mq_common.tls import TlsClientAuth
from mq_local.tls_files import BROKER_IDENTITY, LocalTlsFiles

from tests.controller.controller_testkit import CLUSTER, client_of, controllers, heartbeat_of

pytestmark = pytest.mark.integration

SUPER = Credentials("ctrl-root", "ctrl-root-secret")


async def test_only_components_heartbeat_and_only_admins_elect(tmp_path: Path) -> None:
    files = LocalTlsFiles.of_data_dir(tmp_path)
    files.write()
    env = {
        **files.service_env("MQ_CONTROLLER_", "controller", TlsClientAuth.REQUIRE),
        "MQ_CONTROLLER_COMPONENT_IDENTITIES": BROKER_IDENTITY,
        "MQ_CONTROLLER_AUTHENTICATION_ENABLED": "true",
        "MQ_CONTROLLER_INIT_AUTHENTICATION_USER": json.dumps(
            {"username": SUPER.access_key, "password": SUPER.secret_key}
        ),
    }
    broker_tls, admin_tls = files.client_config("broker"), files.client_config("admin")
    broker_pool, admin_pool = signing_pool(broker_tls, None), signing_pool(admin_tls, None)
    signed_pool, wrong_pool = signing_pool(admin_tls, SUPER), signing_pool(admin_tls, Credentials("ctrl-root", "x"))
    try:
        with controllers(tmp_path, env=env, tls=admin_tls, etcd_tls=files) as ctl:
            assert all(e.startswith("https://") for e in ctl.etcd.endpoints)  # the controller -> etcd hop is mTLS
            broker, admin = client_of(ctl.addrs, broker_pool), client_of(ctl.addrs, admin_pool)
            signed, wrong = client_of(ctl.addrs, signed_pool), client_of(ctl.addrs, wrong_pool)
            for refused_call in (
                admin.broker_heartbeat(heartbeat_of(1)),
                admin.alter_sync_state_set(CLUSTER, "g1", 1, 1, frozenset({1}), 1),
            ):
                with pytest.raises(MQError) as refused:
                    await refused_call
                assert refused.value.code == ResponseCode.NO_PERMISSION
                assert "component certificate" in refused.value.remark or "not a component" in refused.value.remark
            with pytest.raises(MQError) as unsigned:
                await admin.get_replica_info("g1")
            assert unsigned.value.code == ResponseCode.NO_PERMISSION  # not signed by a super user: not an admin
            with pytest.raises(MQError) as unknown:
                await signed.get_replica_info("g1")  # the refused heartbeat registered nothing
            assert unknown.value.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
            assert (await broker.broker_heartbeat(heartbeat_of(1))).replica_info.master_epoch == 1
            await broker.broker_heartbeat(heartbeat_of(2))
            for caller in (admin, wrong):
                with pytest.raises(MQError) as no_admin:
                    await caller.elect_master(CLUSTER, "g1", 2)
                assert no_admin.value.code == ResponseCode.NO_PERMISSION
                assert SUPER.secret_key not in no_admin.value.remark
            assert (await signed.get_replica_info("g1")).master_broker_id == 1
            assert (await broker.get_replica_info("g1")).master_broker_id == 1  # a component reads too
            with pytest.raises(MQError) as not_in_sync:
                await signed.elect_master(CLUSTER, "g1", 2)
            assert not_in_sync.value.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    finally:
        for pool in (broker_pool, admin_pool, signed_pool, wrong_pool):
            await pool.close()
