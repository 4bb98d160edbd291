"""Which broker of the group a consumer should pull a queue from next: the ``suggest_which_broker_id`` of a pull
answer.

Mirrors the end of org.apache.rocketmq.broker.processor.PullMessageProcessor#composeResponseHeader and the
"suggestPullingFromSlave" part of DefaultMessageStore#getMessage:

- A pull counts as *consuming slowly* when the CommitLog bytes written after the last message it read exceed
  ``access_message_in_memory_max_ratio_percent`` % of the machine's physical memory (the data is then probably no
  longer in the page cache: reading it costs the master disk I/O). RocketMQ computes this distance
  (maxOffsetPy - maxPhyOffsetPulling > TOTAL_PHYSICAL_MEMORY_SIZE * accessMessageInMemoryMaxRatio / 100) from the
  *start* of the last message; here it runs from its end, so that a ratio of 0 means exactly "newer bytes follow"
  (tests use it to be deterministic; with a real ratio one message's size makes no difference).
- With ``slave_read_enable`` the answer is the group's ``which_broker_when_consume_slowly`` (default 1) when slow,
  else the group's ``broker_id`` (default 0, the master); without it always the master (MixAll.MASTER_ID).
- A slave that finds the pull not slow while its master is online sends the consumer back to the master (suggest
  0); when it found no message it also answers PULL_RETRY_IMMEDIATELY so the consumer asks the master at once
  instead of long polling on the slave. So slaves do not keep consumers forever: only the master's "slow" verdict
  (or a master that is away) sends them to a slave.

Pure functions and a small frozen policy; event loop (one sysconf at construction).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from mq_common.constants import MixAll
from mq_common.protocol import SubscriptionGroupConfig
from mq_common.record_layout import PHYSICAL_OFFSET, PHYSICAL_OFFSET_OFFSET

DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT: Final = 40
"""MessageStoreConfig.accessMessageInMemoryMaxRatio."""


def total_physical_memory_bytes() -> int:
    """The machine's physical memory (StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE); 0 when the platform cannot tell."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def end_physical_offset(messages: Sequence[bytes]) -> int | None:
    """The CommitLog offset just past the last of ``messages`` (v1 records: PHYSICALOFFSET, bytes 28..36, plus the
    record's length); None when empty."""
    if not messages:
        return None
    last = messages[-1]
    return int(PHYSICAL_OFFSET.unpack_from(last, PHYSICAL_OFFSET_OFFSET)[0]) + len(last)


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A pull answer's ``broker_id`` to pull from next; ``retry_immediately``: a slave sends an empty pull back to
    its master at once (the answer's code becomes PULL_RETRY_IMMEDIATELY)."""

    broker_id: int
    retry_immediately: bool = False


@dataclass(frozen=True, slots=True)
class ReadSuggestionPolicy:
    """This broker's rules for ``suggest_which_broker_id``.

    ``broker_id``: this broker's id (0: the master). ``max_phy_offset``: the CommitLog's max offset now (bytes).
    ``master_online``: on a slave, whether its master is registered (RocketMQ's minBrokerIdInGroup == MASTER_ID);
    here: the last registration answer named a master. ``total_memory_bytes`` defaults to the machine's.
    """

    broker_id: int
    slave_read_enable: bool
    access_message_in_memory_max_ratio_percent: int
    max_phy_offset: Callable[[], int]
    master_online: Callable[[], bool]
    total_memory_bytes: int = field(default_factory=total_physical_memory_bytes)

    def __post_init__(self) -> None:
        assert 0 <= self.access_message_in_memory_max_ratio_percent <= 100

    def consuming_slowly(self, messages: Sequence[bytes]) -> bool:
        """DefaultMessageStore#getMessage's suggestPullingFromSlave for a pull that read ``messages`` (raw records):
        more CommitLog bytes follow the last of them than the in-memory share allows. False when nothing was read."""
        pulled = end_physical_offset(messages)
        if pulled is None:
            return False
        memory_bytes = self.total_memory_bytes * self.access_message_in_memory_max_ratio_percent // 100
        return self.max_phy_offset() - pulled > memory_bytes

    def suggest(self, group: SubscriptionGroupConfig, messages: Sequence[bytes]) -> Suggestion:
        """The suggestion for a pull of ``group`` that read ``messages`` (see the module docstring)."""
        slow = self.consuming_slowly(messages)
        if not self.slave_read_enable:
            broker_id = MixAll.MASTER_ID
        else:
            broker_id = group.which_broker_when_consume_slowly if slow else group.broker_id
        if self.broker_id != MixAll.MASTER_ID and not slow and self.master_online():
            return Suggestion(MixAll.MASTER_ID, retry_immediately=not messages)
        return Suggestion(broker_id)
