"""SlaveSynchronize: a slave copies its master's metadata every ``interval_ms``: the topic config table, the
committed consumer offsets, the delay offsets, the subscription groups, and the ACL 2.0 users and ACLs.

Mirrors org.apache.rocketmq.broker.slave.SlaveSynchronize (#syncAll: syncTopicConfig, syncConsumerOffset,
syncDelayOffset, syncSubscriptionGroupConfig) as BrokerController schedules it for a SLAVE. The master's address
comes from the broker's registration answers (mq_broker.registration.BrokerRegistrar.master: the name servers
name the live master of the group); while there is none (the master is away) nothing is synchronised and the
slave keeps what it has. Each table replaces the slave's own and is persisted (config/topics.json,
subscriptionGroup.json, consumerOffset.json, delayOffset.json, users.json, acls.json), so a slave promoted later
starts with them.

Users and ACLs (``_sync_users``, ``_sync_acls``) go beyond RocketMQ, whose SlaveSynchronize copies no auth
metadata: here each broker keeps its own users and ACLs (mq_broker.auth.metadata_manager) and admins (``mqadmin
createUser -c``, the chart's auth bootstrap Job) write them to masters only, so without this copy a slave promoted
by the controller would refuse every signed client. A promoted slave must authenticate and authorise the same
clients as the master it replaces. They come through the master's ListUser and ListAcl (no filter), admin RPCs
guarded like GetAllTopicConfig: a component certificate or a super user's signature (the slave signs with the
inner credentials), else NO_PERMISSION 16; ListUser carries passwords only to such callers. The slave's tables are
replaced exactly (its own init user and inner credentials included: created again at its next start if the master
lacks them), written atomically by the auth store (temp + fsync + rename, ``.bak`` kept) and only when they differ,
so an unchanged round writes nothing. Users changed on a slave directly are overwritten at the next round.
Passwords are never logged: failures log the remark or the model's text, which name users, never secrets.

Why 3 s by default (RocketMQ: 10 s): a consumer that moves to the slave while its master is away resumes from
the offsets of the last synchronisation, so a shorter period means fewer messages delivered twice; the cost is
six small unary calls per period. Each part fails alone (logged, retried next round): a master that refuses
one RPC (NO_PERMISSION 16 without the component certificate) does not stop the others. Event loop; the delay
offset, users and ACL files are written through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from mq_common.auth.interceptor import signing_pool
from mq_common.channels import ChannelPool
from mq_common.errors import MQError
from mq_common.logging import get_logger
from mq_common.tasks import cancel_and_wait

from mq_broker.auth.metadata_manager import AuthMetadataManager
from mq_broker.consumer.offset_manager import ConsumerOffsetManager
from mq_broker.consumer.subscription_group import SubscriptionGroupManager
from mq_broker.ha.delay_offset_file import write_delay_offset_json
from mq_broker.ha.master_calls import MASTER_CALL_TIMEOUT_MS, MasterCalls
from mq_broker.settings import BrokerSettings
from mq_broker.timer.timer_message_store import TIMER_CHECKPOINT_FILE_NAME
from mq_broker.topic_config import TopicConfigManager

log = get_logger("mq_broker.ha.slave_synchronize")


@dataclass(frozen=True, slots=True)
class MetadataTables:
    """A broker's metadata tables and the folder of delayOffset.json: what a master serves to its slaves (GET_ALL_*)
    and what SlaveSynchronize replaces on a slave. ``auth``: the users and ACLs (None: not synchronised)."""

    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    config_dir: Path
    auth: AuthMetadataManager | None = None


class SlaveSynchronize:
    """Periodic copy of the master's metadata into ``tables``.

    ``master_addr`` gives the master's broker address now ('' when none is online); ``broker_addr`` this broker's
    own (never synchronised with itself, as RocketMQ checks); ``commit_log_max_offset`` the store's CommitLog max
    offset. :attr:`rounds` counts completed :meth:`sync_all`. :attr:`topics_as_of_offset` (bytes): the CommitLog
    max offset this slave held just before the master answered its last topic table (at construction: the offset
    then): a topic with messages past it may be missing from the table (created later); one whose messages all lie
    before it and that the table lacks was deleted (TopicConfigManager.adopt_store_topics relies on it).
    """

    def __init__(
        self,
        calls: MasterCalls,
        tables: MetadataTables,
        *,
        master_addr: Callable[[], str],
        broker_addr: Callable[[], str],
        interval_ms: int,
        commit_log_max_offset: Callable[[], int],
    ) -> None:
        assert interval_ms > 0
        self._commit_log_max_offset = commit_log_max_offset
        self.topics_as_of_offset = commit_log_max_offset()
        self._calls = calls
        self._tables = tables
        self._master_addr = master_addr
        self._broker_addr = broker_addr
        self.interval_ms = interval_ms
        self.rounds = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def master_addr(self) -> str:
        """The master this slave synchronises from ('' when none is known). Mirrors #getMasterAddr."""
        return self._master_addr()

    def start(self) -> None:
        """Start the periodic task (its first round runs after one interval). Event loop; idempotent."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="slave-synchronize")

    async def stop(self) -> None:
        """Cancel the periodic task (a round in progress stops at its next await)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                await self.sync_all()
            except Exception as exc:  # never let the periodic task die
                log.error("slave_synchronize_crashed", error=repr(exc))

    async def sync_all(self) -> bool:
        """One round: topics, consumer offsets, delay offsets, subscription groups (in RocketMQ's order), then users
        and ACLs. Returns False when there was no master to ask. Failures of a part are logged, never raised."""
        addr = self._master_addr()
        if not addr or addr == self._broker_addr():
            return False
        parts = [self._sync_topic_config, self._sync_consumer_offset, self._sync_delay_offset, self._sync_groups]
        if self._tables.auth is not None:
            parts += [self._sync_users, self._sync_acls]
        for part in parts:
            await self._guarded(part.__name__, addr, part(addr))
        self.rounds += 1
        return True

    @staticmethod
    async def _guarded(part: str, addr: str, step: Awaitable[None]) -> None:
        try:
            await step
        except (MQError, OSError, ValueError) as exc:
            log.warning("slave_synchronize_failed", part=part.removeprefix("_"), master_addr=addr, error=str(exc))

    async def _sync_topic_config(self, addr: str) -> None:
        as_of_offset = self._commit_log_max_offset()
        wrapper = await self._calls.get_all_topic_config(addr)
        self._tables.topics.replace_from_master(wrapper.topic_config_table, wrapper.data_version)
        self.topics_as_of_offset = as_of_offset

    async def _sync_consumer_offset(self, addr: str) -> None:
        wrapper = await self._calls.get_all_consumer_offset(addr)
        offsets = self._tables.offsets
        if offsets.replace_from_master(wrapper.offsets, wrapper.data_version):
            await offsets.persist_async()

    async def _sync_delay_offset(self, addr: str) -> None:
        text, timer = await self._calls.get_all_delay_offset(addr)
        await asyncio.to_thread(write_delay_offset_json, self._tables.config_dir, text)
        await asyncio.to_thread(write_delay_offset_json, self._tables.config_dir, timer, TIMER_CHECKPOINT_FILE_NAME)

    async def _sync_groups(self, addr: str) -> None:
        wrapper = await self._calls.get_all_subscription_groups(addr)
        self._tables.groups.replace_from_master(wrapper.configs, wrapper.data_version)

    async def _sync_users(self, addr: str) -> None:
        auth = self._tables.auth
        assert auth is not None
        users = await self._calls.get_all_users(addr)
        if await auth.replace_users_from_master(users):
            log.info("slave_synchronize_users_replaced", master_addr=addr, users=len(users))

    async def _sync_acls(self, addr: str) -> None:
        auth = self._tables.auth
        assert auth is not None
        acls = await self._calls.get_all_acls(addr)
        if await auth.replace_acls_from_master(acls):
            log.info("slave_synchronize_acls_replaced", master_addr=addr, acls=len(acls))


def build_slave_synchronize(
    settings: BrokerSettings,
    tables: MetadataTables,
    *,
    master_addr: Callable[[], str],
    broker_addr: Callable[[], str],
    commit_log_max_offset: Callable[[], int],
) -> tuple[SlaveSynchronize, ChannelPool]:
    """A slave's SlaveSynchronize over its own ChannelPool (the broker's TLS client certificate, and signed
    requests with the inner credentials when the settings have them); the caller closes the pool after
    :meth:`SlaveSynchronize.stop`. Raises OSError when the TLS files cannot be read."""
    pool = signing_pool(settings.tls_client_config(), settings.inner_client_credentials())
    sync = SlaveSynchronize(
        MasterCalls(pool, MASTER_CALL_TIMEOUT_MS),
        tables,
        master_addr=master_addr,
        broker_addr=broker_addr,
        interval_ms=settings.slave_synchronize_interval_ms,
        commit_log_max_offset=commit_log_max_offset,
    )
    return sync, pool
