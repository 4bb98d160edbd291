"""Disk usage of the store partitions, measured with ``os.statvfs``.

Mirrors org.apache.rocketmq.common.UtilAll#getDiskPartitionSpaceUsedPercent and the ``diskUtil()`` text of
SendMessageProcessor. Blocking (one statvfs per path, microseconds): called on the clean service thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

UNKNOWN_RATIO: Final = -1.0


def disk_partition_space_used_ratio(path: Path) -> float:
    """Used fraction (0.0..1.0, rounded up to a whole percent) of the partition holding ``path``.

    ``used / (used + available to unprivileged users)``, as RocketMQ (the root-reserved blocks count as
    neither). Returns :data:`UNKNOWN_RATIO` (-1.0) when ``path`` does not exist or cannot be measured.
    """
    try:
        st = os.statvfs(path)
    except OSError:
        return UNKNOWN_RATIO
    if st.f_blocks <= 0:
        return UNKNOWN_RATIO
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return UNKNOWN_RATIO
    return -(-used * 100 // entire) / 100  # ceil to a whole percent


def existing_path(path: Path, root: Path) -> Path:
    """``path`` when it exists, else ``root`` (a store sub-directory not created yet lives on root's disk)."""
    return path if path.exists() else root


@dataclass(frozen=True, slots=True)
class DiskSpaceUsage:
    """One measurement of the store partitions (fractions, -1.0 = unknown)."""

    commit_log_ratio: float
    consume_queue_ratio: float
    index_ratio: float

    @property
    def max_ratio(self) -> float:
        """The fuller of the CommitLog and ConsumeQueue partitions (RocketMQ checks both)."""
        return max(self.commit_log_ratio, self.consume_queue_ratio)

    def disk_util(self) -> str:
        """SendMessageProcessor#diskUtil: ``CL:  0.93 CQ:  0.93 INDEX:  0.93``."""
        return f"CL: {self.commit_log_ratio:5.2f} CQ: {self.consume_queue_ratio:5.2f} INDEX: {self.index_ratio:5.2f}"
