"""Broker settings: environment ``MQ_BROKER_<FIELD>`` and an optional YAML (``MQ_BROKER_CONFIG_FILE``).

Mirrors org.apache.rocketmq.common.BrokerConfig and org.apache.rocketmq.store.config.MessageStoreConfig (each
field's description names the RocketMQ property). Read once at start-up on the main thread.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from pathlib import Path
from typing import ClassVar

from mq_common.auth.settings import AuthSettings
from mq_common.constants import MixAll, PermName
from mq_common.settings import ServiceSettings, config_from_settings, mirrored_field
from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from mq_broker.consumer.pop.context import PopConfig
from mq_broker.consumer_metrics import DEFAULT_MAX_CONSUMER_PAIRS
from mq_broker.ha.read_suggestion import DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT
from mq_broker.store.config import MIN_COMMIT_LOG_FILE_SIZE_BYTES, BrokerRole, FlushDiskType, MessageStoreConfig
from mq_broker.topic_config import DEFAULT_AUTO_CREATE_TOPIC_MAX_TOPICS

DEFAULT_STORE_PATH_ROOT_DIR = Path.home() / "store"


class BrokerSettings(ServiceSettings, AuthSettings):
    """Settings of ``mqbroker`` (with mq_common.auth.settings.AuthSettings: ``MQ_BROKER_AUTHENTICATION_ENABLED``,
    ``MQ_BROKER_AUTHORIZATION_ENABLED``, ``MQ_BROKER_INIT_AUTHENTICATION_USER``, ...)."""

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
    mapped_file_size_commit_log_bytes: int = mirrored_field(
        MessageStoreConfig, "mapped_file_size_commit_log_bytes", ge=MIN_COMMIT_LOG_FILE_SIZE_BYTES
    )
    mapped_file_size_consume_queue_units: int = mirrored_field(
        MessageStoreConfig, "mapped_file_size_consume_queue_units", gt=0
    )
    flush_disk_type: FlushDiskType = mirrored_field(MessageStoreConfig, "flush_disk_type")
    broker_role: BrokerRole = mirrored_field(MessageStoreConfig, "broker_role")
    enable_controller_mode: bool = Field(
        default=False,
        description="BrokerConfig.enableControllerMode: the controller at controller_addr decides this broker's "
        "role (RocketMQ 5 controller mode); broker_role is then only the start-up role.",
    )
    controller_addr: str = Field(
        default="",
        description="BrokerConfig.controllerAddr: ';'-separated host:port list of controllers (mqcontroller); "
        "needed with enable_controller_mode.",
    )
    controller_heartbeat_interval_ms: int = Field(
        default=1_000,
        gt=0,
        description="BrokerConfig.brokerHeartbeatInterval: how often a broker in controller mode heartbeats the "
        "controller (and so renews its master lease), ms.",
    )
    controller_lease_ms: int = Field(
        default=2_000,
        gt=0,
        description="How long a master in controller mode keeps acknowledging writes after the last heartbeat the "
        "controller answered MASTER (measured from when that heartbeat was sent), ms. Must exceed "
        "controller_heartbeat_interval_ms and stay below the controller's broker_heartbeat_timeout_ms (3000): the "
        "old master stops acknowledging before the controller can elect another (docs/architecture.md).",
    )
    sync_flush_timeout_ms: int = mirrored_field(MessageStoreConfig, "sync_flush_timeout_ms", gt=0)
    flush_interval_commit_log_ms: int = mirrored_field(MessageStoreConfig, "flush_interval_commit_log_ms", gt=0)
    flush_interval_consume_queue_ms: int = mirrored_field(MessageStoreConfig, "flush_interval_consume_queue_ms", gt=0)
    ha_listen_port: int = mirrored_field(MessageStoreConfig, "ha_listen_port", ge=-1, le=65535)
    ha_master_address: str = mirrored_field(MessageStoreConfig, "ha_master_address")
    in_sync_replicas: int = mirrored_field(MessageStoreConfig, "in_sync_replicas", ge=1, le=17)
    ha_max_gap_not_in_sync_bytes: int = mirrored_field(MessageStoreConfig, "ha_max_gap_not_in_sync_bytes", gt=0)
    min_in_sync_replicas: int = mirrored_field(MessageStoreConfig, "min_in_sync_replicas", ge=1, le=17)
    ha_max_time_slave_not_catchup_ms: int = mirrored_field(MessageStoreConfig, "ha_max_time_slave_not_catchup_ms", gt=0)
    ha_send_heartbeat_interval_ms: int = mirrored_field(MessageStoreConfig, "ha_send_heartbeat_interval_ms", gt=0)
    ha_housekeeping_interval_ms: int = mirrored_field(MessageStoreConfig, "ha_housekeeping_interval_ms", gt=0)
    ha_transfer_batch_size_bytes: int = mirrored_field(
        MessageStoreConfig, "ha_transfer_batch_size_bytes", gt=0, le=64 * 1024 * 1024
    )
    ha_async_frame_linger_ms: int = mirrored_field(MessageStoreConfig, "ha_async_frame_linger_ms", ge=0, le=1000)
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
    metrics_max_consumer_pairs: int = Field(
        default=DEFAULT_MAX_CONSUMER_PAIRS,
        ge=0,
        description="Distinct (topic, consumer_group) label pairs of the consumer metrics; later pairs count as "
        "topic and consumer_group '_other'.",
    )
    max_message_size_bytes: int = mirrored_field(MessageStoreConfig, "max_message_size_bytes", gt=0)
    max_transfer_count_per_pull: int = mirrored_field(MessageStoreConfig, "max_transfer_count_per_pull", gt=0)
    max_transfer_bytes_per_pull: int = mirrored_field(MessageStoreConfig, "max_transfer_bytes_per_pull", gt=0)
    file_reserved_time_hours: int = mirrored_field(MessageStoreConfig, "file_reserved_time_hours", ge=0)
    delete_when: str = mirrored_field(MessageStoreConfig, "delete_when", pattern=r"^\d{1,2}(;\d{1,2})*$")
    disk_max_used_space_ratio_percent: int = mirrored_field(
        MessageStoreConfig, "disk_max_used_space_ratio_percent", ge=10, le=95
    )
    disk_space_warning_level_ratio: float = mirrored_field(
        MessageStoreConfig, "disk_space_warning_level_ratio", ge=0.35, le=0.90
    )
    disk_space_clean_forcibly_ratio: float = mirrored_field(
        MessageStoreConfig, "disk_space_clean_forcibly_ratio", ge=0.30, le=0.85
    )
    clean_file_forcibly_enable: bool = mirrored_field(MessageStoreConfig, "clean_file_forcibly_enable")
    clean_resource_interval_ms: int = mirrored_field(MessageStoreConfig, "clean_resource_interval_ms", gt=0)
    delete_commit_log_files_interval_ms: int = mirrored_field(
        MessageStoreConfig, "delete_commit_log_files_interval_ms", ge=0
    )
    delete_consume_queue_files_interval_ms: int = mirrored_field(
        MessageStoreConfig, "delete_consume_queue_files_interval_ms", ge=0
    )
    delete_file_batch_max: int = mirrored_field(MessageStoreConfig, "delete_file_batch_max", gt=0)
    destroy_mapped_file_interval_forcibly_ms: int = mirrored_field(
        MessageStoreConfig, "destroy_mapped_file_interval_forcibly_ms", gt=0
    )
    warm_mapped_file_enable: bool = mirrored_field(MessageStoreConfig, "warm_mapped_file_enable")
    prefault_ahead_commit_log_bytes: int = mirrored_field(MessageStoreConfig, "prefault_ahead_commit_log_bytes", ge=0)
    prefault_ahead_consume_queue_bytes: int = mirrored_field(
        MessageStoreConfig, "prefault_ahead_consume_queue_bytes", ge=0
    )
    page_cache_recycle_enable: bool = mirrored_field(MessageStoreConfig, "page_cache_recycle_enable")
    page_cache_keep_bytes: int = mirrored_field(MessageStoreConfig, "page_cache_keep_bytes", ge=0)
    message_index_enable: bool = mirrored_field(MessageStoreConfig, "message_index_enable")
    max_hash_slot_num: int = mirrored_field(MessageStoreConfig, "max_hash_slot_num", gt=0)
    max_index_num: int = mirrored_field(MessageStoreConfig, "max_index_num", gt=1)
    max_msgs_num_batch: int = mirrored_field(MessageStoreConfig, "max_msgs_num_batch", gt=0)
    flush_consumer_offset_interval_ms: int = Field(
        default=5_000,
        gt=0,
        description="BrokerConfig.flushConsumerOffsetInterval: how often changed consumer offsets are written to "
        "config/consumerOffset.json, ms (a crash loses at most this much of commits).",
    )
    auto_create_subscription_group: bool = Field(
        default=True,
        description="BrokerConfig.autoCreateSubscriptionGroup: create an unknown consumer group with the defaults "
        "on first use.",
    )
    channel_expired_timeout_ms: int = Field(
        default=120_000,
        gt=0,
        description="BrokerConfig.channelExpiredTimeout: a consumer instance without a heartbeat for this long is "
        "dropped from its group, ms.",
    )
    broker_suspend_max_time_ms: int = Field(
        default=15_000,
        ge=0,
        description="brokerSuspendMaxTimeMillis (a consumer setting in RocketMQ): the longest a pull that found "
        "nothing is held for a message to arrive, ms; a longer suspend_timeout_ms is cut to it; 0 never holds.",
    )
    max_pull_polling_size: int = Field(
        default=10_000,
        gt=0,
        description="Pulls held at once for long polling (as maxPopPollingSize bounds POP's); one more is answered "
        "POLLING_FULL (209). RocketMQ's PullRequestHoldService has no bound.",
    )
    revive_queue_num: int = Field(
        default=8,
        gt=0,
        le=64,
        description="BrokerConfig.reviveQueueNum: queues of the revive topic rmq_sys_REVIVE_LOG_<cluster> (POP "
        "checkpoints and acks).",
    )
    revive_interval_ms: int = Field(
        default=1_000, gt=0, description="BrokerConfig.reviveInterval: how often un-acked POP messages are revived, ms."
    )
    pop_max_batch_num: int = Field(
        default=32,
        gt=0,
        le=32,
        description="Messages one PopMessage returns at most (PopMessageProcessor's 32); more is INVALID_PARAMETER.",
    )
    pop_invisible_time_min_ms: int = Field(
        default=1_000,
        ge=0,
        description="Shortest invisible time a PopMessage may ask, ms (RocketMQ's broker has none; its proxy asks 10 s "
        "of SDK clients).",
    )
    pop_invisible_time_max_ms: int = Field(
        default=12 * 3600 * 1000,
        gt=0,
        description="Longest invisible time a PopMessage or ChangeInvisibleTime may ask, ms (the proxy's "
        "maxInvisibleTimeMills, 12 h).",
    )
    pop_poll_time_max_ms: int = Field(
        default=60_000, ge=0, description="Longest a PopMessage that found nothing is held (a longer poll time is cut)."
    )
    pop_from_retry_probability: int = Field(
        default=20,
        ge=0,
        le=100,
        description="BrokerConfig.popFromRetryProbability: percent of pops that read %RETRY%<group> first.",
    )
    pop_max_inflight_messages: int = Field(
        default=1_000_000,
        gt=0,
        description="POP messages in flight (popped, not acked) the broker keeps at most; past it pops read nothing "
        "(as popInflightMessageThreshold, broker-wide). About 400 bytes each.",
    )
    init_pop_offset_by_check_msg_in_mem: bool = Field(
        default=True,
        description="BrokerConfig.initPopOffsetByCheckMsgInMem: a new POP group with init mode LAST starts at 0 "
        "while the queue's first message is in the page cache.",
    )
    shutdown_grace_ms: int = Field(
        default=5_000, ge=0, description="How long in-flight calls may finish on SIGTERM (shutdown hook), ms."
    )
    # --- reads from slaves and SlaveSynchronize (issue 20) ---
    slave_read_enable: bool = Field(
        default=False,
        description="BrokerConfig.slaveReadEnable: pull answers suggest the group's whichBrokerWhenConsumeSlowly "
        "(a slave) when the consumer reads data no longer in memory; off: always the master.",
    )
    access_message_in_memory_max_ratio_percent: int = Field(
        default=DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT,
        ge=0,
        le=100,
        description="MessageStoreConfig.accessMessageInMemoryMaxRatio: a pull that leaves more CommitLog bytes "
        "behind than this share of physical memory counts as consuming slowly, percent (0: any bytes left behind).",
    )
    slave_synchronize_interval_ms: int = Field(
        default=3_000,
        ge=500,
        le=600_000,
        description="How often a SLAVE copies its master's topics, subscription groups, consumer offsets and delay "
        "offsets (SlaveSynchronize#syncAll; RocketMQ: every 10 s), ms.",
    )
    # --- message types: delay levels, timers, recall (mq_broker.schedule, mq_broker.timer) ---
    message_delay_level: str = Field(
        default="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        min_length=2,
        description="MessageStoreConfig.messageDelayLevel: the delay of each level (1-based), space-separated, "
        "units s, m, h, d (and ms, beyond RocketMQ).",
    )
    timer_wheel_enable: bool = Field(
        default=True,
        description="MessageStoreConfig.timerWheelEnable: timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC/_MS) are "
        "held until their time; off: they are refused (MESSAGE_ILLEGAL).",
    )
    timer_precision_ms: int = Field(
        default=1000,
        ge=100,
        le=60_000,
        description="MessageStoreConfig.timerPrecisionMs: a delivery time may lie this far in the past (it is then "
        "delivered at once); further back it is refused, ms. Timers never fire early.",
    )
    timer_max_delay_sec: int = Field(
        default=3 * 24 * 3600,
        ge=1,
        le=30 * 24 * 3600,
        description="MessageStoreConfig.timerMaxDelaySec: the furthest delivery time a timer message may ask for, s.",
    )
    transaction_timeout_ms: int = Field(
        default=6_000,
        ge=1,
        le=24 * 3600 * 1000,
        description="BrokerConfig.transactionTimeOut: a half message younger than this (or than its "
        "CHECK_IMMUNITY_TIME_IN_SECONDS) is not checked back yet; an EndTransaction that is not a check answer and "
        "comes after the immunity time is refused (ILLEGAL_OPERATION), ms.",
    )
    transaction_check_interval_ms: int = Field(
        default=30_000,
        ge=10,
        le=24 * 3600 * 1000,
        description="BrokerConfig.transactionCheckInterval: how often the TransactionalMessageCheckService looks "
        "for open transactions to check back, ms.",
    )
    transaction_check_max: int = Field(
        default=15,
        ge=1,
        le=1000,
        description="BrokerConfig.transactionCheckMax: checks of one half message (TRANSACTION_CHECK_TIMES) before "
        "it is moved to TRANS_CHECK_MAX_TIME_TOPIC.",
    )
    recall_message_enable: bool = Field(
        default=True,
        description="BrokerConfig.recallMessageEnable (RocketMQ: false): RecallMessage cancels a pending timer.",
    )
    enable_topic_message_type_check: bool = Field(
        default=True,
        description="BrokerConfig.enableTopicMessageTypeCheck: a send whose message type (NORMAL, FIFO, DELAY, "
        "TRANSACTION) the topic's message.type attribute does not accept is refused.",
    )
    # --- hostile input (docs/security.md, "Hostile input and limits") ---
    max_send_batch_requests: int = Field(
        default=10_000,
        gt=0,
        description="Send requests one SendStream frame may carry; more: the stream ends INVALID_ARGUMENT before "
        "the frame is parsed, nothing of it stored.",
    )
    auto_create_topic_max_topics: int = Field(
        default=DEFAULT_AUTO_CREATE_TOPIC_MAX_TOPICS,
        gt=0,
        description="Sends auto-create no topic once the broker has this many (TOPIC_NOT_EXIST): keeps its "
        "registration under the name servers' max_topics_per_registration.",
    )
    max_topic_attributes: int = Field(
        default=32, gt=0, description="Attributes one CreateTopic/UpdateTopic may set; more: INVALID_ARGUMENT."
    )
    max_topic_attributes_bytes: int = Field(
        default=1024,
        gt=0,
        description="Encoded bytes of one CreateTopic/UpdateTopic's attributes (they travel in every registration); "
        "more: INVALID_ARGUMENT.",
    )

    auth_max_users: int = Field(default=10_000, gt=0, description="Users config/users.json holds at most.")
    auth_max_acls: int = Field(default=10_000, gt=0, description="ACLs (subjects) config/acls.json holds at most.")

    @model_validator(mode="after")
    def _check_roles(self) -> BrokerSettings:
        """BrokerStartup's rules: a SLAVE's broker_id is > 0 (0 names the master); controller mode needs a
        controller address; HA heartbeats come more often than the housekeeping closes idle connections, and an
        ASYNC_MASTER's frame linger is shorter than the heartbeat interval."""
        if self.broker_role is BrokerRole.SLAVE and self.broker_id == MixAll.MASTER_ID:
            raise ValueError("broker_role SLAVE needs broker_id > 0 (0 is the master's id)")
        if self.enable_controller_mode and not self.controller_addr.strip():
            raise ValueError("enable_controller_mode needs controller_addr")
        if self.enable_controller_mode and self.broker_id == MixAll.MASTER_ID:
            raise ValueError("enable_controller_mode needs broker_id > 0 (the controller's ids start at 1)")
        if self.enable_controller_mode and self.broker_role is BrokerRole.SLAVE:
            raise ValueError(
                "enable_controller_mode needs broker_role ASYNC_MASTER or SYNC_MASTER (the role taken "
                "when elected; the controller decides who is master)"
            )
        if self.controller_lease_ms <= self.controller_heartbeat_interval_ms:
            raise ValueError("controller_lease_ms must exceed controller_heartbeat_interval_ms")
        if self.min_in_sync_replicas > self.in_sync_replicas:
            raise ValueError("min_in_sync_replicas must not exceed in_sync_replicas")
        if self.ha_send_heartbeat_interval_ms >= self.ha_housekeeping_interval_ms:
            raise ValueError("ha_send_heartbeat_interval_ms must be below ha_housekeeping_interval_ms")
        if self.ha_async_frame_linger_ms >= self.ha_send_heartbeat_interval_ms:
            raise ValueError("ha_async_frame_linger_ms must be below ha_send_heartbeat_interval_ms")
        return self

    def ha_port_to_bind(self, bound_listen_port: int) -> int:
        """The HA port to bind: ha_listen_port, or for -1 the gRPC port + 1 (0 when listen_port is 0)."""
        if self.ha_listen_port >= 0:
            return self.ha_listen_port
        return bound_listen_port + 1 if self.listen_port else 0

    def ha_server_addr(self, ha_port: int) -> str:
        """``host:port`` of this broker's HA port as advertised to name servers (RegisterBroker haServerAddr)."""
        return self.broker_addr(ha_port)

    @field_validator("broker_ip")
    @classmethod
    def _strip_brackets(cls, value: str) -> str:
        return value.strip().strip("[]")

    @property
    def namesrv_addr_list(self) -> list[str]:
        """The name server addresses (namesrvAddr split on ';', blanks dropped)."""
        return _split_addrs(self.namesrv_addr)

    @property
    def controller_addr_list(self) -> list[str]:
        """The controller addresses (controllerAddr split on ';', blanks dropped)."""
        return _split_addrs(self.controller_addr)

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
        """The store's config: every MessageStoreConfig field this class has, by name."""
        return config_from_settings(MessageStoreConfig, self)


def pop_config(settings: BrokerSettings) -> PopConfig:
    """The POP settings of ``settings`` (PopConfig's fields by name)."""
    names = [f.name for f in dataclasses.fields(PopConfig)]
    return PopConfig(**{name: getattr(settings, name) for name in names})


def _split_addrs(value: str) -> list[str]:
    """``a;b; ;c`` -> [a, b, c] (RocketMQ's ';'-separated address lists)."""
    return [a.strip() for a in value.split(";") if a.strip()]
