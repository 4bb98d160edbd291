"""The HA port over TLS (mq_local's generated CA and certificates): a slave with the broker component certificate
replicates; one with a certificate that names no component identity (``admin``), or with no certificate, is refused
by the master and receives nothing. HAService/HAClient run in-process on real sockets."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from broker_testkit import message, open_store, store_config
from mq_broker.ha.ha_service import HAService
from mq_broker.ha.tls import HaTls
from mq_broker.store.config import BrokerRole
from mq_common.tls import TlsClientAuth, TlsClientConfig, TlsServerConfig
from mq_local.tls_files import BROKER_IDENTITY, LocalTlsFiles

DEADLINE_S = 60.0


def _tls(files: LocalTlsFiles, client_name: str | None) -> HaTls:
    server = TlsServerConfig(files.cert_file("broker"), files.key_file("broker"), files.ca_file, TlsClientAuth.REQUIRE)
    client = TlsClientConfig(
        ca_file=files.ca_file,
        cert_file=files.cert_file(client_name) if client_name else None,
        key_file=files.key_file(client_name) if client_name else None,
    )
    return HaTls(server, client, frozenset({BROKER_IDENTITY}))


async def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("client_name", ["broker", "admin", None])
async def test_only_a_component_certificate_joins_as_slave(tmp_path: Path, client_name: str | None) -> None:
    files = LocalTlsFiles.of_data_dir(tmp_path / "tls")
    files.write()
    master_store = open_store(store_config(tmp_path / "m", broker_role=BrokerRole.ASYNC_MASTER))
    slave_store = open_store(store_config(tmp_path / "s", broker_role=BrokerRole.SLAVE))
    master = HAService(master_store, _tls(files, "broker"))
    slave = HAService(slave_store, _tls(files, client_name))
    try:
        await master_store.put_messages([message(i) for i in range(20)])
        port = await master.start("127.0.0.1", 0)
        await slave.start("127.0.0.1", 0)
        await slave.change_to_slave(f"127.0.0.1:{port}")
        if client_name == "broker":
            await _wait(lambda: slave_store.commit_log.max_offset == master_store.commit_log.max_offset, "replicated")
            assert master.in_sync_slaves() == 1
        else:
            await _wait(lambda: master.refused_slaves >= 2, "the master refuses the slave (and its reconnect)")
            assert slave_store.commit_log.max_offset == 0
            assert not master.connections
    finally:
        await slave.shutdown()
        await master.shutdown()
        master_store.shutdown()
        slave_store.shutdown()


async def test_role_switch_without_restart(tmp_path: Path) -> None:
    """change_to_slave / change_to_master at runtime: the old slave becomes a master its peer replicates from."""
    a_store = open_store(store_config(tmp_path / "a", broker_role=BrokerRole.ASYNC_MASTER))
    b_store = open_store(store_config(tmp_path / "b", broker_role=BrokerRole.SLAVE))
    a, b = HAService(a_store), HAService(b_store)
    try:
        a_port, b_port = await a.start("127.0.0.1", 0), await b.start("127.0.0.1", 0)
        await b.change_to_slave(f"127.0.0.1:{a_port}")
        await a_store.put_messages([message(i) for i in range(10)])
        await _wait(lambda: b_store.commit_log.max_offset == a_store.commit_log.max_offset, "b replicates a")
        await b.change_to_master(BrokerRole.SYNC_MASTER)
        await a.change_to_slave(f"127.0.0.1:{b_port}")
        (put,) = await b_store.put_messages([message(99)])
        assert put.is_ok
        await _wait(lambda: a_store.commit_log.max_offset == b_store.commit_log.max_offset, "a replicates b")
        assert b.in_sync_slaves() == 1
    finally:
        for service in (a, b):
            await service.shutdown()
        a_store.shutdown()
        b_store.shutdown()
