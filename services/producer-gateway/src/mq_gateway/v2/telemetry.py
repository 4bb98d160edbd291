"""v2 Telemetry: the bidi stream each client opens to every endpoint of its route, and the session table.

A client writes ``TelemetryCommand{settings}`` first; the server answers ``TelemetryCommand{status: OK, settings}``
(its settings merged with the server's policy, :mod:`mq_gateway.v2.client_settings`) and keeps the stream open;
later settings are answered again. Settings with neither publishing nor subscription end the stream with gRPC
INVALID_ARGUMENT (the only gRPC-level error of the v2 API). One session per client id (the newest stream wins)
holds the stream's outbound queue, so the server can push commands (:meth:`TelemetrySessions.push`); the table is
bounded (``max_telemetry_sessions``, oldest dropped and its stream closed), an entry leaves when its stream ends. A
stream that sends no settings within ``client_idle_timeout_ms`` is closed, so silent streams pin nothing.
Runs on the gateway's asyncio loop. Mirrors org.apache.rocketmq.proxy.grpc.v2.client.ClientActivity#telemetry and
org.apache.rocketmq.proxy.grpc.v2.channel.GrpcClientChannel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import grpc
from apache.rocketmq.v2 import definition_pb2, service_pb2
from mq_common.logging import get_logger
from mq_common.protocol import SubscriptionGroupConfig

from mq_gateway.v2.client_settings import consumer_settings, has_role, producer_settings
from mq_gateway.v2.codes import ok_status
from mq_gateway.v2.limits import V2Limits

log = get_logger("mq_gateway.v2.telemetry")

# Commands waiting to be written to one stream (replies and server pushes); a push to a full queue is refused.
MAX_PENDING_COMMANDS: Final = 64
_CLOSE: Final = None

# group -> its SubscriptionGroupConfig; raises when the group cannot be read (the defaults are used then).
# (group, a topic the group subscribes, "" when none) -> the group's config; raises MQError.
GroupConfigLookup = Callable[[str, str], Awaitable[SubscriptionGroupConfig]]


class TelemetrySession:
    """One open Telemetry stream: its client id, the latest merged settings and the queue of commands to write."""

    __slots__ = ("client_id", "closed", "queue", "settings")

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.settings: definition_pb2.Settings | None = None
        self.queue: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue(MAX_PENDING_COMMANDS)
        self.closed = False

    def offer(self, command: service_pb2.TelemetryCommand) -> bool:
        """Queue ``command`` for the stream; False when the stream is closed or its queue is full."""
        if self.closed:
            return False
        try:
            self.queue.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True

    def close(self) -> None:
        """Ask the stream to end (it ends after the commands already queued, or at once when the queue is full)."""
        self.closed = True
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(_CLOSE)


class TelemetrySessions:
    """``client id -> TelemetrySession`` for the streams that sent settings; at most ``max_sessions``."""

    def __init__(self, max_sessions: int) -> None:
        assert max_sessions > 0
        self._max = max_sessions
        self._sessions: OrderedDict[str, TelemetrySession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, client_id: str) -> TelemetrySession | None:
        return self._sessions.get(client_id)

    def settings_of(self, client_id: str) -> definition_pb2.Settings | None:
        """The merged settings the client last got here (None: no open stream has sent settings)."""
        session = self._sessions.get(client_id)
        return None if session is None else session.settings

    def register(self, session: TelemetrySession) -> None:
        """Make ``session`` its client's session (an older stream of the client stays open but gets no pushes);
        drops and closes the oldest sessions beyond the bound."""
        self._sessions[session.client_id] = session
        self._sessions.move_to_end(session.client_id)
        while len(self._sessions) > self._max:
            _, oldest = self._sessions.popitem(last=False)
            oldest.close()

    def remove(self, session: TelemetrySession) -> None:
        """Forget ``session`` if it is still its client's session."""
        if self._sessions.get(session.client_id) is session:
            del self._sessions[session.client_id]

    def producers_of(self, topic: str) -> list[str]:
        """Client ids of the open producer sessions whose settings publish ``topic`` (the v2 producer group)."""
        return [
            cid
            for cid, session in self._sessions.items()
            if session.settings is not None
            and session.settings.WhichOneof("pub_sub") == "publishing"
            and any(t.name == topic for t in session.settings.publishing.topics)
        ]

    def published_topics(self) -> set[str]:
        """Every topic some open producer session publishes."""
        return {
            t.name
            for session in self._sessions.values()
            if session.settings is not None and session.settings.WhichOneof("pub_sub") == "publishing"
            for t in session.settings.publishing.topics
        }

    def push(self, client_id: str, command: service_pb2.TelemetryCommand) -> bool:
        """Send a server command (e.g. recover_orphaned_transaction_command) to ``client_id``'s stream. False when
        the client has no open session here or its queue is full."""
        session = self._sessions.get(client_id)
        return session is not None and session.offer(command)


class TelemetryService:
    """Serves Telemetry streams over a :class:`TelemetrySessions` table."""

    def __init__(self, limits: V2Limits, group_config: GroupConfigLookup) -> None:
        self.limits = limits
        self.sessions = TelemetrySessions(limits.max_telemetry_sessions)
        self._group_config = group_config

    async def merged_settings(self, client: definition_pb2.Settings) -> definition_pb2.Settings:
        """The reply settings for ``client`` (must have a role, see client_settings.has_role)."""
        if client.WhichOneof("pub_sub") == "publishing":
            return producer_settings(client, self.limits)
        group: SubscriptionGroupConfig | None = None
        try:
            subscriptions = client.subscription.subscriptions
            topic = subscriptions[0].topic.name if subscriptions else ""
            group = await self._group_config(client.subscription.group.name, topic)
        except Exception as exc:  # the defaults serve; the group may not exist yet
            log.debug("telemetry_group_config_failed", group=client.subscription.group.name, error=str(exc))
        return consumer_settings(client, self.limits, group)

    async def serve(
        self,
        client_id: str,
        commands: AsyncIterator[service_pb2.TelemetryCommand],
        context: grpc.aio.ServicerContext[service_pb2.TelemetryCommand, service_pb2.TelemetryCommand],
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        """The outbound side of one stream: replies to ``commands`` and pushed commands, until the client ends the
        stream, the session is dropped, or no settings came within client_idle_timeout_ms."""
        session = TelemetrySession(client_id)
        reader = asyncio.get_running_loop().create_task(self._read(session, commands))
        idle_s = self.limits.client_idle_timeout_ms / 1000.0
        try:
            while True:
                timeout = idle_s if session.settings is None else None
                try:
                    async with asyncio.timeout(timeout):
                        command = await session.queue.get()
                except TimeoutError:
                    log.info("telemetry_idle_closed", client_id=client_id)
                    return
                if command is None:
                    break
                yield command
            if reader.done() and not reader.cancelled() and isinstance(reader.exception(), _RoleMissing):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(reader.exception()))
        finally:
            reader.cancel()
            self.sessions.remove(session)

    async def _read(self, session: TelemetrySession, commands: AsyncIterator[service_pb2.TelemetryCommand]) -> None:
        try:
            async for command in commands:
                await self._on_command(session, command)
        except _RoleMissing:
            session.close()
            raise
        except Exception as exc:  # a broken inbound side ends the stream
            log.debug("telemetry_read_ended", client_id=session.client_id, error=str(exc))
        session.close()

    async def _on_command(self, session: TelemetrySession, command: service_pb2.TelemetryCommand) -> None:
        kind = command.WhichOneof("command")
        if kind != "settings":
            # thread_stack_trace / verify_message_result answer pushes this server does not make yet
            log.debug("telemetry_command_ignored", client_id=session.client_id, command=kind)
            return
        if not has_role(command.settings):
            raise _RoleMissing("settings have neither publishing nor subscription")
        merged = await self.merged_settings(command.settings)
        session.settings = merged
        self.sessions.register(session)
        await session.queue.put(service_pb2.TelemetryCommand(status=ok_status(), settings=merged))


class _RoleMissing(Exception):
    """Settings without publishing or subscription: the stream ends with INVALID_ARGUMENT."""
