"""HAClient's connection life against a bare TCP server (no master behind it): what a role switch may rely on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from broker_testkit import open_store, store_config
from mq_broker.ha.ha_client import HAClient
from mq_broker.store.config import BrokerRole

DEADLINE_S = 30.0


async def test_a_master_change_during_the_connect_drops_the_new_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """change_master(None) while the TCP connect is in flight: wait_idle returns only once that connection is
    closed again (a broker being made master must not take frames from, or truncate for, its former master)."""
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put((reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    entered, gate = asyncio.Event(), asyncio.Event()
    real_connect = loop.create_connection

    async def gated_connect(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await gate.wait()
        return await real_connect(*args, **kwargs)

    monkeypatch.setattr(loop, "create_connection", gated_connect)
    store = open_store(store_config(tmp_path, broker_role=BrokerRole.SLAVE, ha_housekeeping_interval_ms=120_000))
    client = HAClient(store)
    writer: asyncio.StreamWriter | None = None
    try:
        await client.start()
        client.change_master(f"127.0.0.1:{port}")
        await asyncio.wait_for(entered.wait(), DEADLINE_S)
        client.change_master(None)
        idle = asyncio.create_task(client.wait_idle())
        gate.set()
        await asyncio.wait_for(idle, DEADLINE_S)
        reader, writer = await asyncio.wait_for(accepted.get(), DEADLINE_S)  # the connect itself went through
        sent = await asyncio.wait_for(reader.read(), DEADLINE_S)  # ... and the client closed it: EOF
        assert len(sent) <= 8  # at most the first report (8 bytes) before the close
        assert not client.connected
        assert client.connects == 0
    finally:
        if writer is not None:
            writer.close()
        await client.shutdown()
        server.close()
        await server.wait_closed()
        store.shutdown()


@pytest.mark.parametrize("turns", range(6))
async def test_shutdown_as_a_connect_completes_stops_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turns: int
) -> None:
    """shutdown() ``turns`` loop turns after the TCP connect returned: the client's task ends instead of
    reconnecting forever (a connect wait that lost the cancellation kept a refused slave running in one CI run)."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    connected = asyncio.Event()
    real_connect = loop.create_connection

    async def signalling_connect(*args: Any, **kwargs: Any) -> Any:
        result = await real_connect(*args, **kwargs)
        connected.set()
        return result

    monkeypatch.setattr(loop, "create_connection", signalling_connect)
    store = open_store(store_config(tmp_path, broker_role=BrokerRole.SLAVE))
    client = HAClient(store)
    try:
        await client.start()
        client.change_master(f"127.0.0.1:{port}")
        async with asyncio.timeout(DEADLINE_S):
            await connected.wait()
        for _ in range(turns):
            await asyncio.sleep(0)
        task = client._task
        assert task is not None
        async with asyncio.timeout(DEADLINE_S):
            await client.shutdown()
        assert task.done()
    finally:
        await client.shutdown()
        server.close()
        await server.wait_closed()
        store.shutdown()
