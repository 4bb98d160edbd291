"""Start-up recovery of a store: load the ConsumeQueues, re-check the CommitLog, re-dispatch, mend the epochs.

Mirrors DefaultMessageStore#loadConsumeQueue, #recover (normal and abnormal share one path here),
CommitLogDispatcherBuildConsumeQueue / BuildIndex during recovery, and the epoch file check of
AutoSwitchHAService at start. Blocking (file scans): DefaultMessageStore#start runs it before the store serves.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping

from mq_common.logging import get_logger

from mq_broker.store.checkpoint import StoreCheckpoint
from mq_broker.store.commit_log import CommitLog, DispatchRequest
from mq_broker.store.config import MessageStoreConfig
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.epoch_file import EpochFileCache, EpochFileError
from mq_broker.store.index_service import IndexService
from mq_broker.store.queue_deletion import is_deleted_queue_dir, remove_queue_dir

log = get_logger("mq_broker.store")


class StoreRecovery:
    """Recovery of one store's files. ``consume_queue_table``: the store's live table; ``queue_for(topic, queue
    id)``: its ConsumeQueue, created (and put in the table) when missing."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        index_service: IndexService,
        consume_queue_table: Mapping[tuple[str, int], ConsumeQueue],
        queue_for: Callable[[str, int], ConsumeQueue],
    ) -> None:
        self._config = config
        self._commit_log = commit_log
        self._index_service = index_service
        self._table = consume_queue_table
        self._queue_for = queue_for

    def load_consume_queues(self) -> None:
        """Open every ``consumequeue/<topic>/<queueId>/`` (and finish a delete_topics an exit interrupted).
        Raises OSError."""
        root = self._config.consume_queue_dir
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if is_deleted_queue_dir(topic_dir):
                remove_queue_dir(topic_dir)  # delete_topics was interrupted
                continue
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    self._queue_for(topic_dir.name, int(queue_dir.name)).load()

    def recover(self, checkpoint: StoreCheckpoint, *, last_exit_ok: bool) -> None:
        """ConsumeQueues keep their valid units; the CommitLog is re-read from the checkpoint's dispatch offset
        (and at least its last file) with CRC checks, cut at the first bad record, and every record past what
        the queues hold is dispatched again; queue units past the cut are dropped. Afterwards everything below
        the CommitLog's max offset is dispatched. Raises OSError.
        """
        zero_tail = not last_exit_ok
        for cq in self._table.values():
            cq.recover(zero_tail=zero_tail)
        dispatch_from = checkpoint.dispatch_flushed_offset if checkpoint.existed else 0
        if not last_exit_ok:
            log.warning("store_abnormal_recovery", dispatch_from=dispatch_from)
        commit_log, index = self._commit_log, self._index_service
        index.truncate(dispatch_from)  # entries past it are rebuilt by the re-dispatch
        end = commit_log.recover(dispatch_from, self._dispatch_recovered, zero_tail=zero_tail)
        index.write_headers()
        index.truncate(end)
        for cq in self._table.values():
            cq.truncate_dirty_logic_files(end, zero_tail=zero_tail)
        commit_log.topic_queue_table = {
            f"{topic}-{queue_id}": cq.max_offset_in_queue for (topic, queue_id), cq in self._table.items()
        }
        for cq in self._table.values():  # recoverTopicQueueTable: units below the CommitLog are gone
            cq.correct_min_offset(commit_log.min_offset)
        log.info(
            "store_recovered",
            last_exit_ok=last_exit_ok,
            dispatch_from=dispatch_from,
            commit_log_min_offset=commit_log.min_offset,
            commit_log_max_offset=end,
            consume_queues=len(self._table),
        )

    def _dispatch_recovered(self, request: DispatchRequest) -> None:
        """The ConsumeQueue unit, then the index entries of a record the index does not hold yet."""
        cq = self._queue_for(request.topic, request.queue_id)
        cq.put_message_position_info(
            request.commit_log_offset, request.msg_size, request.tags_code, request.queue_offset
        )
        index = self._index_service
        if not self._config.message_index_enable or request.commit_log_offset <= index.last_indexed_phy_offset:
            return
        index.build_index(
            request.topic,
            request.commit_log_offset,
            request.store_timestamp_ms,
            request.sys_flag,
            request.properties,
            write_header=False,  # once, after the scan (recover)
        )

    def recover_epoch_file(self, epoch_file: EpochFileCache) -> None:
        """After the CommitLog's recovery: load the epoch file, drop the entries starting past the recovered max
        offset (a crash between truncate_files' CommitLog cut and its epoch file write, or bytes an abnormal stop
        lost) and those wholly below the first CommitLog file. Raises OSError (EINVAL when neither the file nor
        its .bak checks out: the broker refuses to start rather than forget its epochs)."""
        try:
            epoch_file.load()
        except EpochFileError as exc:
            raise OSError(errno.EINVAL, f"epoch file unusable: {exc}") from exc
        epoch_file.truncate_suffix(self._commit_log.max_offset + 1)  # + 1: an epoch starting at the end stays
        epoch_file.truncate_prefix(self._commit_log.min_offset)
