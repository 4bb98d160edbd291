"""The broker's half of a controller-mode role change: what only a master runs, and what a slave runs instead.

Mirrors what org.apache.rocketmq.broker.controller.ReplicasManager#changeToMaster / #changeToSlave ask of the
BrokerController (changeSpecialServiceStatus, registerBrokerAll, SlaveSynchronize, the broker id of the
registration). :class:`BrokerRoleHooks` is the RoleHooks of mq_broker.ha.replicas_manager:

- master at epoch E: SlaveSynchronize stops; the pull side answers as master (offsets committed here, read
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
        self._pull_side(MixAll.MASTER_ID, is_master=True)
        if b.pop is not None:
            stats = await b.pop.restart()
            log.info("pop_recovered_as_master", epoch=epoch, checkpoints=stats.checkpoints, messages=stats.messages)
        self._register_now()

    async def on_slave(self, master_addr: str, epoch: int) -> None:
        b = self.broker
        if b.pop is not None:
            await b.pop.stop()
        self._pull_side(b.settings.broker_id, is_master=False)
        if b.slave_synchronize is not None:
            b.slave_synchronize.start()
        log.info("following_master", master_addr=master_addr, epoch=epoch)
        self._register_now()

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
