"""Client adapter of the broker's transaction check-back (mq.broker.v1.TransactionCheck.TransactionChecks).

A producer that can answer checks (this project's TransactionMQProducer; the gateway for its v2 clients keeps its
own, mq_gateway.v2.transaction_checks) holds one stream per broker master and registers its producer groups on it;
the broker sends each check to one registered stream of the group. :class:`TransactionCheckStreams` opens a stream
to every address ``masters()`` names (asked every ``register_interval_s``), sends ``groups()`` first and again when
it changes, reopens a broken stream after ``reconnect_s``, and hands every check to ``on_check`` (its own task, so
a slow answer never blocks the stream), at most ``max_answers_in_flight`` at once: the rest wait their turn, as
RocketMQ's producer queues checks for its check executor (checkThreadPoolMaxSize 1, checkRequestHoldMax 2,000). A
check pass hands out thousands of checks within a second, and every producer of a process shares one HTTP/2
connection per broker: unbounded, their END_TRANSACTION answers went past the broker's max_concurrent_streams (1,024)
and were refused (REFUSED_STREAM), each costing its transaction another check interval. Runs on the caller's asyncio
loop. Mirrors the client side of org.apache.rocketmq.client.impl.ClientRemotingProcessor#checkTransactionState.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from mq.broker.v1 import transaction_pb2, transaction_pb2_grpc
from mq_common.channels import ChannelPool
from mq_common.codec import MessageDecodeError, MessageExt, decode_message
from mq_common.logging import get_logger

log = get_logger("mq_client.transaction_checks")

MAX_ANSWERS_IN_FLIGHT: Final = 16
"""Checks one TransactionCheckStreams answers at once (``on_check`` calls running)."""


@dataclass(frozen=True, slots=True)
class TransactionCheck:
    """CheckTransactionStateRequestHeader: what to ask and what EndTransaction must name; ``message`` is the check
    copy of the half message (None when its record did not decode)."""

    producer_group: str
    topic: str
    msg_id: str
    transaction_id: str
    tran_state_table_offset: int
    commit_log_offset: int
    broker_name: str
    message: MessageExt | None


def check_from_proto(check: transaction_pb2.TransactionChecksResponse) -> TransactionCheck:
    message: MessageExt | None = None
    if check.message_bytes:
        with contextlib.suppress(MessageDecodeError, ValueError, IndexError):
            message = decode_message(check.message_bytes)
    return TransactionCheck(
        producer_group=check.producer_group,
        topic=check.topic,
        msg_id=check.msg_id,
        transaction_id=check.transaction_id,
        tran_state_table_offset=check.tran_state_table_offset,
        commit_log_offset=check.commit_log_offset,
        broker_name=check.broker_name,
        message=message,
    )


class TransactionCheckStreams:
    """One TransactionChecks stream per broker master (see the module)."""

    def __init__(
        self,
        pool: ChannelPool,
        client_id: str,
        groups: Callable[[], frozenset[str]],
        masters: Callable[[], Awaitable[set[str]]],
        on_check: Callable[[TransactionCheck], Awaitable[None]],
        *,
        register_interval_s: float = 1.0,
        reconnect_s: float = 1.0,
        max_answers_in_flight: int = MAX_ANSWERS_IN_FLIGHT,
    ) -> None:
        self.pool = pool
        self.client_id = client_id
        self._groups_of = groups
        self._masters = masters
        self._on_check = on_check
        self.register_interval_s = register_interval_s
        self.reconnect_s = reconnect_s
        self._answering = asyncio.Semaphore(max_answers_in_flight)
        self._groups: frozenset[str] = frozenset()
        self._outboxes: dict[str, asyncio.Queue[transaction_pb2.TransactionChecksRequest]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="transaction-check-streams")

    async def stop(self) -> None:
        tasks = [t for t in (self._runner, *self._tasks) if t is not None]
        self._runner = None
        self._tasks.clear()
        self._outboxes.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self.register_once()
            except Exception:
                log.exception("transaction_check_register_failed")
            await asyncio.sleep(self.register_interval_s)

    async def register_once(self) -> None:
        """Open streams to new masters; send the group list where it changed."""
        groups = self._groups_of()
        masters = await self._masters()
        changed = groups != self._groups
        self._groups = groups
        for addr in masters - set(self._outboxes):
            outbox: asyncio.Queue[transaction_pb2.TransactionChecksRequest] = asyncio.Queue()
            self._outboxes[addr] = outbox
            outbox.put_nowait(self._frame())
            self._spawn(self._stream(addr, outbox))
        if changed:
            for outbox in self._outboxes.values():
                outbox.put_nowait(self._frame())

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _frame(self) -> transaction_pb2.TransactionChecksRequest:
        return transaction_pb2.TransactionChecksRequest(client_id=self.client_id, producer_groups=sorted(self._groups))

    async def _stream(self, addr: str, outbox: asyncio.Queue[transaction_pb2.TransactionChecksRequest]) -> None:
        """Keep one stream to ``addr`` open. Each call gets an outbox of its own, first holding the group list: the
        request reader of a broken call (grpc.aio's) still waits on its outbox and would take the next frame, so a
        shared outbox lost the re-registration and a restarted broker never knew this producer."""

        async def requests(
            frames: asyncio.Queue[transaction_pb2.TransactionChecksRequest],
        ) -> AsyncIterator[transaction_pb2.TransactionChecksRequest]:
            while True:
                yield await frames.get()

        while True:
            call = None
            try:
                stub = transaction_pb2_grpc.TransactionCheckStub(self.pool.get(addr))
                call = stub.TransactionChecks(requests(outbox))
                async for check in call:
                    self._spawn(self._answer(check_from_proto(check)))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("transaction_checks_stream_broken", broker=addr, error=str(exc))
            finally:
                if call is not None:
                    call.cancel()  # also stops its request reader
            outbox = asyncio.Queue()
            outbox.put_nowait(self._frame())
            if addr in self._outboxes:
                self._outboxes[addr] = outbox
            await asyncio.sleep(self.reconnect_s)

    async def _answer(self, check: TransactionCheck) -> None:
        try:
            async with self._answering:
                await self._on_check(check)
        except Exception:
            log.exception("transaction_check_answer_failed", msg_id=check.msg_id)
