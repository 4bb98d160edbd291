"""Long polling: consumers that found nothing wait here until a message arrives on their queues, or time runs out.

Mirrors org.apache.rocketmq.broker.longpolling.PullRequestHoldService (pull requests held per topic@queueId),
PopLongPollingService (POP requests held per topic, consumer group and queue id, bounded by maxPopPollingSize:
POLLING_FULL) and NotifyMessageArrivingListener (the store's dispatch wakes them). RocketMQ re-checks held requests
on a timer as well; here the wake-up comes only from the store: DefaultMessageStore calls
:meth:`notify_message_arriving` through its ``message_arriving_listener`` after each put's dispatch, once per
(topic, queue id) the put wrote.

Who is woken: every pull caller parked on the queue (each pull consumer reads at its own offset), but ONE parked
POP caller per consumer group and key (topic@queue, topic@any queue), the longest parked first, as
PopLongPollingService#notifyMessageArriving: the members of a group share one offset, so waking them all makes
every one but the first re-read the queues for nothing. The POP processor wakes the next one of the group when a
pop leaves messages behind (:meth:`notify_group`); a woken POP caller that is cancelled before it ran passes its
wake-up on to the next of its group, so no wake-up is lost.

Everything runs on the broker's event loop, like the store's put path, so there is no lost wake-up between a
caller's "nothing there" check and its parking: :meth:`LongPollingService.wait_for_arrival` registers before its
first suspension point, so an arrival dispatched after the check (by a put that runs while the caller is parked)
always finds the registration. Callers must not await between their check and the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Final

from mq_common.logging import get_logger

log = get_logger("mq_broker.consumer.long_polling")

ANY_QUEUE: Final = -1
"""The registration key of a caller waiting on every queue of a topic (``queue_ids=None``)."""

_Key = tuple[str, int]
_Waiter = asyncio.Future[bool]
_GroupWaiters = dict[str, dict[_Waiter, None]]
"""consumer group -> its parked POP callers, in parking order (a dict as an ordered set)."""


class PollingFullError(Exception):
    """``max_parked`` callers are already parked (RocketMQ's PollingResult.POLLING_FULL; POP answers
    ResponseCode.POLLING_FULL 209)."""


class LongPollingService:
    """The parked consumers of one broker, at most ``max_parked`` at a time. Event loop only.

    Each parked caller is one asyncio future registered under every (topic, queue id) it waits on (or under
    (topic, ANY_QUEUE)), POP callers also under their consumer group; the tables hold at most ``max_parked``
    futures, each under at most as many keys as the caller named queues.
    """

    def __init__(self, *, max_parked: int) -> None:
        assert max_parked > 0, "max_parked bounds the parked callers"
        self.max_parked = max_parked
        self._waiters: dict[_Key, set[_Waiter]] = {}
        self._pop_waiters: dict[_Key, _GroupWaiters] = {}
        self._parked = 0
        self._closed = False

    @property
    def parked_count(self) -> int:
        """Callers parked right now."""
        return self._parked

    async def wait_for_arrival(
        self, topic: str, queue_ids: Collection[int] | None, timeout_ms: int, *, group: str | None = None
    ) -> bool:
        """Park the caller until a message arrives on one of ``queue_ids`` of ``topic`` (None: any queue of the
        topic) or ``timeout_ms`` pass. True when woken by an arrival; False on timeout, after :meth:`close`, or
        at once when ``timeout_ms`` <= 0 (nothing is parked then). An empty ``queue_ids`` waits for the timeout.
        A POP caller names its consumer ``group``: an arrival wakes one parked caller of each group (see the
        module docstring); a pull caller (``group`` None) is woken by every arrival on its queues.

        Raises PollingFullError when ``max_parked`` callers are already parked. When the awaiting task is
        cancelled (the gRPC client went away) its slot is freed at once and CancelledError propagates.
        Mirrors PullRequestHoldService#suspendPullRequest / PopLongPollingService#polling.
        """
        if self._closed or timeout_ms <= 0:
            return False
        if self._parked >= self.max_parked:
            raise PollingFullError(f"{self._parked} consumers are already polling, at most {self.max_parked}")
        waiter: _Waiter = asyncio.get_running_loop().create_future()
        keys = [(topic, ANY_QUEUE)] if queue_ids is None else [(topic, q) for q in set(queue_ids)]
        self._register(keys, waiter, group)
        self._parked += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await waiter
        except TimeoutError:
            return _woken(waiter)  # woken in the same loop turn as the timeout fired: it counts as woken
        except asyncio.CancelledError:
            if group is not None and _woken(waiter):  # the wake-up was meant for the group: pass it on
                for key in keys:
                    self._wake_one(key, group)
            raise
        finally:
            self._parked -= 1
            self._unregister(keys, waiter, group)

    def _register(self, keys: list[_Key], waiter: _Waiter, group: str | None) -> None:
        for key in keys:
            if group is None:
                self._waiters.setdefault(key, set()).add(waiter)
            else:
                self._pop_waiters.setdefault(key, {}).setdefault(group, {})[waiter] = None

    def _unregister(self, keys: list[_Key], waiter: _Waiter, group: str | None) -> None:
        for key in keys:
            if group is None:
                waiters = self._waiters.get(key)
                if waiters is not None:  # else already taken by a notify
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[key]
                continue
            groups = self._pop_waiters.get(key)
            parked = None if groups is None else groups.get(group)
            if groups is None or parked is None:
                continue
            parked.pop(waiter, None)
            if not parked:
                del groups[group]
                if not groups:
                    del self._pop_waiters[key]

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Wake every pull caller parked on ``topic``/``queue_id`` or on any queue of ``topic``, and one POP caller
        of each consumer group per key (topic@queue_id, topic@any). Event loop; O(1) when nobody is parked (it
        runs on the send path after every put).
        Mirrors PullRequestHoldService#notifyMessageArriving / PopLongPollingService#notifyMessageArriving.
        """
        if not self._parked:
            return
        for key in ((topic, queue_id), (topic, ANY_QUEUE)):
            waiters = self._waiters.pop(key, None)
            if waiters is not None:
                _wake(waiters, True)
            groups = self._pop_waiters.get(key)
            if groups is not None:
                for group in list(groups):
                    self._wake_one(key, group)

    def notify_group(self, topic: str, queue_id: int, group: str) -> None:
        """Wake one POP caller of ``group`` parked on ``topic``/``queue_id`` and one parked on any queue of
        ``topic`` (``queue_id`` ANY_QUEUE: only the latter): messages are left for the group. Event loop.
        Mirrors PopMessageProcessor#notifyMessageArriving(topic, queueId, cid) (restNum > 0)."""
        if not self._parked:
            return
        if queue_id != ANY_QUEUE:
            self._wake_one((topic, queue_id), group)
        self._wake_one((topic, ANY_QUEUE), group)

    def _wake_one(self, key: _Key, group: str) -> None:
        """Take the longest parked live POP caller of ``group`` under ``key`` out of the table and wake it."""
        groups = self._pop_waiters.get(key)
        parked = None if groups is None else groups.get(group)
        if groups is None or parked is None:
            return
        while parked:
            waiter = next(iter(parked))
            del parked[waiter]
            if not waiter.done():  # a cancelled caller not yet unregistered is skipped
                waiter.set_result(True)
                break
        if not parked:
            del groups[group]
            if not groups:
                del self._pop_waiters[key]

    def close(self) -> None:
        """Broker shutdown: wake every parked caller (their wait returns False); later waits return False at once."""
        self._closed = True
        table, self._waiters = self._waiters, {}
        pop_table, self._pop_waiters = self._pop_waiters, {}
        for waiters in table.values():
            _wake(waiters, False)
        for groups in pop_table.values():
            for parked in groups.values():
                _wake(parked, False)
        if table or pop_table:
            log.info("long_polling_closed", woken=self._parked)


def _woken(waiter: _Waiter) -> bool:
    return waiter.done() and not waiter.cancelled() and waiter.result()


def _wake(waiters: Collection[_Waiter], arrived: bool) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(arrived)
