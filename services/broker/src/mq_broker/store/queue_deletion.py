"""Removing a deleted topic's consume queues from disk without racing the store's threads.

Used by DefaultMessageStore#delete_topics (mirrors DefaultMessageStore#deleteTopics). On the event loop the
topic's directory ``consumequeue/<topic>`` is renamed ``consumequeue/.<topic>.<ns>`` (a name no topic has: topics
have no '.'), so a topic sent to again at once gets a fresh directory; a worker thread then closes the queues'
files while holding the locks of the flusher and the clean service (neither touches a file being unmapped) and
removes the renamed directory. A directory left by a crash in between is removed at the next start.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from mq_common.logging import get_logger

from mq_broker.store.consume_queue import ConsumeQueue

log = get_logger("mq_broker.store.queue_deletion")

DELETED_QUEUE_DIR_PREFIX: Final = "."


def is_deleted_queue_dir(path: Path) -> bool:
    """A directory :func:`move_queue_dir_aside` made (to remove at start-up)."""
    return path.name.startswith(DELETED_QUEUE_DIR_PREFIX)


def move_queue_dir_aside(consume_queue_dir: Path, topic: str) -> Path | None:
    """Rename ``consume_queue_dir/topic`` aside; its new path, or None when there is none. A rename only (no
    data written); event loop. Raises OSError."""
    src = consume_queue_dir / topic
    if not topic or is_deleted_queue_dir(src) or not src.is_dir():
        return None
    dst = src.with_name(f"{DELETED_QUEUE_DIR_PREFIX}{topic}.{time.time_ns()}")
    os.rename(src, dst)
    return dst


def destroy_consume_queues(
    doomed: Sequence[ConsumeQueue], dirs: Sequence[Path], locks: Sequence[threading.Lock]
) -> None:
    """Close ``doomed`` while holding ``locks`` (the flusher's and the clean service's), then remove ``dirs``.
    Blocking: a worker thread. Failures are logged (the files then go with the process or at the next start)."""
    for lock in locks:
        lock.acquire()
    try:
        for cq in doomed:
            try:
                cq.close()
            except (BufferError, OSError) as exc:  # a reader pins a mapping
                log.warning("consume_queue_close_failed", topic=cq.topic, queue_id=cq.queue_id, error=repr(exc))
    finally:
        for lock in reversed(locks):
            lock.release()
    for directory in dirs:
        remove_queue_dir(directory)


def remove_queue_dir(directory: Path) -> None:
    """Remove a renamed-aside directory and everything in it. Blocking; failures are logged."""
    shutil.rmtree(directory, onerror=_log_rmtree_error)


def _log_rmtree_error(_func: object, path: str, exc_info: object) -> None:
    log.warning("consume_queue_remove_failed", path=path, error=repr(exc_info))
