"""Helpers shared by the broker store tests: store configs, messages, a crashing writer process (no gRPC here, so
the writer process starts fast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq_broker.store.config import FlushDiskType, MessageStoreConfig
from mq_broker.store.message import MessageExtBrokerInner
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.codec import host_to_bytes, iter_messages

STORE_HOST = host_to_bytes("127.0.0.1", 10911)
# (flush mode, CommitLog file size): tiny files roll every few messages, 1 MiB files hold them all.
STORE_MATRIX = [
    (FlushDiskType.SYNC_FLUSH, 2048),
    (FlushDiskType.SYNC_FLUSH, 1024 * 1024),
    (FlushDiskType.ASYNC_FLUSH, 2048),
    (FlushDiskType.ASYNC_FLUSH, 1024 * 1024),
]
MATRIX_IDS = [f"{mode.value}-{size}" for mode, size in STORE_MATRIX]


def store_config(
    root: Path, mode: FlushDiskType = FlushDiskType.ASYNC_FLUSH, file_size: int = 2048, **kw: Any
) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log_bytes=file_size,
        mapped_file_size_consume_queue_units=kw.pop("cq_units", 8),
        flush_disk_type=mode,
        flush_interval_commit_log_ms=kw.pop("flush_interval_commit_log_ms", 50),
        flush_interval_consume_queue_ms=kw.pop("flush_interval_consume_queue_ms", 50),
        **kw,
    )


def open_store(config: MessageStoreConfig) -> DefaultMessageStore:
    store = DefaultMessageStore(config, STORE_HOST)
    store.start()
    return store


def served(store: DefaultMessageStore, queue_id: int, topic: str = "TopicTest") -> list[tuple[int, bytes]]:
    """Every (queue offset, body) the store serves for one queue, pulled from offset 0."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    for _ in range(1000):
        result = store.get_messages(topic, queue_id, offset, 32)
        if not result.messages:
            break
        out.extend((m.queue_offset, m.body) for m in iter_messages(b"".join(result.messages)))
        offset = result.next_begin_offset
    return out


def message(
    i: int, topic: str = "TopicTest", queue_id: int | None = None, tag: str = "TagA", **props: str
) -> MessageExtBrokerInner:
    return MessageExtBrokerInner.build(
        topic=topic,
        queue_id=i % 2 if queue_id is None else queue_id,
        body=f"body-{i}".encode() * 3,
        properties={"TAGS": tag, "KEYS": f"k{i}", **props},
        born_timestamp_ms=1_700_000_000_000 + i,
        born_host=host_to_bytes("127.0.0.2", 5000),
    )


@dataclass(frozen=True)
class Stored:
    """What a writer process saw acknowledged: (queue id, queue offset, commit log offset, size, body)."""

    queue_id: int
    queue_offset: int
    wrote_offset: int
    wrote_bytes: int
    body: bytes


_CRASH_WRITER = r"""
import asyncio, json, os, sys
sys.path.insert(0, {testdir!r})
from pathlib import Path
from broker_testkit import store_config, open_store, message
from mq_broker.store.config import FlushDiskType

async def main():
    cfg = store_config(Path({root!r}), FlushDiskType({mode!r}), {file_size}, **{extra!r})
    store = open_store(cfg)
    out = []
    for start in range({first}, {first} + {count}, 5):
        results = await store.put_messages([message(i) for i in range(start, start + 5)])
        for i, r in zip(range(start, start + 5), results):
            assert r.is_ok, r
            out.append([i % 2, r.queue_offset, r.wrote_offset, r.wrote_bytes, message(i).body.hex()])
    print(json.dumps(out), flush=True)
    os._exit(9)  # no shutdown: abort stays, the flusher dies mid-flight

asyncio.run(main())
"""


def crash_writer(root: Path, mode: FlushDiskType, file_size: int, first: int, count: int, **extra: Any) -> list[Stored]:
    """Run a process that stores messages ``first .. first+count-1`` (5 a batch) then dies without shutdown.

    ``extra`` goes to :func:`store_config` in the child (plain values only).
    """
    code = _CRASH_WRITER.format(
        testdir=str(Path(__file__).parent),
        root=str(root),
        mode=mode.value,
        file_size=file_size,
        first=first,
        count=count,
        extra=extra,
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert proc.returncode == 9, proc.stderr
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return [Stored(q, qo, wo, wb, bytes.fromhex(b)) for q, qo, wo, wb, b in rows]
