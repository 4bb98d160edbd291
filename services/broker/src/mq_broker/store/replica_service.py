"""The slave's side of a store: bytes replicated from the master, their dispatch (reput), and the cut back to the
point where this log and a new master's agree.

Mirrors DefaultMessageStore#appendToCommitLog, the ReputMessageService of a slave (mq_broker.store.reput walks
the records) and DefaultMessageStore#truncateFiles (the file work in mq_broker.store.truncation). One
:class:`ReplicaService` per DefaultMessageStore, which delegates its methods of the same names here. The HAClient
(mq_broker.ha) calls :meth:`ReplicaService.append_replicated` and :meth:`ReplicaService.reput` on the event loop
and :meth:`ReplicaService.truncate_files` in a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mq_common.logging import get_logger

from mq_broker.store.config import BrokerRole
from mq_broker.store.truncation import TruncateRefusedError, truncate_logs

if TYPE_CHECKING:
    from mq_broker.store.message_store import DefaultMessageStore

log = get_logger("mq_broker.store")

# Replicated bytes parsed per reput call at most (the rest on the next frame or the next call).
REPUT_MAX_BYTES_PER_CALL: Final = 4 * 1024 * 1024


class ReplicaService:
    """Replication into ``store``: reads its role, state and flusher at each call (they change at runtime)."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self._store = store
        self._reput_service = store.reput_service

    def append_replicated(
        self, start_offset: int, data: bytes | bytearray | memoryview, *, dispatch: bool = True
    ) -> bool:
        """Append bytes replicated from the master at ``start_offset`` (CommitLog#append_data), then dispatch the
        ConsumeQueue units and index entries of the records now complete (the ReputMessageService of a slave;
        ``dispatch`` False leaves that to a later :meth:`reput`, so the HAClient acknowledges first). Returns False
        when nothing was written: a gap or overlap, a failed or stopped store, or a master (only a SLAVE takes
        replicated bytes). A file that cannot be created, or bytes that parse as no record, fail the
        store (read-only until restart). Mirrors DefaultMessageStore#appendToCommitLog. Event loop.
        """
        store = self._store
        if not store.is_writeable or store.broker_role is not BrokerRole.SLAVE:
            return False
        try:
            if not store.commit_log.append_data(start_offset, data):
                return False
        except OSError as exc:
            store.fail(f"cannot append replicated data: {exc}")
            return False
        # No prefault (after_write) of the CommitLog here: pwrite fills whole pages, prefaulting would zero them.
        if dispatch:
            self.reput()
        return True

    def reput(self) -> int:
        """Dispatch the complete records past ``dispatched_offset`` (bounded per call; mq_broker.store.reput) and
        tell the message arriving listener; returns the new offset. A corrupt replica or a ConsumeQueue/index file
        that cannot be created fails the store."""
        store = self._store
        arrived: set[tuple[str, int]] = set()
        try:
            store.dispatched_offset = self._reput_service.do_reput(
                store.dispatched_offset, REPUT_MAX_BYTES_PER_CALL, arrived
            )
        except (OSError, ValueError) as exc:
            store.fail(f"replicated data dispatch failed: {exc}")
        store.notify_arriving(arrived)
        return store.dispatched_offset

    def truncate_files(self, offset: int) -> bool:
        """Cut the store back to CommitLog ``offset`` (bytes, a record start): the CommitLog, every ConsumeQueue
        (units of messages ending past it), the index, the topic-queue offsets, the checkpoint and the epoch file,
        as mq_broker.store.truncation says; False (nothing done) when ``offset`` >= the max offset. Afterwards
        reads of the cut range find nothing and the next append goes to ``offset``.

        Precondition: nothing writes to the store: it is a SLAVE whose replication is stopped (the HAClient calls
        this before it asks for data) or it is not writeable. Raises TruncateRefusedError (nothing changed) when
        the store takes client writes, is not started or has failed, or ``offset`` is below the min offset or not
        a record start. Raises OSError when a file operation fails: the store is then failed (read-only) and a
        restart recovers to a consistent state.

        Blocking (stops and restarts the flusher, msync, fsync): call it through ``asyncio.to_thread``; reads on
        the event loop may go on meanwhile. Mirrors DefaultMessageStore#truncateFiles.
        """
        store = self._store
        store.check_truncatable()
        commit_log = store.commit_log
        if offset >= commit_log.max_offset:
            return False
        if offset < commit_log.min_offset or not commit_log.is_offset_aligned(offset):
            raise TruncateRefusedError(
                f"offset {offset} is not a record start in [{commit_log.min_offset}, {commit_log.max_offset})"
            )
        old_max = commit_log.max_offset
        store.stop_flusher_for_truncate()
        checkpoint = store.checkpoint
        assert checkpoint is not None
        try:
            with store.clean_service.round_lock, store.logics_lock:
                tables = list(store.consume_queue_table.values())
                truncate_logs(offset, commit_log, tables, store.index_service, checkpoint, store.epoch_file)
        except OSError as exc:
            store.fail(f"truncate to {offset} failed: {exc!r}")
            raise
        store.dispatched_offset = min(store.dispatched_offset, offset)
        store.flush_service = store.restart_flusher(store.flush_service)
        log.info("store_truncated", offset=offset, old_max_offset=old_max, epochs=len(store.epoch_file.entries()))
        return True
