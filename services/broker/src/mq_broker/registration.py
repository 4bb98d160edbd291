"""Registration with the name servers: at start, every ``register_broker_interval_ms`` and at once after a topic
change; unregistration on shutdown.

Mirrors org.apache.rocketmq.broker.BrokerController#registerBrokerAll / #unregisterBrokerAll and
org.apache.rocketmq.broker.out.BrokerOuterAPI (one call per name server, in parallel). A failed call is logged
and retried next round; it never stops the broker. Runs on the event loop; the transport is a
:class:`NamesrvClient` (mq_common.namesrv_client.NameServerClient over gRPC).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from mq_common.logging import get_logger
from mq_common.protocol import BrokerRegistration, RegisterBrokerResult

log = get_logger("mq_broker.registration")

UNREGISTER_TIMEOUT_MS: Final = 3_000


class NamesrvClient(Protocol):
    """Transport to name servers (mq_common.namesrv_client.NameServerClient). Methods raise
    mq_common.errors.MQError (or OSError) on failure."""

    async def register_broker(
        self, namesrv_addr: str, registration: BrokerRegistration, timeout_ms: int
    ) -> RegisterBrokerResult: ...

    async def unregister_broker(self, namesrv_addr: str, registration: BrokerRegistration, timeout_ms: int) -> None: ...


class BrokerRegistrar:
    """Keeps this broker registered with every name server in ``namesrv_addrs``.

    ``build_registration`` is called at each round so the latest topic table and data version are sent.
    """

    def __init__(
        self,
        client: NamesrvClient,
        namesrv_addrs: Sequence[str],
        build_registration: Callable[[], BrokerRegistration],
        *,
        interval_ms: int,
        timeout_ms: int,
        on_result: Callable[[RegisterBrokerResult], None] | None = None,
    ) -> None:
        assert interval_ms > 0
        assert timeout_ms > 0
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.build_registration = build_registration
        # Told each name server's answer (a slave learns its master's HA address from it); event loop.
        self.on_result = on_result
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self.rounds = 0
        self.last_results: dict[str, bool] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._round_waiters: list[asyncio.Future[None]] = []

    def start(self) -> None:
        """Start the periodic task (its first round runs at once). Event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="broker-registrar")

    def trigger(self) -> None:
        """Register again as soon as possible (a topic was created or changed)."""
        self._wake.set()

    async def next_round(self) -> None:
        """Trigger a round and wait until a round that started after this call has ended (whatever its results).
        The send path awaits it, bounded, after a send created a topic, so the route exists at the name servers
        when the send is answered. Event loop."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._round_waiters.append(waiter)
        self.trigger()
        await waiter

    async def _run(self) -> None:
        while True:
            waiters, self._round_waiters = self._round_waiters, []
            try:
                await self.register_all()
            except Exception as exc:  # never let the periodic task die
                log.error("register_round_failed", error=repr(exc))
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_ms / 1000)
            self._wake.clear()

    async def register_all(self) -> dict[str, bool]:
        """One round: RegisterBroker on every name server in parallel; returns address -> success."""
        registration = self.build_registration()
        results = await asyncio.gather(*(self._register_one(addr, registration) for addr in self.namesrv_addrs))
        self.rounds += 1
        self.last_results = dict(zip(self.namesrv_addrs, results, strict=True))
        return self.last_results

    async def _register_one(self, addr: str, registration: BrokerRegistration) -> bool:
        try:
            result = await self.client.register_broker(addr, registration, self.timeout_ms)
        except Exception as exc:  # any failure: log, retry next round
            log.warning("register_broker_failed", namesrv_addr=addr, error=str(exc))
            return False
        if self.on_result is not None:
            self.on_result(result)
        if not self.last_results.get(addr, False):  # first success, or back after failures
            log.info(
                "broker_registered",
                namesrv_addr=addr,
                broker_name=registration.broker_name,
                topics=len(registration.topic_configs),
            )
        else:
            log.debug("register_broker_ok", namesrv_addr=addr, topics=len(registration.topic_configs))
        return True

    async def stop(self) -> None:
        """Cancel the periodic task, then UnregisterBroker on every name server (bounded, failures logged)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        registration = self.build_registration()
        await asyncio.gather(*(self._unregister_one(addr, registration) for addr in self.namesrv_addrs))

    async def _unregister_one(self, addr: str, registration: BrokerRegistration) -> None:
        try:
            await self.client.unregister_broker(addr, registration, min(self.timeout_ms, UNREGISTER_TIMEOUT_MS))
        except Exception as exc:
            log.warning("unregister_broker_failed", namesrv_addr=addr, error=str(exc))
