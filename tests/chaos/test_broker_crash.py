"""kill -9 proof: a real ``mqbroker`` taking sends from 32 concurrent senders is SIGKILLed at a random moment,
restarted on the same store, and read back through PullMessage.

After every restart: each message acknowledged SUCCESS before the kill is served byte-identical (topic, body,
properties incl. UNIQ_KEY, flag, born timestamp) at the queue id and queue offset its acknowledgement named,
and a sample of them is found by UNIQ_KEY (QueryMessageByUniqueKey);
nothing that was never sent appears; every queue's offsets are dense (0..max-1); a message in flight at the kill
may be missing but, if present, is intact; a message seen after one restart stays in every later one (a SIGKILL
keeps the page cache, so recovery must never lose what it once served). Rounds continue on the same store, so
later rounds also recover recovered stores. ``MQ_CHAOS_ROUNDS`` sets the rounds (default 3; ``make chaos``: 20).
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest
from chaos_testkit import BrokerProcess, BrokerProcesses, broker_env, pull_queue
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt, encode_properties
from mq_common.constants import MessageConst
from mq_common.errors import MQError
from mq_common.protocol import SendMessageRequestHeader, SendMessageResponseHeader, TopicConfig
from mq_common.response_code import ResponseCode

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(1800)]

TOPIC: Final = "ChaosTopic"
QUEUES: Final = 4
SENDERS: Final = 32
SEND_TIMEOUT_MS: Final = 15_000
KILL_AFTER_S: Final = (0.3, 1.5)
MAX_SENDS_PER_SENDER: Final = 400  # bounds one round even on a fast machine
CLUSTER: Final = "DefaultCluster"
UNIQ_KEY_SAMPLE: Final = 64
# (flush mode, CommitLog file size): 64 KiB files roll every few dozen messages, 1 MiB files every few hundred.
MATRIX: Final = [
    ("SYNC_FLUSH", 64 * 1024),
    ("SYNC_FLUSH", 1024 * 1024),
    ("ASYNC_FLUSH", 64 * 1024),
    ("ASYNC_FLUSH", 1024 * 1024),
]


def chaos_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_ROUNDS", "3")))


@dataclass(frozen=True, slots=True)
class Sent:
    """One message as a sender built it."""

    uniq_key: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    born_timestamp_ms: int
    flag: int


@dataclass(frozen=True, slots=True)
class Ack:
    """What the broker acknowledged (code SUCCESS) for one message."""

    queue_id: int
    queue_offset: int
    msg_id: str


@dataclass
class Ledger:
    """Everything ever sent to the store, acknowledged, and seen after a restart (all rounds)."""

    sent: dict[str, Sent] = field(default_factory=dict)
    acked: dict[str, Ack] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    codes: dict[int, int] = field(default_factory=dict)


def random_body(rng: random.Random, file_size: int) -> bytes:
    """Mostly small bodies; one in eight large enough (up to a third of a file) to force END_OF_FILE rolls."""
    large = rng.random() < 0.125
    return rng.randbytes(rng.randint(2048, min(file_size // 3, 128 * 1024)) if large else rng.randint(1, 2048))


def make_message(rng: random.Random, sender: int, seq: int, round_no: int, file_size: int) -> Sent:
    uniq_key = f"CHAOS{round_no:03d}{sender:03d}{seq:06d}{rng.getrandbits(32):08X}"
    properties = {
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
        MessageConst.TAGS: rng.choice(["TagA", "TagB", "标签"]),
        MessageConst.KEYS: f"k{sender}-{seq}",
        "chaos-prop": "x" * rng.randint(0, 64),
    }
    return Sent(
        uniq_key=uniq_key,
        queue_id=rng.randrange(QUEUES),
        body=random_body(rng, file_size),
        properties=properties,
        born_timestamp_ms=1_700_000_000_000 + rng.randrange(10**9),
        flag=rng.randrange(1 << 16),
    )


def to_request(sent: Sent) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="chaos",
        topic=TOPIC,
        queue_id=sent.queue_id,
        sys_flag=0,
        born_timestamp_ms=sent.born_timestamp_ms,
        flag=sent.flag,
        properties=encode_properties(sent.properties),
        body=sent.body,
        born_host="127.0.0.1:40000",
    )


def record(ledger: Ledger, sent: Sent, response: SendMessageResponseHeader) -> None:
    ledger.codes[response.code] = ledger.codes.get(response.code, 0) + 1
    if response.code == ResponseCode.SUCCESS:
        assert response.queue_id == sent.queue_id
        ledger.acked[sent.uniq_key] = Ack(response.queue_id, response.queue_offset, response.msg_id)


async def sender(
    client: BrokerClient, addr: str, ledger: Ledger, seed: int, sender_no: int, round_no: int, file_size: int
) -> None:
    """Send until the broker dies (a transport error) or MAX_SENDS_PER_SENDER calls; singles and batches."""
    rng = random.Random(seed)
    for seq in range(MAX_SENDS_PER_SENDER):
        count = rng.choice([1, 1, 2, 4, 8, 16])
        batch = [make_message(rng, sender_no, seq * 16 + i, round_no, file_size) for i in range(count)]
        for sent in batch:
            ledger.sent[sent.uniq_key] = sent  # in flight from here on: may or may not survive the kill
        try:
            if count == 1 and rng.random() < 0.5:
                responses = [await client.send_message(addr, to_request(batch[0]), SEND_TIMEOUT_MS)]
            else:
                responses = await client.send_batch(addr, [to_request(s) for s in batch], SEND_TIMEOUT_MS)
        except MQError:
            return  # the broker is gone
        for sent, response in zip(batch, responses, strict=True):
            record(ledger, sent, response)


async def send_and_kill(broker: BrokerProcess, ledger: Ledger, rng: random.Random, round_no: int, size: int) -> None:
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        if round_no == 0:
            await client.create_topic(broker.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
        tasks = [
            asyncio.create_task(sender(client, broker.addr, ledger, rng.getrandbits(64), i, round_no, size))
            for i in range(SENDERS)
        ]
        await asyncio.sleep(rng.uniform(*KILL_AFTER_S))
        broker.kill()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=SEND_TIMEOUT_MS / 1000 + 10)
    finally:
        await client.close()  # ends the send streams
        await pool.close()


def check_message(msg: MessageExt, sent: Sent) -> None:
    """Byte-identical: topic, body, flag, born timestamp, queue id; properties = sent + the broker's CLUSTER."""
    assert msg.topic == TOPIC
    assert msg.body == sent.body, sent.uniq_key
    assert msg.flag == sent.flag
    assert msg.born_timestamp_ms == sent.born_timestamp_ms
    assert msg.queue_id == sent.queue_id
    assert msg.properties == {**sent.properties, MessageConst.CLUSTER: CLUSTER}


async def read_back(broker: BrokerProcess, ledger: Ledger) -> dict[str, MessageExt]:
    """Pull every queue; check density, that nothing unsent appears and every served message is intact."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    served: dict[str, MessageExt] = {}
    try:
        for queue_id in range(QUEUES):
            messages, min_offset, max_offset = await pull_queue(client, broker.addr, TOPIC, queue_id)
            assert min_offset == 0
            assert [m.queue_offset for m in messages] == list(range(max_offset)), f"queue {queue_id} not dense"
            for msg in messages:
                key = msg.uniq_key
                assert key is not None
                assert key in ledger.sent, f"never sent: {key}"
                assert key not in served, f"served twice: {key}"
                check_message(msg, ledger.sent[key])
                served[key] = msg
    finally:
        await pool.close()
    return served


def check_survivors(ledger: Ledger, served: dict[str, MessageExt]) -> None:
    for key, ack in ledger.acked.items():
        msg = served.get(key)
        assert msg is not None, f"acknowledged message lost: {key} {ack}"
        assert (msg.queue_id, msg.queue_offset) == (ack.queue_id, ack.queue_offset)
        assert msg.offset_msg_id == ack.msg_id
    lost = ledger.seen - served.keys()
    assert not lost, f"{len(lost)} messages served after an earlier restart are gone: {sorted(lost)[:5]}"
    ledger.seen |= served.keys()


async def check_by_uniq_key(
    broker: BrokerProcess, ledger: Ledger, served: dict[str, MessageExt], rng: random.Random
) -> None:
    """A sample of the acknowledged messages, looked up by UNIQ_KEY (the IndexFile), is the one pulled."""
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        for key in rng.sample(sorted(ledger.acked), min(UNIQ_KEY_SAMPLE, len(ledger.acked))):
            found = await client.query_message_by_unique_key(broker.addr, TOPIC, key)
            assert [m.commit_log_offset for m in found] == [served[key].commit_log_offset], key
            check_message(found[0], ledger.sent[key])
    finally:
        await pool.close()


@pytest.mark.parametrize(("flush_disk_type", "file_size"), MATRIX, ids=[f"{m}-{s // 1024}k" for m, s in MATRIX])
async def test_sigkill_keeps_every_acknowledged_message(
    brokers: BrokerProcesses, tmp_path: Path, flush_disk_type: str, file_size: int
) -> None:
    rng = random.Random(f"{flush_disk_type}-{file_size}-{os.environ.get('MQ_CHAOS_SEED', '')}")
    env = broker_env(tmp_path / "store", file_size, flush_disk_type)
    ledger = Ledger()
    broker = brokers.start(env)
    for round_no in range(chaos_rounds()):
        before = len(ledger.acked)
        await send_and_kill(broker, ledger, rng, round_no, file_size)
        assert len(ledger.acked) > before, f"round {round_no}: nothing acknowledged before the kill"
        assert set(ledger.codes) <= {ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT}, ledger.codes
        broker = brokers.start(env)
        started = broker.events()
        assert any(e.get("event") == "started" and e.get("last_exit_ok") is False for e in started)
        served = await read_back(broker, ledger)
        check_survivors(ledger, served)
        await check_by_uniq_key(broker, ledger, served, rng)
    assert len(list((tmp_path / "store" / "commitlog").iterdir())) > 1  # the log rolled at least once
