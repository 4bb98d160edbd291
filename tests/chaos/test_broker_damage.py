"""Damage on a real ``mqbroker``'s CommitLog, done with plain file I/O while the broker is down:

- the last file truncated mid-message (shorter than its preallocated size) and its tail overwritten with random
  bytes: the restarted broker serves every message before the damage, queue offsets stay dense, and the next
  send reuses the first lost queue offset;
- one bit flipped in the body of a flushed message of an older file (outside the tail recovery re-reads): a pull
  that reaches that message fails with a clear CRC error naming its offset (the client checks the body CRC; the
  broker serves the raw bytes as RocketMQ does), ViewMessageById answers SYSTEM_ERROR naming the CRC mismatch,
  and every other message is still served.

(Torn tails, zeroed CRCs and bit flips inside the re-read tail are covered in-process by
tests/broker/test_broker_recovery.py.)
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from chaos_testkit import BrokerProcess, BrokerProcesses, broker_env, closed_port, pull_queue
from mq_broker.store.mapped_file import offset_to_file_name
from mq_client.broker_client import BrokerClient
from mq_common.channels import ChannelPool
from mq_common.codec import MessageExt, encode_properties
from mq_common.constants import MessageConst
from mq_common.errors import MQClientError, MQError
from mq_common.message_id import create_offset_msg_id
from mq_common.protocol import SendMessageRequestHeader, TopicConfig
from mq_common.response_code import ResponseCode

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

TOPIC: Final = "DamageTopic"
QUEUES: Final = 4
FILE_SIZE: Final = 64 * 1024
MESSAGES: Final = 240
SEND_TIMEOUT_MS: Final = 10_000


@dataclass(frozen=True, slots=True, order=True)
class Stored:
    """A message as served before the damage."""

    uniq_key: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    body: bytes


@pytest.fixture
async def client() -> AsyncIterator[BrokerClient]:
    pool = ChannelPool()
    client = BrokerClient(pool)
    try:
        yield client
    finally:
        await client.close()  # ends the send streams
        await pool.close()


def request(i: int, rng: random.Random) -> SendMessageRequestHeader:
    properties = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"DAMAGE{i:06d}", MessageConst.TAGS: "TagA"}
    return SendMessageRequestHeader(
        producer_group="damage",
        topic=TOPIC,
        queue_id=i % QUEUES,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000 + i,
        flag=0,
        properties=encode_properties(properties),
        body=rng.randbytes(rng.randint(100, 3000)),
    )


async def fill(client: BrokerClient, broker: BrokerProcess) -> list[Stored]:
    """Create the topic, send MESSAGES in batches of 8 (all must succeed), read everything back."""
    rng = random.Random(7)
    await client.create_topic(broker.addr, TopicConfig(TOPIC, QUEUES, QUEUES))
    for start in range(0, MESSAGES, 8):
        responses = await client.send_batch(broker.addr, [request(i, rng) for i in range(start, start + 8)], 10_000)
        assert all(r.code == ResponseCode.SUCCESS for r in responses), responses
    stored = [to_stored(m) for m in await served(client, broker)]
    assert len(stored) == MESSAGES
    return sorted(stored, key=lambda s: s.commit_log_offset)


def to_stored(msg: MessageExt) -> Stored:
    assert msg.uniq_key is not None
    return Stored(msg.uniq_key, msg.queue_id, msg.queue_offset, msg.commit_log_offset, msg.store_size, msg.body)


async def served(client: BrokerClient, broker: BrokerProcess) -> list[MessageExt]:
    """Every message of the topic; asserts dense queue offsets."""
    out: list[MessageExt] = []
    for queue_id in range(QUEUES):
        messages, min_offset, max_offset = await pull_queue(client, broker.addr, TOPIC, queue_id)
        assert min_offset == 0
        assert [m.queue_offset for m in messages] == list(range(max_offset))
        out += messages
    return out


def commit_log_file(store: Path, commit_log_offset: int) -> Path:
    return store / "commitlog" / offset_to_file_name(commit_log_offset - commit_log_offset % FILE_SIZE)


async def check_recovered(
    client: BrokerClient, broker: BrokerProcess, survivors: list[Stored], first_lost: Stored
) -> None:
    """Exactly ``survivors`` are served, intact; the next send to the lost message's queue reuses its offset."""
    assert sorted(to_stored(m) for m in await served(client, broker)) == sorted(survivors)
    rng = random.Random(99)
    (again,) = await client.send_batch(broker.addr, [request(first_lost.queue_id + 4000, rng)], SEND_TIMEOUT_MS)
    assert again.code == ResponseCode.SUCCESS
    assert again.queue_id == first_lost.queue_id
    assert again.queue_offset == first_lost.queue_offset


async def test_truncated_last_file_recovers_every_message_before_the_cut(
    brokers: BrokerProcesses, client: BrokerClient, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = broker_env(store, FILE_SIZE, "SYNC_FLUSH")
    stored = await fill(client, brokers.start(env))
    brokers.started[-1].kill()
    victim = stored[-3]
    path = commit_log_file(store, victim.commit_log_offset)
    os.truncate(path, victim.commit_log_offset % FILE_SIZE + victim.store_size // 2)  # the file ends mid-message

    broker = brokers.start(env)
    await check_recovered(client, broker, [s for s in stored if s.commit_log_offset < victim.commit_log_offset], victim)
    assert path.stat().st_size == FILE_SIZE  # preallocated again


async def test_random_bytes_over_the_tail_are_cut_off(
    brokers: BrokerProcesses, client: BrokerClient, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = broker_env(store, FILE_SIZE, "SYNC_FLUSH")
    stored = await fill(client, brokers.start(env))
    brokers.started[-1].kill()
    victim = stored[-4]
    path = commit_log_file(store, victim.commit_log_offset)
    start = victim.commit_log_offset % FILE_SIZE + victim.store_size // 3
    with path.open("r+b") as f:
        f.seek(start)
        f.write(random.Random(3).randbytes(FILE_SIZE - start))

    broker = brokers.start(env)
    await check_recovered(client, broker, [s for s in stored if s.commit_log_offset < victim.commit_log_offset], victim)


async def test_flipped_bit_in_a_flushed_message_is_a_crc_error_for_that_message_only(
    brokers: BrokerProcesses, client: BrokerClient, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    port = closed_port()  # the same port after the restart: offset message ids name it
    env = broker_env(store, FILE_SIZE, "SYNC_FLUSH", MQ_BROKER_LISTEN_PORT=str(port))
    stored = await fill(client, brokers.start(env))
    assert brokers.started[-1].terminate() == 0  # clean stop: everything flushed, the checkpoint is current
    victim = next(s for s in stored if s.commit_log_offset >= 1024)  # in the first file, far from the tail
    assert commit_log_file(store, stored[-1].commit_log_offset) != commit_log_file(store, victim.commit_log_offset)
    path = commit_log_file(store, victim.commit_log_offset)
    record_at = victim.commit_log_offset % FILE_SIZE
    raw = bytearray(path.read_bytes())
    body_at = raw.index(victim.body, record_at)
    raw[body_at + len(victim.body) // 2] ^= 0x04
    path.write_bytes(bytes(raw))

    broker = brokers.start(env)
    with pytest.raises(MQClientError, match=f"CRC mismatch at physical offset {victim.commit_log_offset}"):
        await client.pull_message(broker.addr, TOPIC, victim.queue_id, victim.queue_offset, 1)
    with pytest.raises(MQError, match="CRC") as by_id:
        await client.view_message_by_id(broker.addr, create_offset_msg_id("127.0.0.1", port, victim.commit_log_offset))
    assert by_id.value.code == ResponseCode.SYSTEM_ERROR
    others: list[Stored] = []
    for queue_id in range(QUEUES):
        last = max(s.queue_offset for s in stored if s.queue_id == queue_id)
        for offset in range(last + 1):
            if (queue_id, offset) == (victim.queue_id, victim.queue_offset):
                continue
            result = await client.pull_message(broker.addr, TOPIC, queue_id, offset, 1)
            others += [to_stored(m) for m in result.messages]
    assert sorted(others) == sorted(s for s in stored if s != victim)
    rng = random.Random(5)
    (again,) = await client.send_batch(broker.addr, [request(victim.queue_id + 8000, rng)], SEND_TIMEOUT_MS)
    assert again.code == ResponseCode.SUCCESS
