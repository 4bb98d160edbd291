"""Long polling: consumers that found nothing wait here until a message arrives on their queues, or time runs out.

Mirrors org.apache.rocketmq.broker.longpolling.PullRequestHoldService (pull requests held per topic@queueId),
PopLongPollingService (POP requests held per topic, bounded by maxPopPollingSize: POLLING_FULL) and
NotifyMessageArrivingListener (the store's dispatch wakes them). RocketMQ re-checks held requests on a timer as
well; here the wake-up comes only from the store: DefaultMessageStore calls :meth:`notify_message_arriving`
through its ``message_arriving_listener`` after each put's dispatch, once per (topic, queue id) the put wrote.

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


class PollingFullError(Exception):
    """``max_parked`` callers are already parked (RocketMQ's PollingResult.POLLING_FULL; POP answers
    ResponseCode.POLLING_FULL 209)."""


class LongPollingService:
    """The parked consumers of one broker, at most ``max_parked`` at a time. Event loop only.

    Each parked caller is one asyncio future registered under every (topic, queue id) it waits on (or under
    (topic, ANY_QUEUE)); the table holds at most ``max_parked`` futures, each under at most as many keys as the
    caller named queues.
    """

    def __init__(self, *, max_parked: int) -> None:
        assert max_parked > 0, "max_parked bounds the parked callers"
        self.max_parked = max_parked
        self._waiters: dict[_Key, set[asyncio.Future[bool]]] = {}
        self._parked = 0
        self._closed = False

    @property
    def parked_count(self) -> int:
        """Callers parked right now."""
        return self._parked

    async def wait_for_arrival(self, topic: str, queue_ids: Collection[int] | None, timeout_ms: int) -> bool:
        """Park the caller until a message arrives on one of ``queue_ids`` of ``topic`` (None: any queue of the
        topic) or ``timeout_ms`` pass. True when woken by an arrival; False on timeout, after :meth:`close`, or
        at once when ``timeout_ms`` <= 0 (nothing is parked then). An empty ``queue_ids`` waits for the timeout.

        Raises PollingFullError when ``max_parked`` callers are already parked. When the awaiting task is
        cancelled (the gRPC client went away) its slot is freed at once and CancelledError propagates.
        Mirrors PullRequestHoldService#suspendPullRequest / PopLongPollingService#polling.
        """
        if self._closed or timeout_ms <= 0:
            return False
        if self._parked >= self.max_parked:
            raise PollingFullError(f"{self._parked} consumers are already polling, at most {self.max_parked}")
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        keys = [(topic, ANY_QUEUE)] if queue_ids is None else [(topic, q) for q in set(queue_ids)]
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
        self._parked += 1
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await waiter
        except TimeoutError:
            return False
        finally:
            self._parked -= 1
            self._unregister(keys, waiter)

    def _unregister(self, keys: list[_Key], waiter: asyncio.Future[bool]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is None:  # already taken by a notify
                continue
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[key]

    def notify_message_arriving(self, topic: str, queue_id: int) -> None:
        """Wake every caller parked on ``topic``/``queue_id`` and every caller parked on any queue of ``topic``.
        Event loop; O(1) when nobody is parked (it runs on the send path after every put).
        Mirrors PullRequestHoldService#notifyMessageArriving / PopLongPollingService#notifyMessageArriving.
        """
        if not self._parked:
            return
        for key in ((topic, queue_id), (topic, ANY_QUEUE)):
            waiters = self._waiters.pop(key, None)
            if waiters is not None:
                _wake(waiters, True)

    def close(self) -> None:
        """Broker shutdown: wake every parked caller (their wait returns False); later waits return False at once."""
        self._closed = True
        table, self._waiters = self._waiters, {}
        for waiters in table.values():
            _wake(waiters, False)
        if table:
            log.info("long_polling_closed", woken=self._parked)


def _wake(waiters: set[asyncio.Future[bool]], arrived: bool) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(arrived)
