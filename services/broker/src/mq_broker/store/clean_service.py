"""CleanService: disk space management of the store (expired files, forced cleaning, the DISK_FULL flag).

Mirrors org.apache.rocketmq.store.DefaultMessageStore.CleanCommitLogService (+ #isTimeToDelete,
#cleanFilesPeriodically), ConsumeQueueStore.CleanConsumeQueueService, IndexService#deleteExpiredFile and the
DISK_FULL bit of RunningFlags. One round every ``clean_resource_interval_ms``:

1. measure the CommitLog and ConsumeQueue partitions (os.statvfs); above ``disk_space_warning_level_ratio``
   the store is DISK_FULL (puts get SERVICE_NOT_AVAILABLE with :data:`DISK_FULL_REMARK`); at or below it the
   flag clears, so writing resumes by itself;
2. delete the oldest CommitLog files whose last modification is older than ``file_reserved_time_hours`` when
   the local hour is one of ``delete_when``, or at any hour when usage passes
   ``disk_max_used_space_ratio_percent``; when usage passes ``disk_space_clean_forcibly_ratio`` (and
   ``clean_file_forcibly_enable``) the oldest files go expired or not. At most ``delete_file_batch_max``
   files per round, oldest first, stopping at the first one kept; never the file being written, never a
   file not yet flushed, never (short of forced cleaning) a file holding a delay-level or timer message not
   delivered yet (``keep_from``; RocketMQ rolls such timers instead);
3. when the CommitLog min offset moved: every ConsumeQueue moves its min offset to the first unit still in
   the CommitLog and drops its files wholly below it; then the index (when the store has an IndexService).

Threads: everything runs on this service's own thread (``CleanService``), never on the event loop. A deleted
file is first taken out of its queue (a new list is swapped in, so readers keep a consistent snapshot), then
unmapped and unlinked here; the put path only writes the last file, which is never deleted, and a reader
still holding a deleted file reads nothing (MappedFile#read), never freed memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from mq_common.logging import get_logger

from mq_broker.store.commit_log import CommitLog
from mq_broker.store.config import MessageStoreConfig, parse_delete_when
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.disk import DiskSpaceUsage, disk_partition_space_used_ratio, existing_path
from mq_broker.store.mapped_file import MappedFile

log = get_logger("mq_broker.store.clean")

# SendMessageProcessor#handlePutMessageResult, SERVICE_NOT_AVAILABLE (the argument is DiskSpaceUsage#disk_util).
DISK_FULL_REMARK: Final = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [%s], messages are put to the slave, message store has been shut down, etc."
)
SHUTDOWN_JOIN_TIMEOUT_S: Final = 30.0

DiskUsageFn = Callable[[Path], float]
ClockFn = Callable[[], float]


class CleanService:
    """The clean thread of one store.

    ``consume_queues()`` returns the current ConsumeQueues; ``index_cleaner(min_commit_log_offset)`` trims the
    index (None without one). ``clock_s`` (wall clock, seconds since the epoch) and ``disk_usage_ratio``
    (path -> used fraction, -1.0 unknown) are injectable for tests. ``disk_full`` is read by the put path.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        consume_queues: Callable[[], list[ConsumeQueue]],
        *,
        index_cleaner: Callable[[int], None] | None = None,
        clock_s: ClockFn = time.time,
        disk_usage_ratio: DiskUsageFn = disk_partition_space_used_ratio,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.index_cleaner = index_cleaner
        self.clock_s = clock_s
        self.disk_usage_ratio = disk_usage_ratio
        # The lowest CommitLog offset a held delay-level or timer message still needs (None: none); an expired file
        # ending past it is kept until forced cleaning (mq_broker.schedule.services). Read on this thread.
        self.keep_from: Callable[[], int | None] | None = None
        self.delete_when_hours = parse_delete_when(config.delete_when)
        self.disk_full = False
        self.last_usage = DiskSpaceUsage(-1.0, -1.0, -1.0)
        self.rounds = 0
        self._last_physical_min_offset = 0
        self._hanged: list[tuple[MappedFile, float]] = []
        self._stopped = threading.Event()
        self._round_lock = threading.Lock()
        self._round_done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="CleanService", daemon=True)

    # --- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        """Stop the thread (it finishes the file it is deleting). Blocking."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(SHUTDOWN_JOIN_TIMEOUT_S)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def round_lock(self) -> threading.Lock:
        """Held for a whole clean round: whoever holds it knows no file is being cleaned meanwhile (the store's
        delete_topics, closing consume queues). Any thread but the loop."""
        return self._round_lock

    def wait_rounds(self, count: int, timeout_s: float) -> bool:
        """Block until ``rounds`` reaches ``count`` (True) or ``timeout_s`` passed (False). Any thread but the loop."""
        with self._round_done:
            return self._round_done.wait_for(lambda: self.rounds >= count, timeout_s)

    def disk_util(self) -> str:
        """The last measured usage as SendMessageProcessor#diskUtil text."""
        return self.last_usage.disk_util()

    def _run(self) -> None:
        interval_s = self.config.clean_resource_interval_ms / 1000
        while not self._stopped.wait(interval_s):
            try:
                self.run_once()
            except Exception:  # the thread must survive one bad round (logged with its stack)
                log.exception("clean_service_round_failed")

    # --- one round ----------------------------------------------------------------------------------------------

    def run_once(self) -> None:
        """One clean round (disk check, CommitLog, ConsumeQueues, index). Blocking; the service thread (tests
        may call it directly). Mirrors DefaultMessageStore#cleanFilesPeriodically.
        """
        with self._round_lock:
            usage = self.check_disk_space()
            self._delete_commit_log_files(usage)
            self._delete_logic_files()
            self._retry_hanged_files()
        with self._round_done:
            self.rounds += 1
            self._round_done.notify_all()

    def check_disk_space(self) -> DiskSpaceUsage:
        """Measure the partitions and set or clear DISK_FULL. Mirrors CleanCommitLogService#isSpaceToDelete."""
        cfg = self.config
        root = cfg.store_path_root_dir
        usage = DiskSpaceUsage(
            self.disk_usage_ratio(existing_path(cfg.commit_log_dir, root)),
            self.disk_usage_ratio(existing_path(cfg.consume_queue_dir, root)),
            self.disk_usage_ratio(existing_path(root / "index", root)),
        )
        self.last_usage = usage
        full = usage.max_ratio > cfg.disk_space_warning_level_ratio
        if full and not self.disk_full:
            log.error("store_disk_full", disk_util=usage.disk_util(), warning_ratio=cfg.disk_space_warning_level_ratio)
        elif not full and self.disk_full:
            log.info("store_disk_ok", disk_util=usage.disk_util(), warning_ratio=cfg.disk_space_warning_level_ratio)
        self.disk_full = full
        return usage

    def is_time_to_delete(self) -> bool:
        """The local hour of ``clock_s()`` is one of delete_when. Mirrors DefaultMessageStore#isTimeToDelete."""
        return time.localtime(self.clock_s()).tm_hour in self.delete_when_hours

    def _delete_commit_log_files(self, usage: DiskSpaceUsage) -> None:
        """Mirrors CleanCommitLogService#deleteExpiredFiles + MappedFileQueue#deleteExpiredFileByTime."""
        cfg = self.config
        clean_immediately = cfg.clean_file_forcibly_enable and usage.max_ratio > cfg.disk_space_clean_forcibly_ratio
        over_max = usage.max_ratio > cfg.disk_max_used_space_ratio_percent / 100
        time_up = self.is_time_to_delete()
        if not (time_up or over_max or clean_immediately):
            return
        mfq = self.commit_log.mapped_file_queue
        expired_before_s = self.clock_s() - cfg.file_reserved_time_hours * 3600
        deleted = 0
        for mapped in mfq.deletable_files():
            if deleted >= cfg.delete_file_batch_max or self._stopped.is_set():
                break
            if not (clean_immediately or _modified_before(mapped, expired_before_s)):
                break  # never delete files in the middle: the log stays contiguous
            keep = self.keep_from() if self.keep_from is not None else None
            if not clean_immediately and keep is not None and mapped.file_end_offset > keep:
                log.info("commit_log_file_kept_for_held_messages", file=mapped.file_path.name, keep_from=keep)
                break
            mfq.remove_first_files([mapped])
            self._destroy(
                mapped,
                "commit_log",
                time_up=time_up,
                over_max_used_ratio=over_max,
                clean_forcibly=clean_immediately,
                disk_util=usage.disk_util(),
                min_offset=mfq.min_offset(),
            )
            deleted += 1
            self._pause(cfg.delete_commit_log_files_interval_ms)
        if deleted == 0 and (over_max or clean_immediately):
            log.warning("store_disk_full_soon_nothing_deleted", disk_util=usage.disk_util())

    def _delete_logic_files(self) -> None:
        """Mirrors CleanConsumeQueueService#deleteExpiredFiles (and IndexService#deleteExpiredFile)."""
        min_offset = self.commit_log.min_offset
        if min_offset <= self._last_physical_min_offset:
            return
        unflushed = False
        for cq in self.consume_queues():
            cq.correct_min_offset(min_offset)
            expired = cq.delete_expired_files(min_offset)
            for mapped in expired:
                self._destroy(mapped, "consume_queue", topic=cq.topic, queue_id=cq.queue_id, min_offset=min_offset)
            if expired:
                self._pause(self.config.delete_consume_queue_files_interval_ms)
            unflushed = unflushed or _oldest_file_unflushed(cq)
        if not unflushed:  # else a file the flusher had not finished may be due: look again next round
            self._last_physical_min_offset = min_offset
        if self.index_cleaner is not None:
            self.index_cleaner(min_offset)

    def _destroy(self, mapped: MappedFile, store: str, **fields: object) -> None:
        try:
            mapped.destroy()
        except (BufferError, OSError) as exc:
            self._hanged.append((mapped, time.monotonic()))
            log.warning("store_file_destroy_deferred", store=store, file=str(mapped.file_path), error=repr(exc))
            return
        log.info("store_file_deleted", store=store, file=str(mapped.file_path), **fields)

    def _retry_hanged_files(self) -> None:
        """Mirrors CleanCommitLogService#reDeleteHangedFile: files whose unmap failed are retried every round."""
        hanged, self._hanged = self._hanged, []
        limit_s = self.config.destroy_mapped_file_interval_forcibly_ms / 1000
        for mapped, since_s in hanged:
            try:
                mapped.destroy()
            except (BufferError, OSError) as exc:
                self._hanged.append((mapped, since_s))
                if time.monotonic() - since_s > limit_s:
                    log.error("store_file_hanged", file=str(mapped.file_path), error=repr(exc))
            else:
                log.info("store_file_deleted", store="hanged", file=str(mapped.file_path))

    def _pause(self, interval_ms: int) -> None:
        if interval_ms > 0:
            self._stopped.wait(interval_ms / 1000)


def _oldest_file_unflushed(cq: ConsumeQueue) -> bool:
    """The oldest file of ``cq`` is not the last one and not completely flushed yet (so not deletable yet)."""
    mfq = cq.mapped_file_queue
    files = mfq.mapped_files
    return len(files) > 1 and files[0].file_end_offset > mfq.flushed_where


def _modified_before(mapped: MappedFile, before_s: float) -> bool:
    try:
        return mapped.last_modified_s() <= before_s
    except OSError:  # already gone from the directory: nothing left to keep
        return True
