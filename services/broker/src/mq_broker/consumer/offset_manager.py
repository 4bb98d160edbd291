"""Consumer offsets of one broker, persisted as ``<store root>/config/consumerOffset.json``.

Mirrors org.apache.rocketmq.broker.offset.ConsumerOffsetManager (#commitOffset, #queryOffset,
#whichTopicByConsumer, #whichGroupByTopic, #cleanOffset, #cleanOffsetByTopic) and the broker's periodic
``persistConsumerOffset`` task (flushConsumerOffsetInterval). The JSON keeps RocketMQ's shape, queue ids as
string keys::

    {"offsetTable": {"<topic>@<group>": {"0": 12, "1": 7}}, "dataVersion": {"stateVersion", "timestamp", "counter"}}

An offset is the next queue offset the group consumes (one past the last consumed message).

Threads: :meth:`ConsumerOffsetManager.load` and :meth:`~ConsumerOffsetManager.persist` block (start-up,
shutdown); everything else runs on the event loop; :meth:`~ConsumerOffsetManager.start` runs a task that writes
the table every ``persist_interval_ms`` through ``asyncio.to_thread`` when it changed. A crash loses at most
that interval of commits (consumers then see some messages again: at-least-once, as RocketMQ).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from mq_common.logging import get_logger
from mq_common.protocol import ConsumerQueueOffset, DataVersion
from mq_common.tasks import cancel_and_wait

from mq_broker.consumer.config_file import ConfigManager, persist_json

log = get_logger("mq_broker.consumer.offset_manager")

TOPIC_GROUP_SEPARATOR: Final = "@"
"""ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR: table keys are ``topic@group``."""
OFFSET_UPDATE_VERSION_STEP: Final = 500
"""BrokerConfig.consumerOffsetUpdateVersionStep: the data version moves once per this many commits."""
MAX_OFFSET_TABLE_KEYS: Final = 1_000_000
"""topic@group pairs one broker keeps; a commit for a new pair beyond it is dropped and logged (the bound)."""


def _key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def _split(key: str) -> tuple[str, str] | None:
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class ConsumerOffsetManager(ConfigManager):
    """The broker's ``topic@group -> {queue id: offset}`` table."""

    table_name = "consumer offset table"

    def __init__(self, config_path: Path, *, persist_interval_ms: int) -> None:
        assert persist_interval_ms > 0
        super().__init__(config_path)
        self.persist_interval_ms = persist_interval_ms
        self._table: dict[str, dict[int, int]] = {}
        self._changes = 0
        self._persisted_changes = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def offset_table(self) -> Mapping[str, Mapping[int, int]]:
        """Read-only view ``{"topic@group": {queue_id: offset}}`` (live: do not hold it across awaits)."""
        return MappingProxyType({k: MappingProxyType(v) for k, v in self._table.items()})

    # --- persistence ------------------------------------------------------------------------------------------

    def decode(self, data: Mapping[str, Any]) -> None:
        """The persisted table replaces the one in memory (after a crash: the last file written, or its .bak)."""
        self._table = {
            str(key): {int(q): int(o) for q, o in dict(queues).items()}
            for key, queues in dict(data.get("offsetTable") or {}).items()
        }

    def encode(self) -> dict[str, Any]:
        """ConsumerOffsetManager#encode: the JSON object of the file (keys sorted, queue ids as strings)."""
        return {
            "offsetTable": {
                key: {str(q): o for q, o in sorted(queues.items())} for key, queues in sorted(self._table.items())
            },
            "dataVersion": self.data_version.to_json(),
        }

    def persist(self) -> None:
        """Write the table atomically (config_file.persist_json). Blocking; raises OSError."""
        changes = self._changes
        super().persist()
        self._persisted_changes = changes

    async def persist_async(self) -> None:
        """Snapshot on the event loop, write in a worker thread. Raises OSError."""
        changes, data = self._changes, self.encode()
        await asyncio.to_thread(persist_json, self.config_path, data)
        self._persisted_changes = max(self._persisted_changes, changes)

    def start(self) -> None:
        """Start the periodic persist task (event loop). Idempotent."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._persist_periodically())

    async def stop(self) -> None:
        """Cancel the periodic task and persist once. Raises OSError when that last write fails."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.persist_async()

    async def _persist_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_ms / 1000)
            if self._changes == self._persisted_changes:
                continue
            try:
                await self.persist_async()
            except OSError as exc:
                log.error("consumer_offset_persist_failed", path=str(self.config_path), error=str(exc))

    # --- queries and changes (event loop) ------------------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Set ``group``'s offset of ``topic``/``queue_id`` (moving back is allowed and logged). Mirrors
        ConsumerOffsetManager#commitOffset; the caller validated the values."""
        key = _key(topic, group)
        queues = self._table.get(key)
        if queues is None:
            if len(self._table) >= MAX_OFFSET_TABLE_KEYS:
                log.error("consumer_offset_table_full", key=key, limit=MAX_OFFSET_TABLE_KEYS)
                return
            queues = self._table[key] = {}
        old = queues.get(queue_id)
        queues[queue_id] = offset
        if old is not None and offset < old:
            log.warning(
                "consumer_offset_moved_back", client=client_host, key=key, queue_id=queue_id, old=old, new=offset
            )
        self._changes += 1
        if self._changes % OFFSET_UPDATE_VERSION_STEP == 0:
            self.data_version = self.data_version.next_version()

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group has none for that queue."""
        return self._table.get(_key(topic, group), {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """``{queue_id: offset}`` of ``group`` on ``topic`` (a copy; empty when none)."""
        return dict(self._table.get(_key(topic, group), {}))

    def which_topics_by_consumer(self, group: str) -> set[str]:
        """Topics ``group`` has offsets for. Mirrors ConsumerOffsetManager#whichTopicByConsumer."""
        return {pair[0] for pair in map(_split, self._table) if pair is not None and pair[1] == group}

    def which_groups_by_topic(self, topic: str) -> set[str]:
        """Groups with offsets for ``topic``. Mirrors ConsumerOffsetManager#whichGroupByTopic."""
        return {pair[1] for pair in map(_split, self._table) if pair is not None and pair[0] == topic}

    def remove_group(self, group: str) -> None:
        """Drop every offset of ``group``. Mirrors ConsumerOffsetManager#cleanOffset."""
        self._remove(lambda pair: pair[1] == group)

    def remove_topic(self, topic: str) -> None:
        """Drop every offset of ``topic``. Mirrors ConsumerOffsetManager#cleanOffsetByTopic."""
        self._remove(lambda pair: pair[0] == topic)

    def _remove(self, matches: Callable[[tuple[str, str]], bool]) -> None:
        doomed = [key for key in self._table if (pair := _split(key)) is not None and matches(pair)]
        for key in doomed:
            log.warning("consumer_offset_removed", key=key, offsets=self._table.pop(key))
        if doomed:
            self._changes += 1
            self.data_version = self.data_version.next_version()

    def all_offsets(self) -> list[ConsumerQueueOffset]:
        """Every committed offset, sorted by topic@group then queue id (GET_ALL_CONSUMER_OFFSET's table)."""
        out: list[ConsumerQueueOffset] = []
        for key, queues in sorted(self._table.items()):
            pair = _split(key)
            if pair is not None:
                out.extend(ConsumerQueueOffset(pair[1], pair[0], q, o) for q, o in sorted(queues.items()))
        return out

    def replace_from_master(self, offsets: Iterable[ConsumerQueueOffset], data_version: DataVersion) -> bool:
        """A slave takes its master's whole offset table (RocketMQ merges it into its own with putAll; replacing
        also drops the offsets of groups the master removed). Returns whether the table changed; the caller
        persists (the periodic task would too). At most MAX_OFFSET_TABLE_KEYS topic@group pairs are kept. Event
        loop. Mirrors SlaveSynchronize#syncConsumerOffset."""
        table: dict[str, dict[int, int]] = {}
        for o in offsets:
            key = _key(o.topic, o.consumer_group)
            if key in table or len(table) < MAX_OFFSET_TABLE_KEYS:
                table.setdefault(key, {})[o.queue_id] = o.offset
        self.data_version = data_version
        if table == self._table:
            return False
        self._table = table
        self._changes += 1
        return True
