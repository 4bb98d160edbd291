"""DefaultMessageStore.truncate_files on real files (small mapped files): a cut in the middle of a file, at a file
boundary and across several files, with several topics and queues; the refusals; and a kill -9-like stop right
after a cut recovering to the same state."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_testkit import message, open_store, served, store_config
from mq_broker.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from mq_broker.store.mapped_file import offset_to_file_name
from mq_broker.store.message import GetMessageStatus, MessageExtBrokerInner, PutMessageResult
from mq_broker.store.message_store import DefaultMessageStore
from mq_broker.store.truncation import TruncateRefusedError

FILE_SIZE = 2048
QUEUES = [("TopicA", 0), ("TopicA", 1), ("TopicB", 0), ("TopicB", 2)]


@dataclass(frozen=True)
class Put:
    topic: str
    queue_id: int
    queue_offset: int
    wrote_offset: int
    wrote_bytes: int
    body: bytes


def slave_config(root: Path, **kw: Any) -> MessageStoreConfig:
    """A SLAVE's store of tiny files whose flusher writes every round (no dirty-page threshold)."""
    return store_config(
        root, file_size=FILE_SIZE, broker_role=BrokerRole.SLAVE, cq_units=4, flush_commit_log_least_pages=0, **kw
    )


async def fill(store: DefaultMessageStore, count: int) -> list[Put]:
    """Store ``count`` messages round-robin over QUEUES (what replication would have written to a slave): a SLAVE
    store takes them as a master for the time of the fill (a slave refuses client puts)."""
    puts: list[Put] = []
    for i in range(count):
        topic, queue_id = QUEUES[i % len(QUEUES)]
        msg = message(i, topic=topic, queue_id=queue_id)
        (r,) = await fill_messages(store, [msg])
        assert r.is_ok, r
        puts.append(Put(topic, queue_id, r.queue_offset, r.wrote_offset, r.wrote_bytes, msg.body))
    return puts


async def fill_messages(store: DefaultMessageStore, batch: list[MessageExtBrokerInner]) -> list[PutMessageResult]:
    """put_messages on a store taking the puts as a master for the time of the call."""
    role, store.broker_role = store.broker_role, BrokerRole.ASYNC_MASTER
    try:
        return await store.put_messages(batch)
    finally:
        store.broker_role = role


def commit_log_sha256(config: MessageStoreConfig, end: int) -> str:
    """sha256 of the CommitLog bytes [0, end) read through plain file I/O."""
    digest = hashlib.sha256()
    for start in range(0, end, FILE_SIZE):
        with (config.commit_log_dir / offset_to_file_name(start)).open("rb") as f:
            digest.update(f.read(min(FILE_SIZE, end - start)))
    return digest.hexdigest()


def expected_after(puts: list[Put], cut: int, topic: str, queue_id: int) -> list[tuple[int, bytes]]:
    return [
        (p.queue_offset, p.body) for p in puts if (p.topic, p.queue_id) == (topic, queue_id) and p.wrote_offset < cut
    ]


def check_cut_state(store: DefaultMessageStore, puts: list[Put], cut: int) -> None:
    """The store holds exactly the messages stored below ``cut`` and nothing past it."""
    assert store.commit_log.max_offset == cut
    for topic, queue_id in QUEUES:
        kept = expected_after(puts, cut, topic, queue_id)
        assert store.get_max_offset_in_queue(topic, queue_id) == len(kept)
        assert served(store, queue_id, topic) == kept
        status = store.get_messages(topic, queue_id, len(kept) + 1, 4).status
        assert status in (GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
    for p in puts:
        found = store.select_one_message_by_offset(p.wrote_offset)
        assert (found is not None) == (p.wrote_offset < cut)
    assert not [f for f in store.config.commit_log_dir.iterdir() if int(f.name) > cut]


def cut_index(puts: list[Put], where: str) -> int:
    """The index of the first message cut away: in the middle of a file, the first of a file, or early on (the
    store then loses several files)."""
    starts = [i for i, p in enumerate(puts) if p.wrote_offset % FILE_SIZE == 0 and i > len(puts) // 2]
    if where == "file-boundary":
        return starts[0]
    if where == "many-files":
        return 2
    middle = [i for i, p in enumerate(puts) if i > len(puts) // 2 and p.wrote_offset % FILE_SIZE > 0]
    return middle[1]


@pytest.mark.parametrize("mode", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize("where", ["middle-of-file", "file-boundary", "many-files"])
async def test_truncate_keeps_the_prefix_and_the_next_put_continues_from_the_cut(
    tmp_path: Path, where: str, mode: FlushDiskType
) -> None:
    config = slave_config(tmp_path, mode=mode, message_index_enable=True)
    store = open_store(config)
    try:
        puts = await fill(store, 60)
        first_cut = puts[cut_index(puts, where)]
        cut = first_cut.wrote_offset
        assert store.commit_log.max_offset > cut + FILE_SIZE  # several files past the cut
        before = commit_log_sha256(config, cut)
        store.epoch_file.append(1, 0)
        store.epoch_file.append(2, puts[1].wrote_offset)
        store.epoch_file.append(3, cut)
        store.epoch_file.append(4, puts[-1].wrote_offset)

        assert await asyncio.to_thread(store.truncate_files, cut)

        check_cut_state(store, puts, cut)
        assert commit_log_sha256(config, cut) == before
        cut_file = config.commit_log_dir / offset_to_file_name(cut - cut % FILE_SIZE)
        assert cut_file.read_bytes()[cut % FILE_SIZE :].count(0) == FILE_SIZE - cut % FILE_SIZE  # no stale bytes
        assert [(e.epoch, e.start_offset) for e in store.epoch_file.entries()] == [(1, 0), (2, puts[1].wrote_offset)]
        assert store.checkpoint is not None
        assert store.index_service.last_indexed_phy_offset < cut  # the entries of the cut messages are gone
        assert store.checkpoint.dispatch_flushed_offset <= cut
        kept_key = f"k{cut_index(puts, where) - 1}"
        assert (
            store.query_message("TopicA", kept_key, 4, 0, 2**62).message_count
            + store.query_message("TopicB", kept_key, 4, 0, 2**62).message_count
            == 1
        )
        for topic in ("TopicA", "TopicB"):
            assert store.query_message(topic, f"k{len(puts) - 1}", 4, 0, 2**62).message_count == 0

        again = message(cut_index(puts, where), topic=first_cut.topic, queue_id=first_cut.queue_id)
        (r,) = await fill_messages(store, [again])
        assert r.is_ok
        assert r.wrote_offset == cut
        assert r.queue_offset == first_cut.queue_offset
        assert served(store, first_cut.queue_id, first_cut.topic)[-1] == (first_cut.queue_offset, again.body)
        assert store.query_message(first_cut.topic, f"k{cut_index(puts, where)}", 4, 0, 2**62).message_count == 1
        checkpoint = store.checkpoint
        for _ in range(600):  # the restarted flusher makes the new record durable (30 s at most)
            if checkpoint.confirm_phy_offset >= cut + r.wrote_bytes:
                break
            await asyncio.sleep(0.05)
        assert checkpoint.confirm_phy_offset >= cut + r.wrote_bytes
        assert store.failure is None
    finally:
        store.shutdown()
    reopened = open_store(config)
    try:
        assert reopened.last_exit_ok
        assert reopened.commit_log.max_offset == cut + first_cut.wrote_bytes
        assert served(reopened, first_cut.queue_id, first_cut.topic)[-1] == (first_cut.queue_offset, again.body)
    finally:
        reopened.shutdown()


async def test_truncate_refusals_change_nothing(tmp_path: Path) -> None:
    master = open_store(store_config(tmp_path / "master", file_size=FILE_SIZE))
    try:
        puts = await fill(master, 6)
        with pytest.raises(TruncateRefusedError, match="takes writes"):
            await asyncio.to_thread(master.truncate_files, puts[3].wrote_offset)
        assert master.commit_log.max_offset == puts[-1].wrote_offset + puts[-1].wrote_bytes
    finally:
        master.shutdown()
    slave = open_store(slave_config(tmp_path / "slave"))
    try:
        puts = await fill(slave, 6)
        end = slave.commit_log.max_offset
        with pytest.raises(TruncateRefusedError, match="record start"):
            await asyncio.to_thread(slave.truncate_files, puts[3].wrote_offset + 1)
        assert not await asyncio.to_thread(slave.truncate_files, end)
        assert slave.commit_log.max_offset == end
        assert served(slave, QUEUES[0][1], QUEUES[0][0]) == expected_after(puts, end, *QUEUES[0])
    finally:
        slave.shutdown()
    with pytest.raises(TruncateRefusedError, match="shut down"):
        slave.truncate_files(0)


_CRASH_AFTER_TRUNCATE = r"""
import asyncio, json, os, sys
sys.path.insert(0, {testdir!r})
from pathlib import Path
import test_broker_truncate as t

async def main():
    config = t.slave_config(Path({root!r}))
    store = t.open_store(config)
    puts = await t.fill(store, 40)
    cut = puts[17].wrote_offset
    store.epoch_file.append(1, 0)
    store.epoch_file.append(2, puts[30].wrote_offset)
    await asyncio.to_thread(store.truncate_files, cut)
    state = t.state(store)
    print(json.dumps({{"cut": cut, "state": state}}), flush=True)
    os._exit(9)  # no shutdown: abort stays, the flusher dies mid-flight

asyncio.run(main())
"""


def state(store: DefaultMessageStore) -> dict[str, Any]:
    """What a reader sees: max offsets, every served message, the CommitLog bytes, the epoch history."""
    end = store.commit_log.max_offset
    return {
        "max_offset": end,
        "sha256": commit_log_sha256(store.config, end),
        "queues": {f"{t}-{q}": [store.get_max_offset_in_queue(t, q), served_hex(store, t, q)] for t, q in QUEUES},
        "epochs": [[e.epoch, e.start_offset] for e in store.epoch_file.entries()],
    }


def served_hex(store: DefaultMessageStore, topic: str, queue_id: int) -> list[list[Any]]:
    return [[offset, body.hex()] for offset, body in served(store, queue_id, topic)]


async def test_kill_after_truncate_recovers_the_same_state(tmp_path: Path) -> None:
    code = _CRASH_AFTER_TRUNCATE.format(testdir=str(Path(__file__).parent), root=str(tmp_path))
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=False,
    )
    assert proc.returncode == 9, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    config = slave_config(tmp_path)
    assert config.abort_path.exists()
    store = open_store(config)
    try:
        assert not store.last_exit_ok
        assert state(store) == seen["state"]
        assert seen["state"]["max_offset"] == seen["cut"]
        assert seen["state"]["epochs"] == [[1, 0]]
        (r,) = await fill_messages(store, [message(17, topic=QUEUES[1][0], queue_id=QUEUES[1][1])])
        assert r.wrote_offset == seen["cut"]
    finally:
        store.shutdown()
