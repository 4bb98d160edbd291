"""Broker settings: environment ``MQ_BROKER_<FIELD>`` and an optional YAML (``MQ_BROKER_CONFIG_FILE``).

Mirrors org.apache.rocketmq.common.BrokerConfig and org.apache.rocketmq.store.config.MessageStoreConfig (each
field's description names the RocketMQ property). Read once at start-up on the main thread.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import ClassVar

from mq_common.constants import MAX_MESSAGE_SIZE_BYTES, MixAll, PermName
from mq_common.settings import ServiceSettings
from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from mq_broker.store.config import GIB, MIN_COMMIT_LOG_FILE_SIZE_BYTES, FlushDiskType, MessageStoreConfig

DEFAULT_STORE_PATH_ROOT_DIR = Path.home() / "store"


class BrokerSettings(ServiceSettings):
    """Settings of ``mqbroker``."""

    model_config: ClassVar[SettingsConfigDict] = SettingsConfigDict(
        env_prefix="MQ_BROKER_", extra="forbid", frozen=True
    )

    broker_name: str = Field(default="broker-a", min_length=1, description="BrokerConfig.brokerName.")
    broker_id: int = Field(default=MixAll.MASTER_ID, ge=0, description="BrokerConfig.brokerId; 0 is the master.")
    listen_port: int = Field(
        default=10911, ge=0, le=65535, description="gRPC port (NettyServerConfig.listenPort); 0 picks a free one."
    )
    broker_ip: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="BrokerConfig.brokerIP1: the host advertised to name servers and written as STOREHOST.",
    )
    broker_ip_resolve_wait_ms: int = Field(
        default=60_000,
        ge=0,
        description="How long start-up retries resolving a DNS-name broker_ip (a StatefulSet pod's record appears "
        "after the pod starts), ms; 0 fails at once.",
    )
    namesrv_addr: str = Field(
        default="127.0.0.1:9876",
        description="BrokerConfig.namesrvAddr: ';'-separated host:port list; empty registers nowhere.",
    )
    store_path_root_dir: Path = Field(
        default=DEFAULT_STORE_PATH_ROOT_DIR, description="MessageStoreConfig.storePathRootDir."
    )
    mapped_file_size_commit_log_bytes: int = Field(
        default=GIB,
        ge=MIN_COMMIT_LOG_FILE_SIZE_BYTES,
        description="MessageStoreConfig.mappedFileSizeCommitLog: bytes per CommitLog file.",
    )
    mapped_file_size_consume_queue_units: int = Field(
        default=300_000,
        gt=0,
        description="MessageStoreConfig.mappedFileSizeConsumeQueue / 20: 20-byte units per ConsumeQueue file.",
    )
    flush_disk_type: FlushDiskType = Field(
        default=FlushDiskType.ASYNC_FLUSH, description="MessageStoreConfig.flushDiskType: SYNC_FLUSH or ASYNC_FLUSH."
    )
    sync_flush_timeout_ms: int = Field(
        default=5_000, gt=0, description="MessageStoreConfig.syncFlushTimeout: SYNC_FLUSH wait limit, ms."
    )
    flush_interval_commit_log_ms: int = Field(
        default=500, gt=0, description="MessageStoreConfig.flushIntervalCommitLog: ASYNC_FLUSH period, ms."
    )
    flush_interval_consume_queue_ms: int = Field(
        default=1_000, gt=0, description="MessageStoreConfig.flushIntervalConsumeQueue, ms."
    )
    auto_create_topic_enable: bool = Field(
        default=True, description="BrokerConfig.autoCreateTopicEnable: create unknown topics from TBW102 on send."
    )
    default_topic_queue_nums: int = Field(
        default=4, gt=0, le=1024, description="BrokerConfig.defaultTopicQueueNums: queues of TBW102."
    )
    register_broker_interval_ms: int = Field(
        default=30_000,
        ge=1_000,
        le=60_000,
        description="BrokerConfig.registerNameServerPeriod: re-registration period, ms.",
    )
    register_broker_timeout_ms: int = Field(
        default=6_000,
        gt=0,
        description="BrokerConfig.registerBrokerTimeoutMills (RocketMQ: 24000): one RegisterBroker call, ms.",
    )
    broker_permission: int = Field(
        default=PermName.PERM_READ | PermName.PERM_WRITE,
        ge=0,
        le=15,
        description="BrokerConfig.brokerPermission (PermName bits: 4 read, 2 write).",
    )
    max_message_size_bytes: int = Field(
        default=MAX_MESSAGE_SIZE_BYTES, gt=0, description="MessageStoreConfig.maxMessageSize: body limit, bytes."
    )
    max_transfer_count_per_pull: int = Field(
        default=1_024,
        gt=0,
        description="MessageStoreConfig.maxTransferCountOnMessageInMemory (RocketMQ: 32): messages per pull.",
    )
    max_transfer_bytes_per_pull: int = Field(
        default=4 * 1024 * 1024,
        gt=0,
        description="MessageStoreConfig.maxTransferBytesOnMessageInMemory (RocketMQ: 256 KiB): bytes per pull.",
    )
    file_reserved_time_hours: int = Field(
        default=72, ge=0, description="MessageStoreConfig.fileReservedTime: CommitLog files expire after, hours."
    )
    delete_when: str = Field(
        default="04",
        pattern=r"^\d{1,2}(;\d{1,2})*$",
        description="MessageStoreConfig.deleteWhen: local hours (';'-separated) at which expired files go.",
    )
    disk_max_used_space_ratio_percent: int = Field(
        default=75,
        ge=10,
        le=95,
        description="MessageStoreConfig.diskMaxUsedSpaceRatio: above this usage expired files go at any hour, %.",
    )
    disk_space_warning_level_ratio: float = Field(
        default=0.90,
        ge=0.35,
        le=0.90,
        description="MessageStoreConfig.diskSpaceWarningLevelRatio (0..1): above it DISK_FULL refuses puts.",
    )
    disk_space_clean_forcibly_ratio: float = Field(
        default=0.85,
        ge=0.30,
        le=0.85,
        description="MessageStoreConfig.diskSpaceCleanForciblyRatio (0..1): above it the oldest files go at once.",
    )
    clean_file_forcibly_enable: bool = Field(
        default=True,
        description=(
            "MessageStoreConfig.cleanFileForciblyEnable: above disk_space_clean_forcibly_ratio the oldest files go"
            " unexpired; false keeps them (a store on a disk shared with other data)."
        ),
    )
    clean_resource_interval_ms: int = Field(
        default=10_000,
        gt=0,
        description="MessageStoreConfig.cleanResourceInterval: disk check and clean round period, ms.",
    )
    delete_commit_log_files_interval_ms: int = Field(
        default=100, ge=0, description="MessageStoreConfig.deleteCommitLogFilesInterval: pause between files, ms."
    )
    delete_consume_queue_files_interval_ms: int = Field(
        default=100, ge=0, description="MessageStoreConfig.deleteConsumeQueueFilesInterval: pause between queues, ms."
    )
    delete_file_batch_max: int = Field(
        default=10, gt=0, description="MessageStoreConfig.deleteFileBatchMax: CommitLog files per clean round."
    )
    destroy_mapped_file_interval_forcibly_ms: int = Field(
        default=120_000,
        gt=0,
        description="MessageStoreConfig.destroyMapedFileIntervalForcibly: a pinned deleted file is reported after, ms.",
    )
    warm_mapped_file_enable: bool = Field(
        default=False, description="MessageStoreConfig.warmMapedFileEnable: prefault new CommitLog files (off loop)."
    )
    prefault_ahead_commit_log_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=0,
        description=(
            "Bytes past the CommitLog write position kept prefaulted by the PrefaultService thread (0: off), so"
            " first-touch page faults leave the event loop (the warm-up of RocketMQ's AllocateMappedFileService)."
        ),
    )
    prefault_ahead_consume_queue_bytes: int = Field(
        default=64 * 1024, ge=0, description="Likewise for each ConsumeQueue's last file, bytes (0: off)."
    )
    page_cache_recycle_enable: bool = Field(
        default=True,
        description=(
            "Drop the CommitLog's flushed bytes more than page_cache_keep_bytes behind the flush point from the page"
            " cache, so new writes reuse those pages instead of memory the VM handed back to its host (not in"
            " RocketMQ; reads of older bytes come from the disk)."
        ),
    )
    page_cache_keep_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description="Flushed CommitLog bytes behind the flush point kept in the page cache when recycling, bytes.",
    )
    message_index_enable: bool = Field(
        default=True, description="MessageStoreConfig.messageIndexEnable: index KEYS and UNIQ_KEY for queries."
    )
    max_hash_slot_num: int = Field(
        default=5_000_000, gt=0, description="MessageStoreConfig.maxHashSlotNum: hash slots per index file."
    )
    max_index_num: int = Field(
        default=20_000_000, gt=1, description="MessageStoreConfig.maxIndexNum: 20-byte entries per index file."
    )
    max_msgs_num_batch: int = Field(
        default=64, gt=0, description="MessageStoreConfig.maxMsgsNumBatch: messages one QueryMessage returns at most."
    )
    shutdown_grace_ms: int = Field(
        default=5_000, ge=0, description="How long in-flight calls may finish on SIGTERM (shutdown hook), ms."
    )

    @field_validator("broker_ip")
    @classmethod
    def _strip_brackets(cls, value: str) -> str:
        return value.strip().strip("[]")

    @property
    def namesrv_addr_list(self) -> list[str]:
        """The name server addresses (namesrvAddr split on ';', blanks dropped)."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def broker_addr(self, port: int) -> str:
        """``host:port`` advertised to name servers (IPv6 literals in brackets)."""
        host = self.broker_ip
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def store_ip(self) -> str:
        """The IP literal written as STOREHOST: ``broker_ip`` itself, or what its name resolves to.

        Raises ValueError when the name does not resolve.
        """
        try:
            return str(ipaddress.ip_address(self.broker_ip))
        except ValueError:
            pass
        try:
            return socket.gethostbyname(self.broker_ip)
        except OSError as exc:
            raise ValueError(f"broker_ip {self.broker_ip!r} is neither an IP nor a resolvable name") from exc

    def message_store_config(self) -> MessageStoreConfig:
        return MessageStoreConfig(
            store_path_root_dir=self.store_path_root_dir,
            mapped_file_size_commit_log_bytes=self.mapped_file_size_commit_log_bytes,
            mapped_file_size_consume_queue_units=self.mapped_file_size_consume_queue_units,
            flush_disk_type=self.flush_disk_type,
            sync_flush_timeout_ms=self.sync_flush_timeout_ms,
            flush_interval_commit_log_ms=self.flush_interval_commit_log_ms,
            flush_interval_consume_queue_ms=self.flush_interval_consume_queue_ms,
            max_message_size_bytes=self.max_message_size_bytes,
            max_transfer_count_per_pull=self.max_transfer_count_per_pull,
            max_transfer_bytes_per_pull=self.max_transfer_bytes_per_pull,
            message_index_enable=self.message_index_enable,
            max_hash_slot_num=self.max_hash_slot_num,
            max_index_num=self.max_index_num,
            max_msgs_num_batch=self.max_msgs_num_batch,
            file_reserved_time_hours=self.file_reserved_time_hours,
            delete_when=self.delete_when,
            disk_max_used_space_ratio_percent=self.disk_max_used_space_ratio_percent,
            disk_space_warning_level_ratio=self.disk_space_warning_level_ratio,
            disk_space_clean_forcibly_ratio=self.disk_space_clean_forcibly_ratio,
            clean_file_forcibly_enable=self.clean_file_forcibly_enable,
            clean_resource_interval_ms=self.clean_resource_interval_ms,
            delete_commit_log_files_interval_ms=self.delete_commit_log_files_interval_ms,
            delete_consume_queue_files_interval_ms=self.delete_consume_queue_files_interval_ms,
            delete_file_batch_max=self.delete_file_batch_max,
            destroy_mapped_file_interval_forcibly_ms=self.destroy_mapped_file_interval_forcibly_ms,
            warm_mapped_file_enable=self.warm_mapped_file_enable,
            prefault_ahead_commit_log_bytes=self.prefault_ahead_commit_log_bytes,
            prefault_ahead_consume_queue_bytes=self.prefault_ahead_consume_queue_bytes,
            page_cache_recycle_enable=self.page_cache_recycle_enable,
            page_cache_keep_bytes=self.page_cache_keep_bytes,
        )
