"""The store's put path: append to the CommitLog, dispatch the ConsumeQueue units and index entries, then wait
for the group commit (SYNC_FLUSH) and the slaves (SYNC_MASTER) as the store's roles ask.

Mirrors DefaultMessageStore#putMessages / #asyncPutMessages with CommitLog#handleDiskFlushAndHA (the waiting)
and CommitLogDispatcherBuildConsumeQueue / BuildIndex for the records a put wrote. One
:class:`PutMessageService` per DefaultMessageStore, which delegates its put methods here. Event loop: the
appends are page-cache writes; only the waits suspend.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mq_broker.store import native_append
from mq_broker.store.batch_put import BatchScan, expand_batch, merge_results, scan_batch
from mq_broker.store.clean_service import DISK_FULL_REMARK
from mq_broker.store.commit_log import (
    CREATE_MAPPED_FILE_FAILED_REMARK,
    MESSAGE_ILLEGAL_REMARK,
    BatchAppend,
    DispatchRequest,
)
from mq_broker.store.config import BrokerRole
from mq_broker.store.consume_queue import ConsumeQueue
from mq_broker.store.flush import GroupCommitService
from mq_broker.store.message import (
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    is_dispatchable,
)

if TYPE_CHECKING:
    from mq_broker.store.message_store import DefaultMessageStore


class PutMessageService:
    """Puts into ``store``: reads its role, fence, flusher and listeners at each put (they change at runtime)."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self._store = store
        self._config = store.config
        self._commit_log = store.commit_log
        self._index_service = store.index_service
        self._group_transfer = store.group_transfer

    async def put_messages(
        self, batch: Sequence[MessageExtBrokerInner], *, whole: bool = False
    ) -> list[PutMessageResult]:
        """Store ``batch`` under one write lock, dispatch it, and (SYNC_FLUSH) wait once for the group commit.
        ``whole``: every message in one CommitLog file or none (CommitLog#put_messages_whole, the Python path
        of a MessageBatch); else each message is checked and stored on its own.

        One result per message, in order. Statuses: PUT_OK; FLUSH_DISK_TIMEOUT (stored, flush not confirmed
        within sync_flush_timeout_ms); MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED (limits);
        SERVICE_NOT_AVAILABLE (store shut down or failed: read-only after a failed msync; DISK_FULL: the remark
        names the disk ratios; a new file could not be allocated: ENOSPC, nothing written);
        CREATE_MAPPED_FILE_FAILED. Messages with ``wait_store_msg_ok`` False (WAIT=false) never wait.
        Mirrors DefaultMessageStore#putMessages + CommitLog#handleDiskFlush.
        """
        refusal = self._refusal()
        if refusal is not None:
            return [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=refusal)] * len(batch)
        try:
            self._reserve_logic_room(batch)
        except OSError as exc:
            return [_create_failed(exc)] * len(batch)
        put = self._commit_log.put_messages_whole if whole else self._commit_log.put_messages
        results, dispatches = put(batch, int(time.time() * 1000))
        self._commit_log.mapped_file_queue.after_write()
        try:
            self._dispatch_batch(dispatches)
        except OSError as exc:  # the CommitLog holds the records; recovery re-dispatches them
            self._store.fail(f"consume queue dispatch failed: {exc}")
        if self._config.message_index_enable:
            self._build_indexes(batch, results)
        self._store.dispatched_offset = self._commit_log.max_offset
        self._tell_commit_log_listener()
        if not self._must_wait:
            return results
        waiting = [i for i, (m, r) in enumerate(zip(batch, results, strict=True)) if r.is_ok and m.wait_store_msg_ok]
        if not waiting:
            return results
        next_offset = max(results[i].wrote_offset + results[i].wrote_bytes for i in waiting)
        status = await self._wait_stored(next_offset)
        fenced = self._fence_remark()
        if status is not PutMessageStatus.PUT_OK or fenced is not None:
            remark = fenced or self._store.unavailable_remark()
            if fenced is not None:
                status = PutMessageStatus.SERVICE_NOT_AVAILABLE
            for i in waiting:
                results[i] = _with_status(results[i], status, remark)
        return results

    async def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Store every message of ``batch`` (one topic-queue, consecutive queue offsets) or none; one result.

        The statuses of :meth:`put_messages`, for the whole batch; MESSAGE_ILLEGAL also for a malformed body or a
        batch larger than a CommitLog file. The result's ``msg_num`` is the number of messages, ``msg_id`` their
        offset ids joined with commas. With the C loops (native_append) the records are appended straight from
        the body, in one file, and their ConsumeQueue units and index entries follow from the written bytes;
        else the batch goes through :meth:`put_messages` with ``whole`` (also one file, all or none).
        Mirrors DefaultMessageStore#putMessages (MessageExtBatch) + CommitLog#asyncPutMessages. Event loop.
        """
        if not (self._config.native_append_enable and native_append.AVAILABLE and is_dispatchable(batch.sys_flag)):
            expanded = expand_batch(batch, self._config.max_message_size_bytes, self._illegal_remark())
            if isinstance(expanded, PutMessageResult):
                return expanded
            return merge_results(await self.put_messages(expanded, whole=True))
        refusal = self._refusal()
        if refusal is not None:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=refusal)
        cfg = self._config
        scanned = scan_batch(
            batch,
            len(self._commit_log.store_host),
            max_message_size_bytes=cfg.max_message_size_bytes,
            max_record_size_bytes=cfg.max_record_size_bytes,
            file_size_bytes=cfg.mapped_file_size_commit_log_bytes,
            illegal_remark=self._illegal_remark(),
        )
        if isinstance(scanned, PutMessageResult):
            return scanned
        try:
            appended, cq = self._append_batch(batch, scanned)
        except OSError as exc:
            return _create_failed(exc)
        self._dispatch_appended_batch(appended, cq)
        self._tell_commit_log_listener()
        result = appended.result
        if self._must_wait and batch.wait_store_msg_ok:
            status = await self._wait_stored(result.wrote_offset + result.wrote_bytes)
            fenced = self._fence_remark()
            if fenced is not None:
                result = _with_status(result, PutMessageStatus.SERVICE_NOT_AVAILABLE, fenced)
            elif status is not PutMessageStatus.PUT_OK:
                result = _with_status(result, status, self._store.unavailable_remark())
        return result

    @property
    def _must_wait(self) -> bool:
        """A put waits for something: the group commit (SYNC_FLUSH) and/or the slaves (SYNC_MASTER)."""
        store = self._store
        return isinstance(store.flush_service, GroupCommitService) or store.broker_role is BrokerRole.SYNC_MASTER

    async def _wait_stored(self, next_offset: int) -> PutMessageStatus:
        """CommitLog#handleDiskFlushAndHA: wait for the group commit (SYNC_FLUSH) and the group transfer
        (SYNC_MASTER) together, both registered before either is awaited (one deadline, sync_flush_timeout_ms).
        A flush failure or timeout wins over the replicas' answer (the put is not durable here)."""
        service = self._store.flush_service
        flush = service.put_request(next_offset) if isinstance(service, GroupCommitService) else None
        transfer = None
        if self._store.broker_role is BrokerRole.SYNC_MASTER:
            transfer = self._group_transfer.put_request(next_offset, self._commit_log.max_offset)
        status = PutMessageStatus.PUT_OK
        if flush is not None:
            status = await flush
        if transfer is not None:
            replicas = await transfer
            if status is PutMessageStatus.PUT_OK:
                status = replicas
        return status

    def _fence_remark(self) -> str | None:
        fence = self._store.write_fence
        return fence() if fence is not None else None

    def _tell_commit_log_listener(self) -> None:
        listener = self._store.commit_log_listener
        if listener is not None:
            listener(self._commit_log.max_offset)

    def _append_batch(self, batch: MessageExtBatch, scanned: BatchScan) -> tuple[BatchAppend, ConsumeQueue]:
        """Make room first (ConsumeQueue file, index entries), then append: ENOSPC refuses before any write."""
        key = (batch.topic, batch.queue_id)
        cq = self._store.queue_for(*key)
        cq.ensure_room(self._commit_log.topic_queue_table.get(f"{batch.topic}-{batch.queue_id}", 0), scanned.count)
        if self._config.message_index_enable:
            self._index_service.reserve(scanned.index_keys)
        now_ms = int(time.time() * 1000)
        appended = self._commit_log.put_message_batch(batch, scanned.total_record_bytes, scanned.count, now_ms)
        return appended, cq

    def _dispatch_appended_batch(self, appended: BatchAppend, cq: ConsumeQueue) -> None:
        """CommitLogDispatcherBuildConsumeQueue + BuildIndex for the records of one batch (from the written bytes)."""
        self._commit_log.mapped_file_queue.after_write()
        try:
            cq.put_units_raw(appended.result.queue_offset, appended.cq_units)
        except OSError as exc:  # the CommitLog holds the records; recovery re-dispatches them
            self._store.fail(f"consume queue dispatch failed: {exc}")
        cq.mapped_file_queue.after_write()
        self._store.notify_arriving(((cq.topic, cq.queue_id),))
        if self._config.message_index_enable:
            mapped = appended.mapped
            try:
                self._index_service.build_indexes_for_records(
                    mapped.buffer, appended.start, appended.end, mapped.file_from_offset
                )
            except OSError as exc:
                self._store.fail(f"index file error: {exc}")
        self._store.dispatched_offset = self._commit_log.max_offset

    def _illegal_remark(self) -> str:
        return MESSAGE_ILLEGAL_REMARK % self._config.max_message_size_bytes

    def _refusal(self) -> str | None:
        """The SERVICE_NOT_AVAILABLE remark of a put refused before anything is written (None: go on): the store
        is stopped, failed or a SLAVE; the write fence holds (controller mode); RunningFlags DISK_FULL."""
        store = self._store
        if not store.is_writeable or store.broker_role is BrokerRole.SLAVE:
            return store.unavailable_remark()
        fenced = self._fence_remark()
        if fenced is not None:
            return fenced
        if store.clean_service.disk_full:
            return DISK_FULL_REMARK % store.clean_service.disk_util()
        return None

    def _reserve_logic_room(self, batch: Sequence[MessageExtBrokerInner]) -> None:
        """Create the ConsumeQueue files (and index room) the batch needs before the CommitLog append, so ENOSPC
        refuses the batch before anything is written. Raises OSError."""
        counts: dict[tuple[str, int], int] = {}
        for msg in batch:
            key = (msg.topic, msg.queue_id)
            counts[key] = counts.get(key, 0) + 1
        table = self._commit_log.topic_queue_table
        for (topic, queue_id), count in counts.items():
            cq = self._store.queue_for(topic, queue_id)
            cq.ensure_room(table.get(f"{topic}-{queue_id}", 0), count)
        if self._config.message_index_enable:
            # UNIQ_KEY plus the KEYS words: an upper bound, counted without parsing the properties.
            self._index_service.reserve(sum(msg.properties_string.count(" ") + 2 for msg in batch))

    def _dispatch_batch(self, requests: Sequence[DispatchRequest]) -> None:
        """CommitLogDispatcherBuildConsumeQueue for one put: the units of each queue written together (their
        queue offsets are consecutive within one put, the CommitLog is single-writer)."""
        by_queue: dict[tuple[str, int], list[DispatchRequest]] = {}
        for request in requests:
            key = (request.topic, request.queue_id)
            group = by_queue.get(key)
            if group is None:
                by_queue[key] = [request]
            else:
                group.append(request)
        for (topic, queue_id), group in by_queue.items():
            cq = self._store.queue_for(topic, queue_id)
            assert group[-1].queue_offset - group[0].queue_offset == len(group) - 1, "one writer: dense offsets"
            cq.put_units(group[0].queue_offset, [(r.commit_log_offset, r.msg_size, r.tags_code) for r in group])
            cq.mapped_file_queue.after_write()
        self._store.notify_arriving(by_queue)

    def _build_indexes(self, batch: Sequence[MessageExtBrokerInner], results: Sequence[PutMessageResult]) -> None:
        """Event loop: index entries of the stored messages (IndexService#buildIndex, CommitLogDispatcherBuildIndex).
        An index file that cannot be created fails the store (RocketMQ: makeIndexFileError) until restart.
        """
        try:
            self._index_service.build_indexes_for_batch(batch, results, native=self._config.native_append_enable)
        except OSError as exc:  # the CommitLog holds the records; recovery rebuilds the entries
            self._store.fail(f"index file error: {exc}")


def _with_status(result: PutMessageResult, status: PutMessageStatus, unavailable_remark: str) -> PutMessageResult:
    remark = unavailable_remark if status is PutMessageStatus.SERVICE_NOT_AVAILABLE else result.remark
    return PutMessageResult(
        status,
        wrote_offset=result.wrote_offset,
        wrote_bytes=result.wrote_bytes,
        msg_id=result.msg_id,
        queue_offset=result.queue_offset,
        store_timestamp_ms=result.store_timestamp_ms,
        remark=remark,
        msg_num=result.msg_num,
    )


def _create_failed(exc: OSError) -> PutMessageResult:
    """A file the put needs could not be created: SERVICE_NOT_AVAILABLE when the disk is full (ENOSPC, EDQUOT),
    else CREATE_MAPPED_FILE_FAILED; nothing was written."""
    disk_full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    status = PutMessageStatus.SERVICE_NOT_AVAILABLE if disk_full else PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    return PutMessageResult(status, remark=f"{CREATE_MAPPED_FILE_FAILED_REMARK} {exc}")
