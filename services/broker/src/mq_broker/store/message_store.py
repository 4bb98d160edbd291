"""DefaultMessageStore: the store facade (CommitLog + ConsumeQueues + flusher + checkpoint + recovery).

Mirrors org.apache.rocketmq.store.DefaultMessageStore. Layout under ``store_path_root_dir``: ``commitlog/``,
``consumequeue/<topic>/<queueId>/``, ``checkpoint``, ``abort`` (present while running: found at start it means
the last stop was not clean) and ``lock`` (one store per directory).

Threads: :meth:`start` and :meth:`shutdown` block (file scans, joins): call them before serving / after the
server stopped, or through ``asyncio.to_thread``. :meth:`put_messages` and :meth:`get_messages` run on the
event loop; the flusher thread runs :meth:`_flush_logics`.

The store owns the files, the flusher and the state (role, failure, dispatched offset); its responsibilities live
in collaborators it builds over those parts and delegates to: mq_broker.store.recovery.StoreRecovery (start-up
load and recovery), mq_broker.store.store_dir (lock and abort files), mq_broker.store.put_service
.PutMessageService (puts and their waits), mq_broker.store.queue_reader.QueueReader (pulls, lookups, queries) and
mq_broker.store.replica_service.ReplicaService (a slave's appends, reput, truncation).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Sequence, Set
from typing import Final

from mq_common.codec import MessageExt
from mq_common.logging import get_logger

from mq_broker.store.checkpoint import StoreCheckpoint
from mq_broker.store.clean_service import CleanService
from mq_broker.store.commit_log import CommitLog
from mq_broker.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.epoch_file import EpochFileCache
from mq_broker.store.flush import FlushRealTimeService, FlushService, GroupCommitService
from mq_broker.store.group_transfer import GroupTransferService
from mq_broker.store.index_service import IndexService, QueryMessageResult
from mq_broker.store.mapped_file_queue import MappedFileQueue
from mq_broker.store.message import GetMessageResult, MessageExtBatch, MessageExtBrokerInner, PutMessageResult
from mq_broker.store.message_filter import MessageFilter
from mq_broker.store.prefault import PrefaultService
from mq_broker.store.put_service import PutMessageService
from mq_broker.store.queue_deletion import destroy_consume_queues, move_queue_dir_aside
from mq_broker.store.queue_reader import QueueReader
from mq_broker.store.recovery import StoreRecovery
from mq_broker.store.replica_service import ReplicaService
from mq_broker.store.reput import ReputMessageService
from mq_broker.store.store_dir import StoreLockedError, acquire_dir_lock, create_abort_file, release_dir_lock
from mq_broker.store.truncation import TruncateRefusedError

log = get_logger("mq_broker.store")

# DefaultMessageStore#checkStoreStatus's answer to a put on a slave (SERVICE_NOT_AVAILABLE).
SLAVE_PUT_REMARK: Final = "message store is in slave mode, so putMessage is forbidden"


class StoreStartError(RuntimeError):
    """The store cannot start: directory locked by another broker, unreadable files, bad sizes."""


class DefaultMessageStore:
    """The message store of one broker. ``store_host``: 8 or 20 bytes (codec.host_to_bytes) for STOREHOST.

    Implements mq_broker.store.api.MessageStore, which the processors type against."""

    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        self.config = config
        self.commit_log = CommitLog(config, store_host)
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self.index_service = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
        self.reader = QueueReader(config, self.commit_log, self.index_service, self.consume_queue_table)
        self.checkpoint: StoreCheckpoint | None = None
        # The epoch history of this store's CommitLog (controller mode); loaded and mended at start().
        self.epoch_file = EpochFileCache(config.epoch_file_path, lambda: self.commit_log.max_offset)
        self.flush_service: FlushService | None = None
        # Disk space management (expired files, DISK_FULL); replace before start() to inject a clock/disk usage.
        self.clean_service = CleanService(
            config,
            self.commit_log,
            lambda: list(self.consume_queue_table.values()),
            index_cleaner=self._on_commit_log_files_deleted,
        )
        self.prefault_service: PrefaultService | None = None
        if config.prefault_ahead_commit_log_bytes > 0 or config.prefault_ahead_consume_queue_bytes > 0:
            self.prefault_service = PrefaultService()
        self._watch(self.commit_log.mapped_file_queue, config.prefault_ahead_commit_log_bytes)
        self.dispatched_offset = 0
        self.reput_service = ReputMessageService(config, self.commit_log, self.index_service, self.queue_for)
        # NotifyMessageArrivingListener: (topic, queue id) once per queue a put wrote, on the event loop, after
        # the put's ConsumeQueue dispatch (the broker sets it to LongPollingService#notify_message_arriving).
        self.message_arriving_listener: Callable[[str, int], None] | None = None
        # MessageStoreConfig.brokerRole, changed at runtime by a role switch (mq_broker.ha); event loop.
        self.broker_role = config.broker_role
        self.group_transfer = GroupTransferService(
            config.in_sync_replicas,
            config.ha_max_gap_not_in_sync_bytes,
            config.sync_flush_timeout_ms,
            config.min_in_sync_replicas,
        )
        # Controller mode's fencing (mq_broker.ha.lease.MasterLease#refusal): a remark while this master may not
        # acknowledge writes (its lease expired), checked before appending and before answering a waited put; loop.
        self.write_fence: Callable[[], str | None] | None = None
        # Told the new CommitLog max offset after every put that wrote (HAService wakes its connections); loop.
        self.commit_log_listener: Callable[[int], None] | None = None
        self.putter = PutMessageService(self)
        self.replica = ReplicaService(self)
        self.last_exit_ok = True
        self.failure: str | None = None
        self._writeable = False
        self._started = False
        self._lock_fd = -1
        # Held by the flusher while it flushes the ConsumeQueues, by delete_topics while it closes some and by
        # truncate_files while it cuts them.
        self.logics_lock = threading.Lock()

    # --- life cycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Lock the directory, load and recover every file, write ``abort``, start the flusher. Blocking.

        Raises StoreStartError when the directory is locked or a file cannot be loaded.
        """
        cfg = self.config
        cfg.store_path_root_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock_fd = acquire_dir_lock(cfg.lock_path)
        except StoreLockedError as exc:
            raise StoreStartError(f"Lock failed, MQ already started ({cfg.lock_path}): {exc}") from exc
        recovery = StoreRecovery(cfg, self.commit_log, self.index_service, self.consume_queue_table, self.queue_for)
        try:
            self.last_exit_ok = not cfg.abort_path.exists()
            self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
            self.commit_log.load()
            recovery.load_consume_queues()
            self.index_service.load()
            recovery.recover(self.checkpoint, last_exit_ok=self.last_exit_ok)
            self.dispatched_offset = self.commit_log.max_offset
            recovery.recover_epoch_file(self.epoch_file)
            create_abort_file(cfg.abort_path)
        except OSError as exc:
            self._close_files()
            self._release_lock()
            raise StoreStartError(f"cannot load the store in {cfg.store_path_root_dir}: {exc}") from exc
        self.flush_service = self._make_flush_service()
        self.flush_service.start()
        self.clean_service.start()
        if self.prefault_service is not None:
            self.prefault_service.start()
        self._writeable = True
        self._started = True
        log.info(
            "store_started",
            last_exit_ok=self.last_exit_ok,
            commit_log_max_offset=self.commit_log.max_offset,
            consume_queues=len(self.consume_queue_table),
            flush_disk_type=str(cfg.flush_disk_type),
        )

    def _make_flush_service(self) -> FlushService:
        cls: type[FlushService] = (
            GroupCommitService if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH else FlushRealTimeService
        )
        return cls(self.config, self.commit_log, self._flush_logics, self._on_flush_failure)

    def shutdown(self) -> None:
        """Flush everything, stop the flusher, close the files; a clean stop removes ``abort``. Blocking."""
        if not self._started:
            return
        self._started = False
        self._writeable = False
        self.clean_service.shutdown()  # before any file is closed under it
        if self.prefault_service is not None:
            self.prefault_service.shutdown()
        service = self.flush_service
        if service is not None:
            service.shutdown()
        if service is not None and service.is_alive:
            # The flusher is stuck in msync: unmapping under it would crash the process; leave abort in place.
            log.error("store_shutdown_flusher_stuck")
            self._release_lock()
            return
        clean = self.failure is None
        self._close_files()
        if clean:
            self.config.abort_path.unlink(missing_ok=True)
        self._release_lock()
        log.info("store_shutdown", clean=clean, commit_log_max_offset=self.commit_log.max_offset)

    def _close_files(self) -> None:
        self.commit_log.mapped_file_queue.close()
        for cq in self.consume_queue_table.values():
            cq.close()
        self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close()

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            release_dir_lock(self._lock_fd)
            self._lock_fd = -1

    # --- the ConsumeQueue table and dispatch ---------------------------------------------------------------

    def queue_for(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The ConsumeQueue of (topic, queue id), created (empty, in the table) when missing."""
        return self.consume_queue_table.get((topic, queue_id)) or self._new_consume_queue(topic, queue_id)

    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(
            topic, queue_id, self.config.consume_queue_dir, self.config.mapped_file_size_consume_queue_units
        )
        self.consume_queue_table[(topic, queue_id)] = cq
        self._watch(cq.mapped_file_queue, self.config.prefault_ahead_consume_queue_bytes)
        return cq

    def _watch(self, queue: MappedFileQueue, ahead_bytes: int) -> None:
        """Let the PrefaultService keep ``ahead_bytes`` past ``queue``'s write position prefaulted."""
        if self.prefault_service is not None and ahead_bytes > 0:
            queue.prefault = self.prefault_service
            queue.prefault_ahead_bytes = ahead_bytes

    def notify_arriving(self, queues: Iterable[tuple[str, int]]) -> None:
        """Tell the message arriving listener about each (topic, queue id) of a put; a failing listener is logged,
        never the put's failure (the records are stored)."""
        listener = self.message_arriving_listener
        if listener is None:
            return
        try:
            for topic, queue_id in queues:
                listener(topic, queue_id)
        except Exception:
            log.exception("message_arriving_listener_failed")

    # --- put (event loop) -------------------------------------------------------------------------------------

    @property
    def store_host(self) -> bytes:
        """STOREHOST of the records this store writes (8 or 20 bytes)."""
        return self.commit_log.store_host

    @property
    def is_writeable(self) -> bool:
        return self._writeable and self.failure is None

    async def put_messages(
        self, batch: Sequence[MessageExtBrokerInner], *, whole: bool = False
    ) -> list[PutMessageResult]:
        """See mq_broker.store.put_service.PutMessageService#put_messages (statuses, waits)."""
        return await self.putter.put_messages(batch, whole=whole)

    async def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """See mq_broker.store.put_service.PutMessageService#put_message_batch."""
        return await self.putter.put_message_batch(batch)

    # --- replication: the slave's side (mq_broker.ha.HAClient, event loop) -------------------------------------

    def append_replicated(
        self, start_offset: int, data: bytes | bytearray | memoryview, *, dispatch: bool = True
    ) -> bool:
        """See mq_broker.store.replica_service.ReplicaService#append_replicated. Event loop."""
        return self.replica.append_replicated(start_offset, data, dispatch=dispatch)

    def reput(self) -> int:
        """See mq_broker.store.replica_service.ReplicaService#reput. Event loop."""
        return self.replica.reput()

    def truncate_files(self, offset: int) -> bool:
        """See mq_broker.store.replica_service.ReplicaService#truncate_files. Blocking: a worker thread."""
        return self.replica.truncate_files(offset)

    def _delete_expired_index(self, min_commit_log_offset: int) -> None:
        """Clean service thread: drop index files wholly below the CommitLog min offset, when an IndexService
        with ``delete_expired_file(offset)`` (IndexService#deleteExpiredFile) is present.
        """
        delete = getattr(getattr(self, "index_service", None), "delete_expired_file", None)
        if callable(delete):
            delete(min_commit_log_offset)

    # --- epochs and truncation (controller mode) ------------------------------------------------------------------

    def _on_commit_log_files_deleted(self, min_commit_log_offset: int) -> None:
        """Clean service thread, after expired CommitLog files went: trim the index, and the epoch entries wholly
        below the new min offset (CleanCommitLogService -> AutoSwitchHAService#truncateEpochFilePrefix). A failed
        epoch file write is logged; the next round tries again."""
        self._delete_expired_index(min_commit_log_offset)
        try:
            self.epoch_file.truncate_prefix(min_commit_log_offset)
        except OSError as exc:
            log.error("epoch_file_prefix_truncate_failed", error=str(exc), min_offset=min_commit_log_offset)

    def check_truncatable(self) -> None:
        """Raises TruncateRefusedError unless the store is started, not failed, and takes no client writes (a
        SLAVE, or not writeable)."""
        if not self._started or self.failure is not None:
            raise TruncateRefusedError(f"the store cannot be truncated: {self.unavailable_remark()}")
        if self._writeable and self.broker_role is not BrokerRole.SLAVE:
            raise TruncateRefusedError(f"the store of a {self.broker_role} takes writes: it cannot be truncated")

    def stop_flusher_for_truncate(self) -> None:
        """Stop the flusher after a last flush, so no msync runs on a file being cut or deleted."""
        service = self.flush_service
        if service is None:
            return
        service.shutdown()
        if service.is_alive:
            self.fail("the flusher did not stop for truncate_files")
            raise TruncateRefusedError("the flusher did not stop (stuck in msync); the store failed")

    def restart_flusher(self, stopped: FlushService | None) -> FlushService:
        """A new, started flusher of the configured kind, keeping ``stopped``'s observer (the metrics)."""
        service = self._make_flush_service()
        if stopped is not None:
            service.observer = stopped.observer
        service.start()
        return service

    def unavailable_remark(self) -> str:
        """The remark of a SERVICE_NOT_AVAILABLE put: a SLAVE's, or the failure / shutdown reason."""
        if self.failure is None and self._writeable and self.broker_role is BrokerRole.SLAVE:
            return SLAVE_PUT_REMARK
        reason = self.failure or "message store has been shut down"
        return f"service not available now: {reason}"

    def fail(self, reason: str) -> None:
        """Make the store read-only until restart (the first reason is kept and logged). Any thread."""
        if self.failure is None:
            self.failure = reason
            log.error("store_failed_read_only", reason=reason)

    def _on_flush_failure(self, exc: BaseException) -> None:
        """Flusher thread: a failed msync makes the store read-only until restart (never retried)."""
        self.fail(f"flush failed, the store is read-only: {exc!r}")

    # --- flush of the logic queues (flusher thread) -----------------------------------------------------------------

    def _flush_logics(self, least_pages: int) -> None:
        """Flush ConsumeQueues, then record in the checkpoint the CommitLog offset below which every unit is
        durable (min of dispatched, CommitLog flushed, and each queue's first unflushed unit). Raises OSError.
        """
        checkpoint = self.checkpoint
        assert checkpoint is not None
        commit_log_flushed = self.commit_log.mapped_file_queue.flushed_where
        safe = min(self.dispatched_offset, commit_log_flushed)
        with self.logics_lock:
            for cq in list(self.consume_queue_table.values()):
                cq.flush(least_pages)
                first_unflushed = cq.first_unflushed_physic_offset()
                if first_unflushed is not None:
                    safe = min(safe, first_unflushed)
        checkpoint.index_msg_timestamp_ms = self.index_service.flush()
        checkpoint.dispatch_flushed_offset = safe
        checkpoint.confirm_phy_offset = commit_log_flushed
        checkpoint.physic_msg_timestamp_ms = self.commit_log.last_store_timestamp_ms
        checkpoint.logics_msg_timestamp_ms = self.commit_log.last_store_timestamp_ms
        checkpoint.flush()

    # --- topics --------------------------------------------------------------------------------------------------

    async def delete_topics(self, topics: Set[str]) -> int:
        """Drop the consume queues of ``topics``; returns how many queues went. The CommitLog keeps the messages
        (they expire with their files) and a topic sent to again starts at queue offset 0.

        Event loop: the queues leave the table and their next queue offsets are forgotten at once (no later read
        or dispatch sees them); the files go as mq_broker.store.queue_deletion says (renamed aside here, closed and
        removed in a worker thread). Raises OSError when a rename fails.
        Mirrors DefaultMessageStore#deleteTopics.
        """
        doomed = [cq for (topic, _q), cq in self.consume_queue_table.items() if topic in topics]
        for cq in doomed:
            del self.consume_queue_table[(cq.topic, cq.queue_id)]
        queue_table = self.commit_log.topic_queue_table
        for key in [k for k in queue_table if k.rsplit("-", 1)[0] in topics]:
            del queue_table[key]
        root = self.config.consume_queue_dir
        moved = [d for d in (move_queue_dir_aside(root, t) for t in sorted(topics)) if d is not None]
        if doomed or moved:
            locks = (self.logics_lock, self.clean_service.round_lock)
            await asyncio.to_thread(destroy_consume_queues, doomed, moved, locks)
        log.info("store_topics_deleted", topics=sorted(topics), consume_queues=len(doomed))
        return len(doomed)

    # --- read path (mq_broker.store.queue_reader.QueueReader) -------------------------------------------------

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.reader.find_consume_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_min_offset_in_queue(topic, queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_max_offset_in_queue(topic, queue_id)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        return self.reader.get_message_store_timestamp(topic, queue_id, queue_offset)

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        return self.reader.check_in_mem_by_consume_offset(topic, queue_id, consume_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.reader.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryMessageResult:
        return self.reader.query_message(topic, key, max_num, begin_ms, end_ms)

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> QueryMessageResult:
        return self.reader.query_message_by_unique_key(topic, uniq_key)

    def select_one_message_by_offset(self, commit_log_offset: int) -> bytes | None:
        return self.reader.select_one_message_by_offset(commit_log_offset)

    def lookup_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        return self.reader.lookup_message_by_offset(commit_log_offset)

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        return self.reader.get_messages(topic, queue_id, offset, max_nums, message_filter)
