"""The broker's half of a controller-mode role change: what only a master runs, and what a slave runs instead.

Mirrors what org.apache.rocketmq.broker.controller.ReplicasManager#changeToMaster / #changeToSlave ask of the
BrokerController (changeSpecialServiceStatus, registerBrokerAll, SlaveSynchronize, the broker id of the
registration). :class:`BrokerRoleHooks` is the RoleHooks of mq_broker.ha.replicas_manager:

- master at epoch E: SlaveSynchronize stops; topics the store holds messages of, newer than the last topic table
  SlaveSynchronize copied, and that the table lacks (created on the former master within its last period) are
  adopted from the consume queues (TopicConfigManager.adopt_store_topics), so the new master serves them; the
  pull side answers as master (offsets committed here, read
  suggestions with broker id 0); POP rebuilds its in-flight table from the revive log (replicated from the former
  master) and revives; the broker registers at once as broker id 0 with DataVersion.state_version = E (the name
  server keeps the registration of the highest state version per broker id).
- slave of a master: POP stops reviving; the pull side answers as a slave (its own id); SlaveSynchronize copies the
  master's topics, groups and offsets; the broker registers at once as its own id.

Event loop.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mq_common.constants import MixAll
from mq_common.logging import get_logger

if TYPE_CHECKING:
    from mq_broker.controller import BrokerController

log = get_logger("mq_broker.controller_mode")


class BrokerRoleHooks:
    """Role changes of ``broker`` (a BrokerController in controller mode)."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def on_master(self, epoch: int) -> None:
        b = self.broker
        if b.slave_synchronize is not None:
            await b.slave_synchronize.stop()
            self._adopt_store_topics(b.slave_synchronize.topics_as_of_offset)
        self._pull_side(MixAll.MASTER_ID, is_master=True)
        if b.pop is not None:
            stats = await b.pop.restart()
            log.info("pop_recovered_as_master", epoch=epoch, checkpoints=stats.checkpoints, messages=stats.messages)
        if b.scheduled is not None:
            await b.scheduled.start()  # timers and delay levels from the checkpoints the master's copies left
        if b.transaction_check is not None:
            b.transaction_check.start()  # open transactions from the copied CommitLog and check progress
        self._register_now()

    async def on_slave(self, master_addr: str, epoch: int) -> None:
        b = self.broker
        if b.pop is not None:
            await b.pop.stop()
        if b.scheduled is not None:
            await b.scheduled.stop()
        if b.transaction_check is not None:
            await b.transaction_check.stop()
        self._pull_side(b.settings.broker_id, is_master=False)
        if b.slave_synchronize is not None:
            b.slave_synchronize.start()
        log.info("following_master", master_addr=master_addr, epoch=epoch)
        self._register_now()

    def _adopt_store_topics(self, as_of_offset: int) -> None:
        """Topics with a consume queue holding messages that end past ``as_of_offset`` (CommitLog bytes) and no
        config: created with the store's queue count (highest queue id + 1)."""
        store, topics = self.broker.store, self.broker.topics
        if store is None or topics is None:
            return
        queues = list(store.consume_queue_table.items())
        newer = {topic for (topic, _), cq in queues if cq.max_physic_offset > as_of_offset}
        queue_nums: dict[str, int] = {}
        for topic, queue_id in (key for key, _ in queues if key[0] in newer):
            queue_nums[topic] = max(queue_nums.get(topic, 0), queue_id + 1)
        if queue_nums:
            topics.adopt_store_topics(queue_nums)  # skips the topics the table has

    def _pull_side(self, broker_id: int, *, is_master: bool) -> None:
        pull = self.broker.pull_processor
        if pull is None:
            return
        pull.is_master = is_master
        if pull.read_suggestion is not None:
            pull.read_suggestion = dataclasses.replace(pull.read_suggestion, broker_id=broker_id)

    def _register_now(self) -> None:
        registrar = self.broker.registrar
        if registrar is not None:
            registrar.trigger()
