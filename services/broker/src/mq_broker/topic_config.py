"""Topic configs of one broker, persisted as JSON (``<store root>/config/topics.json``).

Mirrors org.apache.rocketmq.broker.topic.TopicConfigManager (system topics at init, createTopicInSendMessageMethod,
updateTopicConfig, persist). The JSON keeps RocketMQ's shape: ``{"dataVersion": {...}, "topicConfigTable":
{name: {"topicName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order", "attributes"}}}``.

Threads: every method runs on the event loop except :meth:`load` and :meth:`persist` (blocking, start-up and
shutdown); changes while serving are written by a background task through ``asyncio.to_thread``. The file is
written as RocketMQ's ConfigManager does (mq_broker.consumer.config_file: temp file, fsync, rename, ``.bak`` of
the previous version, read back from the ``.bak`` when the file is unusable).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from mq_common.constants import MixAll, PermName, is_system_topic, validate_topic
from mq_common.logging import get_logger
from mq_common.protocol import DataVersion, TopicConfig
from mq_common.protocol.topic import MAX_PERM

from mq_broker.consumer.config_file import ConfigManager

log = get_logger("mq_broker.topic_config")
DEFAULT_AUTO_CREATE_TOPIC_MAX_TOPICS: Final = 10_000

MAX_QUEUE_NUMS: Final = 1024
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"


def check_topic_config(config: TopicConfig) -> str | None:
    """RocketMQ's remark when a topic config from an admin call is not acceptable, else None."""
    remark = validate_topic(config.topic_name)
    if remark is not None:
        return remark
    for name, value in (("readQueueNums", config.read_queue_nums), ("writeQueueNums", config.write_queue_nums)):
        if not 0 <= value <= MAX_QUEUE_NUMS:
            return f"{name} {value} is out of range [0, {MAX_QUEUE_NUMS}]"
    if not 0 <= config.perm <= MAX_PERM:
        return f"perm {config.perm} is not a PermName bit set"
    return None


class TopicConfigManager(ConfigManager):
    """The broker's topic table (persisted as config_file.ConfigManager says). ``on_change`` (event loop) runs
    after a topic is created, updated or deleted (the registrar uses it to register at once, like
    TopicConfigManager#registerBrokerData).
    """

    table_name = "topic config"

    def __init__(
        self,
        config_path: Path,
        *,
        cluster_name: str,
        broker_name: str,
        auto_create_topic_enable: bool,
        default_topic_queue_nums: int,
        auto_create_topic_max_topics: int = DEFAULT_AUTO_CREATE_TOPIC_MAX_TOPICS,
    ) -> None:
        super().__init__(config_path)
        self.auto_create_topic_enable = auto_create_topic_enable
        self.auto_create_topic_max_topics = auto_create_topic_max_topics
        self.default_topic_queue_nums = default_topic_queue_nums
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.system_topics: set[str] = set()
        self.on_change: Callable[[], None] | None = None
        self._init_system_topics(cluster_name, broker_name)

    def _init_system_topics(self, cluster_name: str, broker_name: str) -> None:
        """TopicConfigManager#init: the topics every broker has."""
        rw = PermName.PERM_READ | PermName.PERM_WRITE
        self._put_system(TopicConfig(SELF_TEST_TOPIC, 1, 1))
        if self.auto_create_topic_enable:
            n = self.default_topic_queue_nums
            self._put_system(TopicConfig(MixAll.DEFAULT_TOPIC, n, n, PermName.PERM_INHERIT | rw))
        self._put_system(TopicConfig(BENCHMARK_TOPIC, 1024, 1024))
        self._put_system(TopicConfig(cluster_name, perm=PermName.PERM_INHERIT | rw))
        self._put_system(TopicConfig(broker_name, 1, 1, PermName.PERM_INHERIT | rw))
        self._put_system(TopicConfig(OFFSET_MOVED_EVENT))

    def _put_system(self, config: TopicConfig) -> None:
        if validate_topic(config.topic_name) is None:
            self.topic_config_table[config.topic_name] = config
            self.system_topics.add(config.topic_name)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or is_system_topic(topic)

    # --- persistence ------------------------------------------------------------------------------------------

    def decode(self, data: Mapping[str, Any]) -> None:
        """The persisted topics over the system topics."""
        for name, raw in dict(data.get("topicConfigTable") or {}).items():
            self.topic_config_table[str(name)] = TopicConfig.from_json(raw)

    def encode(self) -> dict[str, Any]:
        """TopicConfigManager#encode: the JSON object of the file (topics sorted by name)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in sorted(self.topic_config_table.items())},
        }

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self.persist_soon()
        if self.on_change is not None:
            self.on_change()

    # --- queries and changes (event loop) ------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, client_default_topic_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Create ``topic`` from ``default_topic`` (TBW102) on first send, or None when not allowed.

        Queue nums = min(client default, default topic's write queue nums); perm = the default topic's minus
        INHERIT. With auto-create off TBW102 loses INHERIT, so nothing is created.
        Mirrors TopicConfigManager#createTopicInSendMessageMethod.
        """
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        created = self.send_message_template(topic, default_topic, client_default_topic_queue_nums, topic_sys_flag)
        if created is None:
            return None
        self.topic_config_table[topic] = created
        log.info(
            "topic_created_by_default_topic",
            topic=topic,
            default_topic=default_topic,
            queue_nums=created.write_queue_nums,
        )
        self._changed()
        return created

    def send_message_template(
        self, topic: str, default_topic: str, client_default_topic_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """The config :meth:`create_topic_in_send_message_method` would create for ``topic``, or None when it
        would create none; nothing is stored (the send path checks a send against it first, so a refused send
        creates no topic). None too once the broker has ``auto_create_topic_max_topics`` topics: sends to random
        names must not grow the table (and the registration every name server gets) without bound. Event loop."""
        if len(self.topic_config_table) >= self.auto_create_topic_max_topics:
            log.warning("create_topic_failed_too_many_topics", topic=topic, topics=len(self.topic_config_table))
            return None
        default_config = self.topic_config_table.get(default_topic)
        if default_config is None:
            log.warning("create_topic_failed_no_default_topic", topic=topic, default_topic=default_topic)
            return None
        perm = default_config.perm
        if default_topic == MixAll.DEFAULT_TOPIC and not self.auto_create_topic_enable:
            perm = PermName.PERM_READ | PermName.PERM_WRITE
        if not PermName.is_inherited(perm):
            log.warning("create_topic_failed_default_topic_no_inherit", topic=topic, default_topic=default_topic)
            return None
        queue_nums = max(0, min(client_default_topic_queue_nums, default_config.write_queue_nums))
        return TopicConfig(topic, queue_nums, queue_nums, perm & ~PermName.PERM_INHERIT, topic_sys_flag, attributes={})

    def create_topic_in_send_message_back_method(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """The config of ``topic`` (a %RETRY% or %DLQ% topic), created on first use with ``queue_nums`` read and
        write queues, ``perm`` and ``topic_sys_flag`` (persisted in the background, registered through
        ``on_change``). An existing config is returned as it is. Event loop.
        Mirrors TopicConfigManager#createTopicInSendMessageBackMethod (non-order).
        """
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag, attributes={})
        self.topic_config_table[topic] = created
        log.info("topic_created_by_send_back", topic=topic, queue_nums=queue_nums, perm=PermName.to_string(perm))
        self._changed()
        return created

    def update_topic_config(self, config: TopicConfig) -> bool:
        """Create or replace; returns False when nothing changed. Mirrors TopicConfigManager#updateTopicConfig."""
        if self.topic_config_table.get(config.topic_name) == config:
            return False
        self.topic_config_table[config.topic_name] = replace(config, attributes=dict(config.attributes))
        log.info("topic_config_updated", topic=config.topic_name, config=str(config))
        self._changed()
        return True

    def delete_topic_config(self, topic: str) -> bool:
        """Remove ``topic``; False when it was not there. Persisted in the background; ``on_change`` runs, so the
        registrar registers the table without it. Mirrors TopicConfigManager#deleteTopicConfig."""
        old = self.topic_config_table.pop(topic, None)
        if old is None:
            return False
        self.system_topics.discard(topic)
        log.info("topic_config_deleted", topic=topic, config=str(old))
        self._changed()
        return True

    def adopt_store_topics(self, queue_nums: Mapping[str, int]) -> list[str]:
        """A slave made master takes the topics its store holds consume queues of but its table lacks: topics the
        former master created after this broker's last SlaveSynchronize round, whose messages came through the HA
        stream. ``queue_nums``: topic -> highest queue id + 1 (the caller picks the topics whose data is newer than
        that round, so a topic the master deleted earlier does not come back). Each is created with that many read
        and write queues, perm RW, no attributes (the master's are unknown); a system topic or an illegal name or
        queue count is skipped. Returns the topics created (persisted in the background, ``on_change`` runs once).
        Event loop. Beyond RocketMQ, whose promoted slave answers TOPIC_NOT_EXIST for such a topic until it is
        created again."""
        adopted: list[str] = []
        rw = PermName.PERM_READ | PermName.PERM_WRITE
        for topic, nums in sorted(queue_nums.items()):
            if topic in self.topic_config_table or self.is_system_topic(topic) or validate_topic(topic) is not None:
                continue
            if not 0 < nums <= MAX_QUEUE_NUMS:
                continue
            self.topic_config_table[topic] = TopicConfig(topic, nums, nums, rw, attributes={})
            adopted.append(topic)
        if adopted:
            log.warning("topics_adopted_from_store", topics=adopted)
            self._changed()
        return adopted

    def replace_from_master(self, table: Mapping[str, TopicConfig], data_version: DataVersion) -> bool:
        """A slave takes its master's whole topic table (``data_version`` is the master's): topics the master has
        not are dropped, the others replaced; persisted in the background. Nothing happens when ``data_version``
        equals this table's (the table is already the master's); returns whether it changed. Perms are taken as
        the master has them (the slave's registration does not change routes: name servers take QueueData from
        masters only). Event loop. Mirrors SlaveSynchronize#syncTopicConfig (which then moves its own version on;
        here the master's version is kept, so an unchanged master table costs nothing next round)."""
        if data_version == self.data_version:
            return False
        self.topic_config_table.clear()
        self.topic_config_table.update(
            (name, replace(tc, attributes=dict(tc.attributes))) for name, tc in table.items()
        )
        self.data_version = data_version
        self.persist_soon()
        log.info("topic_config_synchronized", topics=len(table), data_version=str(data_version))
        return True
