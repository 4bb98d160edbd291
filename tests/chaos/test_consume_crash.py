"""kill -9 proof for consumption: a real ``mqbroker`` takes sends from 8 producers while two consumer groups read
the topic, one pulling with committed offsets (the broker's ConsumerOffsetManager), one with POP (receive, then
ack). The broker is SIGKILLed at a random moment and restarted on the same store, ``MQ_CHAOS_CONSUME_ROUNDS``
times (default 3; ``make chaos``: 10); the consumers carry on against the restarted broker, the pull consumer from the
offsets the broker reloaded, as a restarted RocketMQ consumer does.

After the last round the consumers drain the topic (and, for POP, wait out the invisible time so in-flight messages
are revived onto ``%RETRY%<group>``). Then: every acknowledged message was delivered to EACH group at least once;
nothing never sent was delivered; the redelivered counts are reported; and for the pull group, every offset the
broker reloaded after a kill is at least the offset the consumer had committed one persist window (plus slack)
before the kill: what a SIGKILL can cost the pull group is bounded by ``flushConsumerOffsetInterval``.

The test talks to the broker with the mq.broker.v1 stubs directly (PullMessage with commit_offset,
QueryConsumerOffset, PopMessage, AckMessage), so it checks the broker, not a client library's retries.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from chaos_testkit import BrokerProcess, BrokerProcesses, broker_env
from mq.broker.v1 import broker_pb2, broker_pb2_grpc
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties, iter_messages
from mq_common.constants import MessageConst
from mq_common.errors import MQError
from mq_common.grpc_server import CHANNEL_OPTIONS
from mq_common.protocol import SendMessageRequestHeader, TopicConfig
from mq_common.response_code import ResponseCode

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(1800)]

TOPIC: Final = "ChaosConsumeTopic"
QUEUES: Final = 4
PRODUCERS: Final = 8
PULL_GROUP: Final = "chaos_pull_group"
POP_GROUP: Final = "chaos_pop_group"
POP_CONSUMERS: Final = 4
PULL_BATCH: Final = 32
POP_BATCH: Final = 16
SEND_TIMEOUT_MS: Final = 15_000
RPC_TIMEOUT_S: Final = 10.0
KILL_AFTER_S: Final = (1.0, 3.0)
MAX_SENDS_PER_PRODUCER: Final = 300
OFFSET_PERSIST_INTERVAL_MS: Final = 1_000
# A loaded 2-core machine may run a persist late: the bound allows this many intervals.
PERSIST_SLACK_INTERVALS: Final = 3
INVISIBLE_TIME_MS: Final = 3_000
DRAIN_DEADLINE_S: Final = 120.0


def chaos_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_CONSUME_ROUNDS", "3")))


@dataclass
class Ledger:
    """What was sent and acknowledged, and what each group received (UNIQ_KEY -> deliveries)."""

    sent: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    pulled: Counter[str] = field(default_factory=Counter)
    popped: Counter[str] = field(default_factory=Counter)
    # per queue: (monotonic time the broker answered, offset it committed) of every pull that committed
    commits: dict[int, list[tuple[float, int]]] = field(default_factory=lambda: {q: [] for q in range(QUEUES)})
    # per queue: the offset after the last message the pull consumer received (its position)
    positions: dict[int, int] = field(default_factory=dict)
    rewinds: list[int] = field(default_factory=list)


def request(uniq_key: str, queue_id: int, body: bytes) -> SendMessageRequestHeader:
    properties = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key, MessageConst.TAGS: "TagA"}
    return SendMessageRequestHeader(
        producer_group="chaos", topic=TOPIC, queue_id=queue_id, sys_flag=0, born_timestamp_ms=int(time.time() * 1000),
        flag=0, properties=encode_properties(properties), body=body, born_host="127.0.0.1:40000",
    )  # fmt: skip


async def producer(client: BrokerClient, addr: str, ledger: Ledger, rng: random.Random, name: str) -> None:
    """Send batches until the broker dies or MAX_SENDS_PER_PRODUCER calls."""
    for seq in range(MAX_SENDS_PER_PRODUCER):
        keys = [f"{name}-{seq}-{i}" for i in range(rng.choice([1, 4, 16]))]
        ledger.sent.update(keys)
        try:
            replies = await client.send_batch(
                addr, [request(k, rng.randrange(QUEUES), rng.randbytes(rng.randint(1, 2048))) for k in keys],
                SEND_TIMEOUT_MS,
            )  # fmt: skip
        except MQError:
            return
        ledger.acked.update(k for k, r in zip(keys, replies, strict=True) if r.code == ResponseCode.SUCCESS)
        await asyncio.sleep(0)


async def committed_offset(stub: Any, queue_id: int) -> int:
    reply = await stub.QueryConsumerOffset(
        broker_pb2.QueryConsumerOffsetRequest(consumer_group=PULL_GROUP, topic=TOPIC, queue_id=queue_id),
        timeout=RPC_TIMEOUT_S,
    )
    if reply.code == ResponseCode.QUERY_NOT_FOUND:
        return 0
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return int(reply.offset)


async def pull_consumer(stub: Any, ledger: Ledger, queue_id: int, stop: asyncio.Event) -> None:
    """Pull one queue from the broker's committed offset, committing as it goes, until ``stop`` or the broker
    goes away; returns quietly on a transport error."""
    try:
        offset = await committed_offset(stub, queue_id)
        while not stop.is_set():
            reply = await stub.PullMessage(
                broker_pb2.PullMessageRequest(
                    consumer_group=PULL_GROUP, topic=TOPIC, queue_id=queue_id, queue_offset=offset,
                    max_msg_nums=PULL_BATCH, commit_offset=offset, suspend_timeout_ms=1_000,
                ),
                timeout=RPC_TIMEOUT_S,
            )  # fmt: skip
            ledger.commits[queue_id].append((time.monotonic(), offset))
            if reply.code == ResponseCode.SUCCESS:
                for message in iter_messages(reply.message_bytes):
                    assert message.uniq_key is not None
                    ledger.pulled[message.uniq_key] += 1
                offset = reply.next_begin_offset
                ledger.positions[queue_id] = offset
            elif reply.code == ResponseCode.PULL_OFFSET_MOVED:
                offset = reply.next_begin_offset
    except grpc.aio.AioRpcError:
        return


async def pop_consumer(stub: Any, ledger: Ledger, rng: random.Random, stop: asyncio.Event) -> None:
    """Pop and ack until ``stop`` or the broker goes away; one in five receives is not acknowledged at all
    (a consumer that crashed), so revive must redeliver those."""
    try:
        while not stop.is_set():
            reply = await stub.PopMessage(
                broker_pb2.PopMessageRequest(
                    consumer_group=POP_GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=POP_BATCH,
                    invisible_time_ms=INVISIBLE_TIME_MS, poll_time_ms=1_000, init_mode=1,
                ),
                timeout=RPC_TIMEOUT_S,
            )  # fmt: skip
            if not reply.messages:
                continue
            for popped in reply.messages:
                for message in iter_messages(popped.message):
                    assert message.uniq_key is not None
                    ledger.popped[message.uniq_key] += 1
            if rng.random() < 0.2:
                continue
            handles = [m.receipt_handle for m in reply.messages]
            await stub.AckMessage(
                broker_pb2.AckMessageRequest(consumer_group=POP_GROUP, topic=TOPIC, receipt_handles=handles),
                timeout=RPC_TIMEOUT_S,
            )
    except grpc.aio.AioRpcError:
        return


async def consumers(stub: Any, ledger: Ledger, rng: random.Random, stop: asyncio.Event) -> list[asyncio.Task[None]]:
    pulls = [asyncio.create_task(pull_consumer(stub, ledger, q, stop)) for q in range(QUEUES)]
    pops = [asyncio.create_task(pop_consumer(stub, ledger, random.Random(rng.random()), stop)) for _ in range(4)]
    return pulls + pops


async def run_round(broker: BrokerProcess, ledger: Ledger, rng: random.Random, round_no: int) -> float:
    """Produce and consume, then SIGKILL the broker; returns the monotonic time of the kill."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    channel = grpc.aio.insecure_channel(broker.addr, options=CHANNEL_OPTIONS)
    stop = asyncio.Event()
    try:
        if round_no == 0:
            await client.create_topic(broker.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        stub = broker_pb2_grpc.BrokerStub(channel)
        readers = await consumers(stub, ledger, rng, stop)
        producers = [
            asyncio.create_task(producer(client, broker.addr, ledger, random.Random(rng.random()), f"r{round_no}p{i}"))
            for i in range(PRODUCERS)
        ]
        await asyncio.sleep(rng.uniform(*KILL_AFTER_S))
        killed_at = time.monotonic()
        broker.kill()
        await asyncio.wait_for(asyncio.gather(*producers, *readers), timeout=SEND_TIMEOUT_MS / 1000 + 30)
        return killed_at
    finally:
        stop.set()
        await channel.close()
        await client.close()
        await pool.close()


async def check_offsets_reloaded(broker: BrokerProcess, ledger: Ledger, killed_at: float) -> None:
    """Each queue's reloaded offset is >= what was committed one persist window (plus slack) before the kill."""
    window_s = OFFSET_PERSIST_INTERVAL_MS * PERSIST_SLACK_INTERVALS / 1000
    async with grpc.aio.insecure_channel(broker.addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        for queue_id, commits in ledger.commits.items():
            reloaded = await committed_offset(stub, queue_id)
            durable = max((o for t, o in commits if t <= killed_at - window_s), default=0)
            assert reloaded >= durable, f"queue {queue_id}: reloaded {reloaded} < committed {durable} before the window"
            ledger.rewinds.append(max(0, ledger.positions.get(queue_id, 0) - reloaded))


async def drain(broker: BrokerProcess, ledger: Ledger) -> None:
    """Consume until both groups hold every acknowledged message (POP in-flight ones come back after the invisible
    time, through %RETRY%<group>) or DRAIN_DEADLINE_S passes."""
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(broker.addr, options=CHANNEL_OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        readers = [asyncio.create_task(pull_consumer(stub, ledger, q, stop)) for q in range(QUEUES)]
        readers += [asyncio.create_task(pop_drainer(stub, ledger, stop)) for _ in range(2)]
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while time.monotonic() < deadline:
            if ledger.acked <= ledger.pulled.keys() and ledger.acked <= ledger.popped.keys():
                break
            await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*readers)


async def pop_drainer(stub: Any, ledger: Ledger, stop: asyncio.Event) -> None:
    """Pop and always ack."""
    while not stop.is_set():
        reply = await stub.PopMessage(
            broker_pb2.PopMessageRequest(
                consumer_group=POP_GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=POP_BATCH,
                invisible_time_ms=INVISIBLE_TIME_MS * 10, poll_time_ms=1_000, init_mode=1,
            ),
            timeout=RPC_TIMEOUT_S,
        )  # fmt: skip
        for popped in reply.messages:
            for message in iter_messages(popped.message):
                assert message.uniq_key is not None
                ledger.popped[message.uniq_key] += 1
        if reply.messages:
            await stub.AckMessage(
                broker_pb2.AckMessageRequest(
                    consumer_group=POP_GROUP, topic=TOPIC, receipt_handles=[m.receipt_handle for m in reply.messages]
                ),
                timeout=RPC_TIMEOUT_S,
            )


async def test_sigkill_while_consuming_loses_no_acknowledged_message(brokers: BrokerProcesses, tmp_path: Path) -> None:
    rng = random.Random(f"consume-{os.environ.get('MQ_CHAOS_SEED', '')}")
    env = broker_env(
        tmp_path / "store", 1024 * 1024, "SYNC_FLUSH",
        MQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS=str(OFFSET_PERSIST_INTERVAL_MS),
        MQ_BROKER_AUTO_CREATE_SUBSCRIPTION_GROUP="true",
    )  # fmt: skip
    ledger = Ledger()
    broker = brokers.start(env)
    for round_no in range(chaos_rounds()):
        before = len(ledger.acked)
        killed_at = await run_round(broker, ledger, rng, round_no)
        assert len(ledger.acked) > before, f"round {round_no}: nothing acknowledged before the kill"
        broker = brokers.start(env)
        await check_offsets_reloaded(broker, ledger, killed_at)
    await drain(broker, ledger)
    never_sent = (ledger.pulled.keys() | ledger.popped.keys()) - ledger.sent
    assert not never_sent, f"delivered but never sent: {sorted(never_sent)[:5]}"
    missing_pull = ledger.acked - ledger.pulled.keys()
    missing_pop = ledger.acked - ledger.popped.keys()
    assert not missing_pull, (
        f"pull group never got {len(missing_pull)} acknowledged messages: {sorted(missing_pull)[:5]}"
    )
    assert not missing_pop, f"POP group never got {len(missing_pop)} acknowledged messages: {sorted(missing_pop)[:5]}"
    redelivered_pull = sum(n - 1 for n in ledger.pulled.values())
    redelivered_pop = sum(n - 1 for n in ledger.popped.values())
    print(
        f"\nconsume chaos: {chaos_rounds()} rounds, {len(ledger.acked)} acknowledged, "
        f"pull group redelivered {redelivered_pull} (offset rewinds after kills {sum(ledger.rewinds)}), "
        f"POP group redelivered {redelivered_pop}"
    )
    # A pull redelivery is a message between the offset the broker reloaded and the consumer's position at the
    # kill: bounded by what the persist window lost.
    assert redelivered_pull <= sum(ledger.rewinds), (redelivered_pull, ledger.rewinds)
