"""The Python path of a MessageBatch put (native_append_enable off, or MQ_NO_EXTENSIONS=1) is all or none, as the
C path is: a batch goes whole into one CommitLog file, and a failed file roll leaves nothing of it stored,
dispatched or indexed while its result says failed."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from broker_testkit import STORE_HOST, message, store_config
from mq_broker.store.config import FlushDiskType
from mq_broker.store.message import MessageExtBatch, PutMessageStatus
from mq_broker.store.message_store import DefaultMessageStore
from mq_common.batch_codec import encode_batch
from mq_common.codec import encode_properties, host_to_bytes

FILE_BYTES = 4096
TOPIC = "TopicTest"


def open_python_store(root: Path) -> DefaultMessageStore:
    cfg = store_config(root, FlushDiskType.ASYNC_FLUSH, FILE_BYTES, cq_units=64, native_append_enable=False)
    store = DefaultMessageStore(cfg, STORE_HOST)
    store.start()
    return store


def batch_of(count: int, body_bytes: int = 300) -> MessageExtBatch:
    items = [(bytes([65 + i]) * body_bytes, encode_properties({"KEYS": f"batch-key-{i}"}), 0) for i in range(count)]
    return MessageExtBatch(
        topic=TOPIC,
        queue_id=0,
        body=encode_batch(items),
        properties_string="",
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        born_host=host_to_bytes("127.0.0.2", 5000),
    )


async def fill_first_file(store: DefaultMessageStore, leave_bytes: int) -> None:
    """Single messages on queue 0 until about ``leave_bytes`` are left in the first CommitLog file."""
    i = 0
    while FILE_BYTES - store.commit_log.max_offset > leave_bytes:
        [result] = await store.put_messages([message(i, queue_id=0)])
        assert result.status is PutMessageStatus.PUT_OK
        i += 1


async def test_a_failed_roll_mid_batch_stores_nothing_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_python_store(tmp_path)
    try:
        await fill_first_file(store, leave_bytes=800)  # room for one or two of the batch's ~400-byte records
        queue_before = store.get_max_offset_in_queue(TOPIC, 0)
        files_before = len(store.commit_log.mapped_file_queue.mapped_files)

        def broken_roll(start_offset: int = 0) -> object:
            raise OSError(errno.EIO, "injected: the next CommitLog file cannot be created")

        monkeypatch.setattr(store.commit_log.mapped_file_queue, "create_next", broken_roll)
        result = await store.put_message_batch(batch_of(5))

        assert result.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        assert "injected" in result.remark
        assert store.get_max_offset_in_queue(TOPIC, 0) == queue_before
        assert len(store.commit_log.mapped_file_queue.mapped_files) == files_before
        assert store.query_message(TOPIC, "batch-key-0", 10, 0, 2**62).messages == ()
        commit_log = b"".join(p.read_bytes() for p in sorted((tmp_path / "commitlog").iterdir()))
        assert b"A" * 300 not in commit_log
    finally:
        store.shutdown()


async def test_a_batch_that_does_not_fit_goes_whole_to_the_next_file(tmp_path: Path) -> None:
    store = open_python_store(tmp_path)
    try:
        await fill_first_file(store, leave_bytes=800)
        first = store.get_max_offset_in_queue(TOPIC, 0)
        result = await store.put_message_batch(batch_of(5))

        assert result.status is PutMessageStatus.PUT_OK
        assert (result.queue_offset, result.msg_num) == (first, 5)
        assert result.wrote_offset == FILE_BYTES  # the first record opens the second file
        offsets = [int(msg_id[-16:], 16) for msg_id in result.msg_id.split(",")]
        assert all(FILE_BYTES <= offset < 2 * FILE_BYTES for offset in offsets)
        assert store.get_max_offset_in_queue(TOPIC, 0) == first + 5
    finally:
        store.shutdown()
