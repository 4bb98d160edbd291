"""Which broker of a group a consumer pulls a queue from: the master, or the slave the last pull answer suggested.

Mirrors org.apache.rocketmq.client.impl.consumer.PullAPIWrapper (pullFromWhichNodeTable, #updatePullFromWhichNode,
#recalculatePullFromWhichNode, and #pullKernelImpl's "no commit offset to a slave") and
org.apache.rocketmq.client.impl.factory.MQClientInstance#findBrokerAddressInSubscribe:

- Each queue remembers the ``suggest_which_broker_id`` of its last pull answer (MixAll.MASTER_ID at first).
- The address is the suggested broker id's; for a slave id that is gone, the next id; else (``only_this_broker``
  False) the master when the route has one, else the slave with the lowest id (BrokerData#selectBrokerAddr):
  so a queue stays readable from a slave while its master is away.
- A pull sent to a slave carries no commit offset (only masters store offsets; slaves take them from their master).

Used by mq_client.consumer.pull_consumer (lite pull consumer) and the gateway's v2 PullMessage, so both choose the
same way. Pure bookkeeping on the caller's loop; the table is bounded (least recently used queues are forgotten,
and then start again at the master).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from mq_common.constants import MixAll
from mq_common.protocol import BrokerData, MessageQueue

__all__ = ["MAX_PULL_NODE_QUEUES", "FindBrokerResult", "PullNodeTable", "find_broker_address_in_subscribe"]

MAX_PULL_NODE_QUEUES: Final = 65_536
"""Queues whose suggested broker id is remembered at once (RocketMQ's table has no bound)."""


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """Mirrors FindBrokerResult: the address chosen, its broker id and whether it is a slave."""

    broker_addr: str
    broker_id: int

    @property
    def slave(self) -> bool:
        return self.broker_id != MixAll.MASTER_ID


def find_broker_address_in_subscribe(
    broker_data: BrokerData | None, broker_id: int, only_this_broker: bool = False
) -> FindBrokerResult | None:
    """The address of ``broker_id`` in ``broker_data`` (see the module docstring for the fallbacks); None when the
    group is unknown, has no address, or ``only_this_broker`` and the id (or, for a slave, the next id) is absent."""
    if broker_data is None:
        return None
    addrs = broker_data.broker_addrs
    candidates = (broker_id, broker_id + 1) if broker_id != MixAll.MASTER_ID else (broker_id,)
    for candidate in candidates:
        addr = addrs.get(candidate)
        if addr is not None:
            return FindBrokerResult(addr, candidate)
    if only_this_broker or not addrs:
        return None
    fallback = MixAll.MASTER_ID if MixAll.MASTER_ID in addrs else min(addrs)
    return FindBrokerResult(addrs[fallback], fallback)


class PullNodeTable:
    """pullFromWhichNodeTable: the broker id each queue should be pulled from next (bounded, LRU)."""

    def __init__(self, max_queues: int = MAX_PULL_NODE_QUEUES) -> None:
        assert max_queues > 0
        self._max_queues = max_queues
        self._table: OrderedDict[MessageQueue, int] = OrderedDict()

    def recalculate(self, mq: MessageQueue) -> int:
        """The broker id to pull ``mq`` from (MASTER_ID when no answer suggested one). #recalculatePullFromWhichNode."""
        return self._table.get(mq, MixAll.MASTER_ID)

    def update(self, mq: MessageQueue, broker_id: int) -> None:
        """Remember a pull answer's ``suggest_which_broker_id`` for ``mq``. #updatePullFromWhichNode."""
        self._table[mq] = broker_id
        self._table.move_to_end(mq)
        while len(self._table) > self._max_queues:
            self._table.popitem(last=False)

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (it went to another consumer): its next pull starts at the master."""
        self._table.pop(mq, None)

    def select(self, mq: MessageQueue, broker_data: BrokerData | None) -> FindBrokerResult | None:
        """Where to pull ``mq`` from now, in ``broker_data`` (its group in the caller's route)."""
        return find_broker_address_in_subscribe(broker_data, self.recalculate(mq))
