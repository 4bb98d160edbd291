"""Helpers for the HA chaos rounds (test_chaos_ha.py, the group itself in ha_group.py): a fleet of 32 DefaultMQProducer
SYNC senders recording every SEND_OK, and the read-back that checks every acknowledged message on a broker.

Each sent message carries a ``chaos-id`` property (producer and sequence number) fixed before it is sent, so a message
found in the store is matched to what was sent whether or not its answer arrived; an acknowledged message is also
matched by where its answer put it (queue id, queue offset, offset msg id). Which broker stored a message is read
from its offset msg id (the STOREHOST the master wrote), so the first SEND_OK stored by a new master is known
without asking anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mq_client.broker_client import BrokerClient
from mq_client.producer import DefaultMQProducer, Message, ProducerConfig, SendStatus
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt
from mq_common.errors import MQError
from mq_common.message_id import decode_offset_msg_id
from mq_common.protocol import PullStatus

CHAOS_ID: Final = "chaos-id"
PRODUCERS: Final = 32
SEND_TIMEOUT_MS: Final = 5_000
BODY_BYTES: Final = (64, 2_048)  # below the producer's 4 KiB compression threshold: stored bytes = sent bytes
PULL_BATCH: Final = 256
PULL_TIMEOUT_MS: Final = 10_000
POLL_S: Final = 0.1
IDLE_AFTER_ERROR_S: Final = 0.05  # a sender that just failed waits this long (no busy loop while no master)


@dataclass(frozen=True, slots=True)
class Acked:
    """One SEND_OK: the message's UNIQ_KEY, where the answer put it, its body digest and which broker stored it."""

    chaos_id: str
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    body_sha256: bytes
    store_addr: str
    acked_monotonic_s: float


@dataclass
class HaLedger:
    """Every message sent (chaos id -> body digest), every SEND_OK, and counts of the other outcomes."""

    sent: dict[str, bytes] = field(default_factory=dict)
    acked: dict[str, Acked] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    def first_ack_not_from(self, addr: str, after_s: float) -> Acked | None:
        """The earliest SEND_OK after ``after_s`` (monotonic) stored by a broker other than ``addr``."""
        found = [a for a in self.acked.values() if a.store_addr != addr and a.acked_monotonic_s > after_s]
        return min(found, key=lambda a: a.acked_monotonic_s, default=None)

    def acks_from(self, addr: str, after_s: float) -> list[Acked]:
        """SEND_OKs stored by ``addr`` and recorded after ``after_s`` (monotonic)."""
        return [a for a in self.acked.values() if a.store_addr == addr and a.acked_monotonic_s > after_s]


def store_addr_of(offset_msg_id: str) -> str:
    host, port, _offset = decode_offset_msg_id(offset_msg_id)
    return f"{host}:{port}"


class ProducerFleet:
    """``count`` DefaultMQProducer instances (own channels each), one task per producer sending SYNC one message
    at a time until :meth:`stop`; every outcome lands in ``ledger``. Runs on the test's loop."""

    def __init__(self, namesrv_addr: str, topic: str, ledger: HaLedger, seed: int, count: int = PRODUCERS) -> None:
        self.topic = topic
        self.ledger = ledger
        self._rng = random.Random(seed)
        config = ProducerConfig(
            producer_group="chaos_ha",
            send_msg_timeout_ms=SEND_TIMEOUT_MS,
            poll_name_server_interval_ms=200,  # follow a new master's route quickly
        )
        self.producers = [DefaultMQProducer.connect(config, [namesrv_addr]) for _ in range(count)]
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for i, producer in enumerate(self.producers):
            await producer.start()
            rng = random.Random(self._rng.getrandbits(64))
            self._tasks.append(asyncio.create_task(self._run(i, producer, rng), name=f"chaos-producer-{i}"))

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for producer in self.producers:
            await producer.shutdown()

    async def _run(self, index: int, producer: DefaultMQProducer, rng: random.Random) -> None:
        seq = 0
        while not self._stopping.is_set():
            seq += 1
            chaos_id = f"p{index:02d}-{seq:07d}"
            body = rng.randbytes(rng.randint(*BODY_BYTES))
            digest = hashlib.sha256(body).digest()
            self.ledger.sent[chaos_id] = digest
            try:
                result = await producer.send(Message(self.topic, body, properties={CHAOS_ID: chaos_id}))
            except MQError as exc:
                self.ledger.errors[type(exc).__name__] += 1
                await asyncio.sleep(IDLE_AFTER_ERROR_S)
                continue
            self.ledger.statuses[result.send_status.value] += 1
            if result.send_status is SendStatus.SEND_OK:
                self.ledger.acked[chaos_id] = Acked(
                    chaos_id, result.msg_id, result.offset_msg_id, result.message_queue.queue_id,
                    result.queue_offset, digest, store_addr_of(result.offset_msg_id), time.monotonic(),
                )  # fmt: skip

    async def wait_new_acks(self, count: int, deadline_s: float) -> None:
        """Until ``count`` more SEND_OKs than now were recorded; AssertionError after ``deadline_s``."""
        target = len(self.ledger.acked) + count
        await poll_until(lambda: len(self.ledger.acked) >= target, f"{count} more SEND_OK", deadline_s)


async def poll_until(check: Callable[[], object], what: str, deadline_s: float) -> None:
    """Poll ``check()`` (a value or an awaitable; truthy = done) every POLL_S; AssertionError naming ``what`` once
    ``deadline_s`` passed."""
    end = time.monotonic() + deadline_s
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline_s:.0f} s: {what}")
        await asyncio.sleep(POLL_S)


# --- read-back -----------------------------------------------------------------------------------------------------


async def pull_all(addr: str, topic: str, queues: int) -> dict[int, list[MessageExt]]:
    """Every message of every queue of ``topic`` on broker ``addr``, from queue offset 0, by queue id."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    out: dict[int, list[MessageExt]] = {}
    try:
        for queue_id in range(queues):
            messages: list[MessageExt] = []
            offset = 0
            while True:
                result = await client.pull_message(
                    addr, topic, queue_id, offset, PULL_BATCH, timeout_ms=PULL_TIMEOUT_MS
                )
                if result.status is not PullStatus.FOUND:
                    break
                messages.extend(result.messages)
                offset = result.next_begin_offset
            out[queue_id] = messages
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        await pool.close()
    return out


async def verify_on(addr: str, topic: str, queues: int, ledger: HaLedger) -> int:
    """Every message acknowledged so far is served by ``addr`` at its queue and queue offset, byte-identical (body
    digest, UNIQ_KEY, offset msg id); every served message was sent and is intact; queues are dense. Returns how
    many acknowledged messages were checked. Raises AssertionError naming the first difference."""
    acked = dict(ledger.acked)  # what was acknowledged before the read starts must all be there
    served = await pull_all(addr, topic, queues)
    at: dict[tuple[int, int], MessageExt] = {}
    for queue_id, messages in served.items():
        assert [m.queue_offset for m in messages] == list(range(len(messages))), f"queue {queue_id} not dense"
        for msg in messages:
            chaos_id = msg.properties.get(CHAOS_ID, "")
            assert chaos_id in ledger.sent, f"served a message never sent: {chaos_id!r}"
            assert hashlib.sha256(msg.body).digest() == ledger.sent[chaos_id], f"body of {chaos_id} differs"
            at[(queue_id, msg.queue_offset)] = msg
    for ack in acked.values():
        found = at.get((ack.queue_id, ack.queue_offset))
        assert found is not None, f"acknowledged message lost: {ack}"
        assert found.properties.get(CHAOS_ID) == ack.chaos_id, f"another message at {ack}"
        assert found.uniq_key == ack.msg_id
        assert found.offset_msg_id == ack.offset_msg_id
    return len(acked)
