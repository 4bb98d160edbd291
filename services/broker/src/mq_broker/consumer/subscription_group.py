"""Subscription groups of one broker, persisted as ``<store root>/config/subscriptionGroup.json``.

Mirrors org.apache.rocketmq.broker.subscription.SubscriptionGroupManager (#init, #findSubscriptionGroupConfig,
#updateSubscriptionGroupConfig, #deleteSubscriptionGroupConfig, persistence through ConfigManager). The JSON keeps
RocketMQ's shape::

    {"subscriptionGroupTable": {name: {"groupName", "consumeEnable", "consumeFromMinEnable",
      "consumeBroadcastEnable", "consumeMessageOrderly", "retryQueueNums", "retryMaxTimes", "brokerId",
      "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable", "groupSysFlag", "consumeTimeoutMinute",
      "attributes"}},
     "dataVersion": {"stateVersion", "timestamp", "counter"}}

Threads: :meth:`SubscriptionGroupManager.load` and :meth:`~SubscriptionGroupManager.persist` block (start-up,
shutdown); everything else runs on the event loop, and changes are written in the background
(mq_broker.consumer.config_file.BackgroundPersister).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from mq_common.constants import MixAll, validate_group
from mq_common.errors import InvalidParameterError
from mq_common.logging import get_logger
from mq_common.protocol import DataVersion, SubscriptionGroupConfig

from mq_broker.consumer.config_file import ConfigManager

log = get_logger("mq_broker.consumer.subscription_group")

MAX_RETRY_QUEUE_NUMS: Final = 1024
"""Upper bound of retryQueueNums (a topic's queue count bound, TopicConfigManager's)."""
MAX_SUBSCRIPTION_GROUPS: Final = 100_000
"""Groups one broker keeps; auto-creation beyond it is refused (the table's bound)."""

SYSTEM_GROUPS: Final = (
    MixAll.TOOLS_CONSUMER_GROUP,
    MixAll.FILTERSRV_CONSUMER_GROUP,
    MixAll.SELF_TEST_CONSUMER_GROUP,
    MixAll.ONS_HTTP_PROXY_GROUP,
    MixAll.CID_ONSAPI_PULL_GROUP,
    MixAll.CID_ONSAPI_PERMISSION_GROUP,
    MixAll.CID_ONSAPI_OWNER_GROUP,
    MixAll.CID_SYS_RMQ_TRANS,
)
"""SubscriptionGroupManager#init: the groups every broker has, with the defaults."""


def check_subscription_group_config(config: SubscriptionGroupConfig) -> str | None:
    """RocketMQ's remark when a group config from an admin call is not acceptable, else None."""
    remark = validate_group(config.group_name)
    if remark is not None:
        return remark
    if not 0 <= config.retry_queue_nums <= MAX_RETRY_QUEUE_NUMS:
        return f"retryQueueNums {config.retry_queue_nums} is out of range [0, {MAX_RETRY_QUEUE_NUMS}]"
    if config.retry_max_times < -1:
        return f"retryMaxTimes {config.retry_max_times} is below -1"
    if config.broker_id < 0 or config.which_broker_when_consume_slowly < 0:
        return "brokerId and whichBrokerWhenConsumeSlowly must not be negative"
    if config.consume_timeout_minute < 0:
        return f"consumeTimeoutMinute {config.consume_timeout_minute} is negative"
    return None


class SubscriptionGroupManager(ConfigManager):
    """The broker's subscription group table. With ``auto_create_subscription_group`` an unknown (valid) group is
    created with RocketMQ's defaults on first use (autoCreateSubscriptionGroup)."""

    table_name = "subscription group table"

    def __init__(self, config_path: Path, *, auto_create_subscription_group: bool) -> None:
        super().__init__(config_path)
        self.auto_create_subscription_group = auto_create_subscription_group
        self._table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}

    # --- persistence ------------------------------------------------------------------------------------------

    def decode(self, data: Mapping[str, Any]) -> None:
        """The persisted groups over the system groups."""
        for name, raw in dict(data.get("subscriptionGroupTable") or {}).items():
            self._table[str(name)] = SubscriptionGroupConfig.from_json(raw)

    def encode(self) -> dict[str, Any]:
        """SubscriptionGroupManager#encode: the JSON object of the file (groups sorted by name)."""
        return {
            "subscriptionGroupTable": {name: c.to_json() for name, c in sorted(self._table.items())},
            "dataVersion": self.data_version.to_json(),
        }

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self.persist_soon()

    # --- queries and changes (event loop) ------------------------------------------------------------------------

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; an unknown group is created with the defaults when auto-creation is on and the
        name is valid (persisted in the background), else None. Mirrors
        SubscriptionGroupManager#findSubscriptionGroupConfig."""
        config = self._table.get(group)
        if config is not None or not self.auto_create_subscription_group:
            return config
        if validate_group(group) is not None or len(self._table) >= MAX_SUBSCRIPTION_GROUPS:
            return None
        config = self._table[group] = SubscriptionGroupConfig(group)
        log.info("subscription_group_auto_created", group=group)
        self._changed()
        return config

    def contains(self, group: str) -> bool:
        """SubscriptionGroupManager#containsSubscriptionGroup (no auto-creation)."""
        return group in self._table

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> bool:
        """Create or replace ``config``; False when nothing changed. Raises InvalidParameterError (29) for an
        illegal name or field, or when the table is full. Mirrors
        SubscriptionGroupManager#updateSubscriptionGroupConfig (attributes are taken as given)."""
        remark = check_subscription_group_config(config)
        if remark is not None:
            raise InvalidParameterError(remark)
        old = self._table.get(config.group_name)
        if old == config:
            return False
        if old is None and len(self._table) >= MAX_SUBSCRIPTION_GROUPS:
            raise InvalidParameterError(f"too many subscription groups, at most {MAX_SUBSCRIPTION_GROUPS}")
        self._table[config.group_name] = replace(config, attributes=dict(config.attributes))
        log.info("subscription_group_updated", group=config.group_name, created=old is None)
        self._changed()
        return True

    def delete_subscription_group_config(self, group: str) -> bool:
        """Remove ``group``; False when it did not exist. Mirrors
        SubscriptionGroupManager#deleteSubscriptionGroupConfig."""
        if self._table.pop(group, None) is None:
            log.warning("subscription_group_delete_unknown", group=group)
            return False
        log.info("subscription_group_deleted", group=group)
        self._changed()
        return True

    def configs(self) -> list[SubscriptionGroupConfig]:
        """Every group, sorted by name (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        return [self._table[name] for name in sorted(self._table)]

    def replace_from_master(self, configs: Iterable[SubscriptionGroupConfig], data_version: DataVersion) -> bool:
        """A slave takes its master's whole group table (``data_version`` is the master's), persisted in the
        background; nothing happens when the versions are equal. Returns whether it changed. Event loop. Mirrors
        SlaveSynchronize#syncSubscriptionGroupConfig (the master's version is kept, as in TopicConfigManager)."""
        if data_version == self.data_version:
            return False
        self._table = {c.group_name: replace(c, attributes=dict(c.attributes)) for c in configs}
        self.data_version = data_version
        self.persist_soon()
        log.info("subscription_group_synchronized", groups=len(self._table), data_version=str(data_version))
        return True
