"""MasterLease: how long a master in controller mode may acknowledge writes (fencing, no split brain).

RocketMQ's controller mode has no broker-side lease (an old master learns of its demotion by its next heartbeat);
this is the stricter rule of issue 20: a master acknowledges a put only while the last heartbeat the controller
answered MASTER at its epoch was *sent* less than ``lease_ms`` ago. The controller declares a broker dead only
``broker_heartbeat_timeout_ms`` (3000) after it *received* its last heartbeat, and ``lease_ms`` (2000) is below
that, so an isolated or paused master stops acknowledging before another one can be elected. ``time.monotonic``
advances while the process is stopped (SIGSTOP), so a resumed master finds its lease expired before it answers
anything it had queued. Event loop only (the store's put path calls :meth:`refusal`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

LEASE_EXPIRED_REMARK: Final = "master lease expired"
NOT_MASTER_REMARK: Final = "not the master of its group (controller mode)"


class MasterLease:
    """The lease of this broker's master term. ``clock`` returns seconds (time.monotonic; tests inject)."""

    def __init__(self, lease_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        assert lease_ms > 0
        self.lease_ms = lease_ms
        self._clock = clock
        self.epoch = -1
        self._renewed_at_s: float | None = None

    def now_s(self) -> float:
        return self._clock()

    def renew(self, epoch: int, sent_at_s: float) -> None:
        """The controller answered MASTER at ``epoch`` to a heartbeat sent at ``sent_at_s`` (:meth:`now_s`). A
        renewal older than the current one, or for an older epoch, changes nothing."""
        if epoch < self.epoch:
            return
        if epoch > self.epoch or self._renewed_at_s is None or sent_at_s > self._renewed_at_s:
            self.epoch = epoch
            self._renewed_at_s = sent_at_s

    def revoke(self) -> None:
        """This broker is no master (demoted, fenced, or a slave): refuse at once."""
        self._renewed_at_s = None

    @property
    def held(self) -> bool:
        renewed = self._renewed_at_s
        return renewed is not None and (self._clock() - renewed) * 1000 < self.lease_ms

    def refusal(self) -> str | None:
        """None while the lease holds; else the remark of the SERVICE_NOT_AVAILABLE (14) answer."""
        if self._renewed_at_s is None:
            return NOT_MASTER_REMARK
        return None if self.held else LEASE_EXPIRED_REMARK
