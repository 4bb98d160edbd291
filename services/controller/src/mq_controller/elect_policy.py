"""Who becomes master: RocketMQ's DefaultElectPolicy as a pure function.

Mirrors org.apache.rocketmq.controller.elect.impl.DefaultElectPolicy. Candidates are the live brokers of the
SyncStateSet; only with ``unclean`` (enableElectUncleanMaster), when none of those qualifies (none alive, or the
designated one is not in sync), any live replica. A group
that never had a master (master epoch 0) takes any live replica: nobody can have acknowledged data in it yet.
Among the candidates: the still-live old master when nothing else is asked; else the designated broker (or nobody
when it is not a candidate); else the largest epoch, then the largest max offset, then the smallest
election_priority value (RocketMQ: a smaller number is a higher priority; 0 = unset counts as lowest), then the
lowest broker id. Any thread.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from mq_common.protocol.controller import NO_MASTER_ID

from mq_controller.model import BrokerLiveInfo, GroupState

UNSET_PRIORITY_RANK: Final = 2**31 - 1  # RocketMQ's default brokerElectionPriority (Integer.MAX_VALUE)


def _rank(info: BrokerLiveInfo) -> tuple[int, int, int, int]:
    priority = info.election_priority if info.election_priority > 0 else UNSET_PRIORITY_RANK
    return (-info.epoch, -info.max_offset, priority, info.broker_id)


def candidates(group: GroupState, live: Mapping[int, BrokerLiveInfo]) -> frozenset[int]:
    """The live in-sync broker ids (every live one in a group that never had a master)."""
    alive = frozenset(live)
    return alive if group.master_epoch == 0 else alive & group.sync_state_set


def _pick(
    pool: Collection[int], live: Mapping[int, BrokerLiveInfo], old_master: int, designated: int | None
) -> int | None:
    if not pool:
        return None
    if old_master in pool and designated in (None, old_master):
        return old_master
    if designated is not None:
        return designated if designated in pool else None
    return min((live[b] for b in pool), key=_rank).broker_id


def elect(
    group: GroupState, live: Mapping[int, BrokerLiveInfo], designated: int | None = None, unclean: bool = False
) -> int | None:
    """The broker id to make (or keep) master, or None when no candidate qualifies. ``live`` maps broker id to
    its last heartbeat (only live brokers)."""
    old_master = group.master_broker_id if group.master_broker_id != NO_MASTER_ID else -1
    chosen = _pick(candidates(group, live), live, old_master, designated)
    if chosen is None and unclean:
        chosen = _pick(frozenset(live), live, old_master, designated)
    return chosen
