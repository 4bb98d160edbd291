"""HAService: the HA port of a broker and its slaves' connections; the role switch.

Mirrors org.apache.rocketmq.store.ha.DefaultHAService (AcceptSocketService, the connection list, isSlaveOK via
the store's GroupTransferService) and the role-switch half of RocketMQ 5's ReplicasManager
(changeToMaster/changeToSlave). Every broker listens on ``ha_listen_port`` (bound on the broker's listen host);
only a master serves what connects (a slave closes such connections at once). Runs on the broker's event loop.

Role switch (the controller integration drives it; static roles call it once at start):
:meth:`change_to_master` makes the store a master of the given role and stops the HAClient;
:meth:`change_to_slave` closes every slave connection, makes the store a SLAVE and points the HAClient at the new
master's HA address. Neither restarts the process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_log

from mq_broker.ha.ha_client import HAClient
from mq_broker.ha.ha_connection import HAConnection
from mq_broker.ha.tls import HaTls
from mq_broker.store.config import BrokerRole
from mq_broker.store.group_transfer import MAX_SLAVES
from mq_broker.store.message_store import DefaultMessageStore

TLS_HANDSHAKE_TIMEOUT_S: Final = 10.0
_Accept = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

log = get_logger("mq_broker.ha")


class _HandshakeFirstProtocol(asyncio.StreamReaderProtocol):
    """A stream protocol that, for TLS, reads nothing before the handshake: the slave's ClientHello stays in the
    socket until StreamWriter.start_tls (with the context current at that moment: the reload rule) takes it."""

    def __init__(self, reader: asyncio.StreamReader, callback: _Accept, *, pause_reading: bool) -> None:
        super().__init__(reader, callback)
        self._pause_reading = pause_reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._pause_reading and isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()


class HAService:
    """The HA side of one broker: ``store``, optional ``tls`` (HaTls), the HAClient used while a SLAVE."""

    def __init__(self, store: DefaultMessageStore, tls: HaTls | None = None) -> None:
        self.store = store
        self.tls = tls
        self.connections: dict[str, HAConnection] = {}
        self.client = HAClient(store, tls)
        self.port = 0
        self.refused_slaves = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        # Controller mode (set by mq_broker.ha.replicas_manager.ReplicasManager): this broker's id, answered in the
        # HA handshake while it is master; and the SyncStateSet keeper's hooks, told of each slave report at the
        # master's max offset and of each closed connection. None: static roles.
        self.controller_broker_id: int | None = None
        self.on_caught_up: Callable[[HAConnection], None] | None = None
        self.on_slave_closed: Callable[[HAConnection], None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port) and start the client; returns the bound port. Raises OSError."""
        pause = self.tls is not None

        def factory() -> asyncio.StreamReaderProtocol:
            return _HandshakeFirstProtocol(asyncio.StreamReader(), self._accept, pause_reading=pause)

        self._server = await asyncio.get_running_loop().create_server(factory, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.store.commit_log_listener = self._wake_all
        await self.client.start()
        log.info("ha_service_started", host=host, port=self.port, tls=self.tls is not None)
        return self.port

    async def shutdown(self) -> None:
        """Stop listening, close every connection and the client."""
        self.store.commit_log_listener = None
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections.values()):
            await connection.close()
        for task in list(self._handlers):
            await cancel_and_log(task, log, "ha_slave_handler_failed")
        await self.client.shutdown()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    # --- role switch -----------------------------------------------------------------------------------------

    async def change_to_master(self, role: BrokerRole = BrokerRole.ASYNC_MASTER) -> None:
        """Become a master of ``role`` (ASYNC_MASTER or SYNC_MASTER): the client stops replicating first."""
        assert role is not BrokerRole.SLAVE
        self.client.change_master(None)
        await self.client.wait_idle()
        self.store.broker_role = role
        log.info("ha_changed_to_master", role=str(role), commit_log_max_offset=self.store.commit_log.max_offset)

    async def change_to_slave(self, master_ha_addr: str | None) -> None:
        """Become a SLAVE replicating from ``master_ha_addr`` (None: none known yet)."""
        self.store.broker_role = BrokerRole.SLAVE
        for connection in list(self.connections.values()):
            await connection.close()
        self.client.change_master(master_ha_addr)
        log.info("ha_changed_to_slave", master_ha_addr=master_ha_addr)

    # --- the master's view ------------------------------------------------------------------------------------

    def in_sync_slaves(self) -> int:
        """Connected slaves within ha_max_gap_not_in_sync_bytes (the mq_broker_ha_in_sync_slaves gauge)."""
        return self.store.group_transfer.in_sync_slaves(self.store.commit_log.max_offset)

    def slave_lags(self) -> list[tuple[str, int, float]]:
        """(slave, lag bytes, lag seconds) of every connected slave."""
        master_max = self.store.commit_log.max_offset
        return [(c.slave, c.lag_bytes(master_max), c.lag_seconds(master_max)) for c in list(self.connections.values())]

    def _wake_all(self, _max_offset: int) -> None:
        for connection in self.connections.values():
            connection.wake()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._handlers.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        slave = f"{peer[0]}:{peer[1]}" if peer else "?"
        refusal = await self._admit(writer)
        if refusal is not None:
            self.refused_slaves += 1
            log.warning("ha_slave_refused", slave=slave, reason=refusal)
            writer.close()
            return
        connection = HAConnection(
            self.store,
            reader,
            writer,
            slave,
            self._forget,
            master_broker_id=self._master_broker_id,
            on_caught_up=self._caught_up,
        )
        self.connections[slave] = connection
        await connection.run()

    async def _admit(self, writer: asyncio.StreamWriter) -> str | None:
        """None when the peer may replicate (TLS handshake and identity first when TLS is on), else why not."""
        if self.store.broker_role is BrokerRole.SLAVE:
            return "this broker is a slave"
        if len(self.connections) >= MAX_SLAVES:
            return f"already {MAX_SLAVES} slaves"
        if self.tls is None:
            return None
        try:
            await asyncio.wait_for(writer.start_tls(self.tls.server_context()), TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            return f"TLS handshake failed: {exc}"
        return self.tls.refusal(writer.get_extra_info("peercert"))

    def _master_broker_id(self) -> int | None:
        """The id the handshake answers: this broker's while it is a master in controller mode, else None."""
        if self.store.broker_role is BrokerRole.SLAVE:
            return None
        return self.controller_broker_id

    def _caught_up(self, connection: HAConnection) -> None:
        hook = self.on_caught_up
        if hook is not None:
            hook(connection)

    def _forget(self, connection: HAConnection) -> None:
        if self.connections.get(connection.slave) is connection:
            del self.connections[connection.slave]
        hook = self.on_slave_closed
        if hook is not None:
            hook(connection)
