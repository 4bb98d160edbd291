"""Message store configuration: one frozen value built from the broker settings at start-up.

Mirrors org.apache.rocketmq.store.config.{MessageStoreConfig, FlushDiskType}. Every size carries its unit in
the name; the relations between limits are asserted in :meth:`MessageStoreConfig.__post_init__`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from mq_common.constants import MAX_MESSAGE_SIZE_BYTES

GIB: Final = 1024 * 1024 * 1024
CQ_UNIT_SIZE_BYTES: Final = 20
# A record needs its fixed fields (at least ~90 bytes); a file must also hold the 8-byte END_OF_FILE blank.
MIN_COMMIT_LOG_FILE_SIZE_BYTES: Final = 256
# RocketMQ's MessageExtEncoder: the whole record may exceed the body limit by this much (headers, properties).
RECORD_OVERHEAD_LIMIT_BYTES: Final = 64 * 1024


class FlushDiskType(StrEnum):
    """When a put counts as stored. Mirrors org.apache.rocketmq.store.config.FlushDiskType."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


@dataclass(frozen=True, slots=True)
class MessageStoreConfig:
    """Store layout, flush policy and limits. Mirrors MessageStoreConfig (names in Python style).

    Files live under ``store_path_root_dir``: ``commitlog/``, ``consumequeue/<topic>/<queueId>/``,
    ``checkpoint``, ``abort``, ``lock``.
    """

    store_path_root_dir: Path
    mapped_file_size_commit_log_bytes: int = GIB
    mapped_file_size_consume_queue_units: int = 300_000
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    sync_flush_timeout_ms: int = 5_000
    group_commit_wait_interval_ms: int = 10
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = 1_000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    max_message_size_bytes: int = MAX_MESSAGE_SIZE_BYTES
    check_crc_on_recover: bool = True
    # RocketMQ caps an in-memory pull at 32 messages / 256 KiB; a gRPC call costs ~0.5 ms, so pull more.
    max_transfer_count_per_pull: int = 1_024
    max_transfer_bytes_per_pull: int = 4 * 1024 * 1024
    # MessageStoreConfig.maxFilterMessageSize: how far (in CQ bytes) one pull scans past non-matching tags.
    max_filter_message_size_bytes: int = 16_000

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
    def lock_path(self) -> Path:
        return self.store_path_root_dir / "lock"

    @property
    def mapped_file_size_consume_queue_bytes(self) -> int:
        return self.mapped_file_size_consume_queue_units * CQ_UNIT_SIZE_BYTES

    @property
    def max_record_size_bytes(self) -> int:
        """The largest whole record accepted (MessageExtEncoder: body limit + 64 KiB)."""
        return self.max_message_size_bytes + RECORD_OVERHEAD_LIMIT_BYTES
