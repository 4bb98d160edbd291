"""Message store configuration: one frozen value built from the broker settings at start-up.

Mirrors org.apache.rocketmq.store.config.{MessageStoreConfig, FlushDiskType}. Every size carries its unit in
the name; the relations between limits are asserted in :meth:`MessageStoreConfig.__post_init__`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from mq_common.config_fields import described
from mq_common.constants import MAX_MESSAGE_SIZE_BYTES

GIB: Final = 1024 * 1024 * 1024
CQ_UNIT_SIZE_BYTES: Final = 20
# A record needs its fixed fields (at least ~90 bytes); a file must also hold the 8-byte END_OF_FILE blank.
MIN_COMMIT_LOG_FILE_SIZE_BYTES: Final = 256
# RocketMQ's MessageExtEncoder: the whole record may exceed the body limit by this much (headers, properties).
RECORD_OVERHEAD_LIMIT_BYTES: Final = 64 * 1024


def parse_delete_when(delete_when: str) -> frozenset[int]:
    """The hours of MessageStoreConfig.deleteWhen (``"04"``, ``"04;05"``). Raises ValueError on a bad hour."""
    hours = frozenset(int(part) for part in delete_when.split(";") if part.strip())
    if any(not 0 <= hour <= 23 for hour in hours):
        raise ValueError(f"deleteWhen {delete_when!r}: hours are 00..23")
    return hours


class FlushDiskType(StrEnum):
    """When a put counts as stored. Mirrors org.apache.rocketmq.store.config.FlushDiskType."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class BrokerRole(StrEnum):
    """A broker's part in its broker group. Mirrors org.apache.rocketmq.store.config.BrokerRole.

    ASYNC_MASTER answers a put once stored locally; SYNC_MASTER once ``in_sync_replicas`` copies hold it; SLAVE
    refuses client writes and stores what its master replicates.
    """

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True, slots=True)
class MessageStoreConfig:
    """Store layout, flush policy and limits. Mirrors MessageStoreConfig (names in Python style).

    Files live under ``store_path_root_dir``: ``commitlog/``, ``consumequeue/<topic>/<queueId>/``,
    ``checkpoint``, ``abort``, ``lock``.
    """

    store_path_root_dir: Path
    mapped_file_size_commit_log_bytes: int = described(
        GIB, "MessageStoreConfig.mappedFileSizeCommitLog: bytes per CommitLog file."
    )
    mapped_file_size_consume_queue_units: int = described(
        300_000, "MessageStoreConfig.mappedFileSizeConsumeQueue / 20: 20-byte units per ConsumeQueue file."
    )
    flush_disk_type: FlushDiskType = described(
        FlushDiskType.ASYNC_FLUSH, "MessageStoreConfig.flushDiskType: SYNC_FLUSH or ASYNC_FLUSH."
    )
    broker_role: BrokerRole = described(
        BrokerRole.ASYNC_MASTER, "MessageStoreConfig.brokerRole: ASYNC_MASTER, SYNC_MASTER or SLAVE."
    )
    sync_flush_timeout_ms: int = described(5_000, "MessageStoreConfig.syncFlushTimeout: SYNC_FLUSH wait limit, ms.")
    group_commit_wait_interval_ms: int = 10
    flush_interval_commit_log_ms: int = described(
        500, "MessageStoreConfig.flushIntervalCommitLog: ASYNC_FLUSH period, ms."
    )
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = described(1_000, "MessageStoreConfig.flushIntervalConsumeQueue, ms.")
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    max_message_size_bytes: int = described(
        MAX_MESSAGE_SIZE_BYTES, "MessageStoreConfig.maxMessageSize: body limit, bytes."
    )
    check_crc_on_recover: bool = True
    # RocketMQ caps an in-memory pull at 32 messages / 256 KiB; a gRPC call costs ~0.5 ms, so pull more.
    max_transfer_count_per_pull: int = described(
        1_024, "MessageStoreConfig.maxTransferCountOnMessageInMemory (RocketMQ: 32): messages per pull."
    )
    max_transfer_bytes_per_pull: int = described(
        4 * 1024 * 1024, "MessageStoreConfig.maxTransferBytesOnMessageInMemory (RocketMQ: 256 KiB): bytes per pull."
    )
    # MessageStoreConfig.maxFilterMessageSize: how far (in CQ bytes) one pull scans past non-matching tags.
    max_filter_message_size_bytes: int = 16_000
    # --- IndexFile (index_service.py) ---
    # messageIndexEnable: index UNIQ_KEY and KEYS of every message for queryMessage.
    message_index_enable: bool = described(
        True, "MessageStoreConfig.messageIndexEnable: index KEYS and UNIQ_KEY for queries."
    )
    # maxHashSlotNum / maxIndexNum: hash slots and 20-byte entries per index file.
    max_hash_slot_num: int = described(5_000_000, "MessageStoreConfig.maxHashSlotNum: hash slots per index file.")
    max_index_num: int = described(5_000_000 * 4, "MessageStoreConfig.maxIndexNum: 20-byte entries per index file.")
    # maxMsgsNumBatch: messages one queryMessage returns at most; defaultQueryMaxNum: by UNIQ_KEY.
    max_msgs_num_batch: int = described(
        64, "MessageStoreConfig.maxMsgsNumBatch: messages one QueryMessage returns at most."
    )
    default_query_max_num: int = 32
    # --- disk space management (clean_service.py) ---
    # fileReservedTime: CommitLog files last modified longer ago than this are expired.
    file_reserved_time_hours: int = described(
        72, "MessageStoreConfig.fileReservedTime: CommitLog files expire after, hours."
    )
    # deleteWhen: local hours ("04", "04;05") at which expired files are deleted.
    delete_when: str = described(
        "04", "MessageStoreConfig.deleteWhen: local hours (';'-separated) at which expired files go."
    )
    # diskMaxUsedSpaceRatio: above this usage of the store partition expired files go at once (any hour).
    disk_max_used_space_ratio_percent: int = described(
        75, "MessageStoreConfig.diskMaxUsedSpaceRatio: above this usage expired files go at any hour, %."
    )
    # diskSpaceWarningLevelRatio: above it the store is DISK_FULL and refuses puts until usage drops again.
    disk_space_warning_level_ratio: float = described(
        0.90, "MessageStoreConfig.diskSpaceWarningLevelRatio (0..1): above it DISK_FULL refuses puts."
    )
    # diskSpaceCleanForciblyRatio: above it the oldest files go at once, expired or not.
    disk_space_clean_forcibly_ratio: float = described(
        0.85, "MessageStoreConfig.diskSpaceCleanForciblyRatio (0..1): above it the oldest files go at once."
    )
    # cleanFileForciblyEnable: when False, usage above disk_space_clean_forcibly_ratio deletes nothing unexpired
    # (expired files still go above disk_max_used_space_ratio_percent; DISK_FULL still refuses puts).
    clean_file_forcibly_enable: bool = described(
        True,
        "MessageStoreConfig.cleanFileForciblyEnable: above disk_space_clean_forcibly_ratio the oldest files go "
        "unexpired; false keeps them (a store on a disk shared with other data).",
    )
    # cleanResourceInterval: period of the disk check and of the clean round.
    clean_resource_interval_ms: int = described(
        10_000, "MessageStoreConfig.cleanResourceInterval: disk check and clean round period, ms."
    )
    # deleteCommitLogFilesInterval / deleteConsumeQueueFilesInterval: pause between two deleted files.
    delete_commit_log_files_interval_ms: int = described(
        100, "MessageStoreConfig.deleteCommitLogFilesInterval: pause between files, ms."
    )
    delete_consume_queue_files_interval_ms: int = described(
        100, "MessageStoreConfig.deleteConsumeQueueFilesInterval: pause between queues, ms."
    )
    # deleteFileBatchMax: CommitLog files deleted per clean round at most.
    delete_file_batch_max: int = described(
        10, "MessageStoreConfig.deleteFileBatchMax: CommitLog files per clean round."
    )
    # destroyMapedFileIntervalForcibly: a file still pinned this long after its deletion is logged as hanged.
    destroy_mapped_file_interval_forcibly_ms: int = described(
        120_000, "MessageStoreConfig.destroyMapedFileIntervalForcibly: a pinned deleted file is reported after, ms."
    )
    # warmMapedFileEnable: prefault every page of a new CommitLog file (off the loop).
    warm_mapped_file_enable: bool = described(
        False, "MessageStoreConfig.warmMapedFileEnable: prefault new CommitLog files (off loop)."
    )
    # PrefaultService: keep this many bytes past the write position prefaulted, on its own thread (0: off).
    prefault_ahead_commit_log_bytes: int = described(
        8 * 1024 * 1024,
        "Bytes past the CommitLog write position kept prefaulted by the PrefaultService thread (0: off), so "
        "first-touch page faults leave the event loop (the warm-up of RocketMQ's AllocateMappedFileService).",
    )
    prefault_ahead_consume_queue_bytes: int = described(
        64 * 1024, "Likewise for each ConsumeQueue's last file, bytes (0: off)."
    )
    # Drop the CommitLog's flushed bytes more than page_cache_keep_bytes behind the flush point from the page cache
    # (flusher thread), so new writes reuse those pages (MappedFileQueue#drop_page_cache_behind). Not in RocketMQ.
    page_cache_recycle_enable: bool = described(
        True,
        "Drop the CommitLog's flushed bytes more than page_cache_keep_bytes behind the flush point from the page "
        "cache, so new writes reuse those pages instead of memory the VM handed back to its host (not in RocketMQ; "
        "reads of older bytes come from the disk).",
    )
    page_cache_keep_bytes: int = described(
        256 * 1024 * 1024,
        "Flushed CommitLog bytes behind the flush point kept in the page cache when recycling, bytes.",
    )
    # --- replication (mq_broker.ha; RocketMQ 4's static roles) ---
    ha_listen_port: int = described(
        -1,
        "MessageStoreConfig.haListenPort: the HA port slaves connect to; -1: listen_port + 1 (BrokerStartup's rule; "
        "a free port when listen_port is 0); 0 picks a free port (advertised to the name servers).",
    )
    ha_master_address: str = described(
        "",
        "MessageStoreConfig.haMasterAddress: host:port of the master's HA port for a SLAVE; empty: learnt from the "
        "name server's RegisterBroker answer (ha_server_addr).",
    )
    in_sync_replicas: int = described(
        2,
        "MessageStoreConfig.inSyncReplicas: copies (the master's counted) that must hold a put before a SYNC_MASTER "
        "acknowledges it (RocketMQ's default 1 means the master alone; 2 = the master and one slave).",
    )
    ha_max_gap_not_in_sync_bytes: int = described(
        256 * 1024 * 1024,
        "MessageStoreConfig.haMaxGapNotInSync: a slave further behind than this is not in sync; a SYNC_MASTER with "
        "too few in-sync slaves answers SLAVE_NOT_AVAILABLE at once, bytes.",
    )
    min_in_sync_replicas: int = described(
        1,
        "MessageStoreConfig.minInSyncReplicas: in controller mode (enableAutoInSyncReplicas semantics) a SYNC_MASTER "
        "waits for min(in_sync_replicas, SyncStateSet size) copies, but never fewer than this.",
    )
    ha_max_time_slave_not_catchup_ms: int = described(
        15_000,
        "MessageStoreConfig.haMaxTimeSlaveNotCatchup: in controller mode a slave that has not held the master's max "
        "offset for this long leaves the SyncStateSet, ms.",
    )
    ha_send_heartbeat_interval_ms: int = described(
        5_000,
        "MessageStoreConfig.haSendHeartbeatInterval: the master sends an empty frame, the slave its offset, when "
        "idle this long, ms.",
    )
    ha_housekeeping_interval_ms: int = described(
        20_000,
        "MessageStoreConfig.haHousekeepingInterval: an HA connection silent this long is closed, ms.",
    )
    ha_transfer_batch_size_bytes: int = described(
        1024 * 1024,
        "MessageStoreConfig.haTransferBatchSize (RocketMQ: 32 KiB): CommitLog bytes per HA frame at most "
        "(docs/performance.md, Replication transport and The ASYNC_MASTER's frames).",
    )
    ha_async_frame_linger_ms: int = described(
        20,
        "An ASYNC_MASTER's HA writer, after a frame that took all it had, waits this long before the next one, so "
        "that frames fill up (fewer, larger frames: less CPU on both ends; the slave lags by up to this much more). "
        "RocketMQ's writer is not woken by an ASYNC_MASTER's puts at all and looks again every 100 ms. 0: every put "
        "wakes it, as for a SYNC_MASTER (which never lingers), ms.",
    )
    # Append batches with the C loop of mq_broker.store._native when it is built (same bytes as the Python path).
    native_append_enable: bool = True

    def __post_init__(self) -> None:
        assert self.mapped_file_size_commit_log_bytes >= MIN_COMMIT_LOG_FILE_SIZE_BYTES
        assert self.mapped_file_size_consume_queue_units > 0
        assert self.sync_flush_timeout_ms > 0
        assert self.group_commit_wait_interval_ms > 0
        assert self.flush_interval_commit_log_ms > 0
        assert self.flush_interval_consume_queue_ms > 0
        assert self.max_message_size_bytes > 0
        assert self.max_transfer_count_per_pull > 0
        assert self.max_transfer_bytes_per_pull > 0
        assert self.max_hash_slot_num > 0
        assert self.page_cache_keep_bytes >= 0
        assert self.max_index_num > 1
        assert self.max_msgs_num_batch > 0
        assert self.default_query_max_num > 0
        assert self.file_reserved_time_hours >= 0
        assert 0 < self.disk_max_used_space_ratio_percent <= 100
        assert 0.0 < self.disk_space_clean_forcibly_ratio <= 1.0
        assert 0.0 < self.disk_space_warning_level_ratio <= 1.0
        assert self.clean_resource_interval_ms > 0
        assert self.delete_file_batch_max > 0
        assert -1 <= self.ha_listen_port <= 65535
        assert self.in_sync_replicas >= 1
        assert 1 <= self.min_in_sync_replicas <= self.in_sync_replicas
        assert self.ha_max_time_slave_not_catchup_ms > 0
        assert self.ha_max_gap_not_in_sync_bytes > 0
        assert 0 < self.ha_send_heartbeat_interval_ms < self.ha_housekeeping_interval_ms
        assert self.ha_transfer_batch_size_bytes > 0
        assert 0 <= self.ha_async_frame_linger_ms < self.ha_send_heartbeat_interval_ms
        parse_delete_when(self.delete_when)

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def lock_path(self) -> Path:
        return self.store_path_root_dir / "lock"

    @property
    def epoch_file_path(self) -> Path:
        """MessageStoreConfig#getStorePathEpochFile: the epoch history (mq_broker.store.epoch_file)."""
        return self.store_path_root_dir / "epochFileCheckpoint"

    @property
    def max_record_size_bytes(self) -> int:
        """The largest whole record accepted (MessageExtEncoder: body limit + 64 KiB)."""
        return self.max_message_size_bytes + RECORD_OVERHEAD_LIMIT_BYTES
