"""Cutting a serving store back to a CommitLog offset: the file work of DefaultMessageStore#truncateFiles.

Mirrors org.apache.rocketmq.store.DefaultMessageStore#truncateFiles / #truncateDirtyFiles (with
ConsumeQueue#truncateDirtyLogicFiles, CommitLog#truncateDirtyFiles and recoverTopicQueueTable): a slave (or a
returning master rejoining as one) drops what it holds past the point where its log and its new master's agree
(mq_broker.store.epoch_file.find_consistent_point), then replicates from there.

Order, chosen so that a crash at any step recovers to either the state before or the state after the cut:

1. the checkpoint's dispatch and confirm offsets are lowered to the cut and fsynced first (a restart re-dispatches
   from there, whatever the ConsumeQueues hold);
2. every ConsumeQueue loses the units whose message ends past the cut (readers never meet a unit pointing at cut
   bytes);
3. the CommitLog is cut: the rest of the file holding the cut is zeroed and msynced (the commit point: recovery
   stops there), then the later files are deleted;
4. the index loses the entries pointing at or past the cut (IndexService#truncate_files);
5. the topic-queue offset table is rebuilt from the queues (the next put's queue offsets continue from the cut);
6. the epoch file loses the entries starting at or past the cut (a crash before this step is mended at start-up:
   DefaultMessageStore drops entries starting past the recovered max offset).

Blocking (file I/O, msync, fsync): a worker thread, with the flusher and the clean service kept off the files by
the caller (DefaultMessageStore#truncate_files).
"""

from __future__ import annotations

from collections.abc import Iterable

from mq_broker.store.checkpoint import StoreCheckpoint
from mq_broker.store.commit_log import CommitLog
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.epoch_file import EpochFileCache
from mq_broker.store.index_service import IndexService


class TruncateRefusedError(RuntimeError):
    """truncate_files refused, nothing changed: the store still takes writes (a master: stop writes or become a
    slave first), it is not started or has failed, or the offset is below the CommitLog's min offset or not the
    start of a record (RocketMQ: "offset is not align, truncate failed, need manual fix")."""


def truncate_logs(
    offset: int,
    commit_log: CommitLog,
    consume_queues: Iterable[ConsumeQueue],
    index_service: IndexService,
    checkpoint: StoreCheckpoint,
    epoch_file: EpochFileCache,
) -> None:
    """Cut every file of the store at CommitLog ``offset`` (a record start below the max offset), in the order of
    the module docstring. Raises OSError (msync, unlink, fsync); the store must then be failed (restart recovers a
    consistent state)."""
    checkpoint.dispatch_flushed_offset = min(checkpoint.dispatch_flushed_offset, offset)
    checkpoint.confirm_phy_offset = min(checkpoint.confirm_phy_offset, offset)
    checkpoint.flush()
    queues = list(consume_queues)
    for cq in queues:
        cq.truncate_dirty_logic_files(offset, zero_tail=True)
    zero_run_stop_bytes = 2 * commit_log.config.max_record_size_bytes
    commit_log.mapped_file_queue.truncate_to(offset, zero_run_stop_bytes=zero_run_stop_bytes)
    index_service.truncate_files(offset)
    commit_log.topic_queue_table = {f"{cq.topic}-{cq.queue_id}": cq.max_offset_in_queue for cq in queues}
    epoch_file.truncate_suffix(offset)
