"""StoreCheckpoint: what the flusher last made durable, kept in one 4 KiB file (``checkpoint``).

Mirrors org.apache.rocketmq.store.StoreCheckpoint. Layout (big-endian i64), RocketMQ's first five fields plus
one of ours::

    0   physicMsgTimestamp   store timestamp (ms) of the last flushed CommitLog record
    8   logicsMsgTimestamp   store timestamp (ms) of the last record whose ConsumeQueue unit is flushed
    16  indexMsgTimestamp    (IndexService#flush)
    24  masterFlushedOffset  (no HA: 0)
    32  confirmPhyOffset     CommitLog offset known flushed
    40  dispatchFlushedOffset  CommitLog offset below which every ConsumeQueue unit is flushed: abnormal
                               recovery re-dispatches from here (PyRocketMQ's addition)

Threads: the flusher thread calls :meth:`flush`; start-up and shutdown call it too. Values are plain ints
(atomic under the GIL).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Final

CHECKPOINT_FILE_SIZE_BYTES: Final = 4096
_LAYOUT: Final = struct.Struct(">6q")


class StoreCheckpoint:
    """The checkpoint file at ``path`` (created when missing, its 4 KiB allocated at once). Raises OSError on I/O
    failure (ENOSPC here, at start-up, when the disk has no 4 KiB left)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp_ms = 0
        self.logics_msg_timestamp_ms = 0
        self.index_msg_timestamp_ms = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self.dispatch_flushed_offset = 0
        self.existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if self.existed:
            raw = os.pread(self._fd, _LAYOUT.size, 0)
            if len(raw) == _LAYOUT.size:
                (
                    self.physic_msg_timestamp_ms,
                    self.logics_msg_timestamp_ms,
                    self.index_msg_timestamp_ms,
                    self.master_flushed_offset,
                    self.confirm_phy_offset,
                    self.dispatch_flushed_offset,
                ) = _LAYOUT.unpack(raw)
            else:
                self.existed = False
        if os.fstat(self._fd).st_size < CHECKPOINT_FILE_SIZE_BYTES:
            # Reserve the blocks now: the flusher rewrites them in place later, so a disk that fills before the first
            # flush cannot make that flush fail with ENOSPC (which would leave the store read-only).
            try:
                os.posix_fallocate(self._fd, 0, CHECKPOINT_FILE_SIZE_BYTES)
            except OSError:
                self.close()
                raise

    def flush(self) -> None:
        """Write all fields and fdatasync. Raises OSError."""
        if self._fd < 0:
            return
        payload = _LAYOUT.pack(
            self.physic_msg_timestamp_ms,
            self.logics_msg_timestamp_ms,
            self.index_msg_timestamp_ms,
            self.master_flushed_offset,
            self.confirm_phy_offset,
            self.dispatch_flushed_offset,
        )
        os.pwrite(self._fd, payload.ljust(CHECKPOINT_FILE_SIZE_BYTES, b"\0"), 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
