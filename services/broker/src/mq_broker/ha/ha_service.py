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
import socket
from collections.abc import Callable
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
# Connections the HA port has accepted and not yet admitted or refused (the backlog of the listening socket).
LISTEN_BACKLOG: Final = 64

log = get_logger("mq_broker.ha")


class HAService:
    """The HA side of one broker: ``store``, optional ``tls`` (HaTls), the HAClient used while a SLAVE."""

    def __init__(self, store: DefaultMessageStore, tls: HaTls | None = None) -> None:
        self.store = store
        self.tls = tls
        self.connections: dict[str, HAConnection] = {}
        self.client = HAClient(store, tls)
        self.port = 0
        self.refused_slaves = 0
        self._listen_sock: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        # Controller mode (set by mq_broker.ha.replicas_manager.ReplicasManager): this broker's id, answered in the
        # HA handshake while it is master; and the SyncStateSet keeper's hooks, told of each slave report at the
        # master's max offset and of each closed connection. None: static roles.
        self.controller_broker_id: int | None = None
        self.on_caught_up: Callable[[HAConnection], None] | None = None
        self.on_slave_closed: Callable[[HAConnection], None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port) and start the client; returns the bound port. Raises OSError.

        The port is a plain listening socket and an accept loop: each accepted socket is wrapped by
        ``loop.connect_accepted_socket`` (server-side TLS with the context current at that moment: the reload
        rule), so no byte of the slave's ClientHello is read by anything else (StreamWriter.start_tls after
        start_server loses it on Python 3.11.2, Debian 12's, where pause_reading in connection_made is ignored).
        """
        loop = asyncio.get_running_loop()
        family, kind, proto, _name, address = (
            await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._listen_sock = sock
        self.port = sock.getsockname()[1]
        self._accept_task = loop.create_task(self._accept_loop(sock), name="ha-accept")
        self.store.commit_log_listener = self._wake_all
        await self.client.start()
        log.info("ha_service_started", host=host, port=self.port, tls=self.tls is not None)
        return self.port

    async def shutdown(self) -> None:
        """Stop listening, close every connection and the client."""
        self.store.commit_log_listener = None
        if self._accept_task is not None:
            await cancel_and_log(self._accept_task, log, "ha_accept_failed")
            self._accept_task = None
        if self._listen_sock is not None:
            self._listen_sock.close()
            self._listen_sock = None
        for connection in list(self.connections.values()):
            await connection.close()
        for task in list(self._handlers):
            await cancel_and_log(task, log, "ha_slave_handler_failed")
        await self.client.shutdown()

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

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:  # e.g. EMFILE: keep the port, try again shortly
                log.warning("ha_accept_failed", error=str(exc))
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._accept(conn, f"{peer[0]}:{peer[1]}"), name="ha-slave")
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def _accept(self, conn: socket.socket, slave: str) -> None:
        """Admit one accepted socket (role, slave count, TLS handshake and identity) and serve it, or refuse it."""
        streams, refusal = await self._admit(conn)
        if refusal is not None or streams is None:
            self.refused_slaves += 1
            log.warning("ha_slave_refused", slave=slave, reason=refusal)
            if streams is not None:
                streams[1].close()
            else:
                conn.close()
            return
        reader, writer = streams
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

    async def _admit(
        self, conn: socket.socket
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None, str | None]:
        """The streams of an admitted peer and None, or why not (TLS handshake and identity first when TLS is on;
        streams None when none were made: the caller closes the socket)."""
        if self.store.broker_role is BrokerRole.SLAVE:
            return None, "this broker is a slave"
        if len(self.connections) >= MAX_SLAVES:
            return None, f"already {MAX_SLAVES} slaves"
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        context = self.tls.server_context() if self.tls is not None else None
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol,
                conn,
                ssl=context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if context is not None else None,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            return None, f"TLS handshake failed: {exc}"
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        if self.tls is None:
            return (reader, writer), None
        return (reader, writer), self.tls.refusal(writer.get_extra_info("peercert"))

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
