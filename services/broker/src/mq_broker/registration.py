"""Registration with the name servers: at start, every ``register_broker_interval_ms`` and at once after a topic
change; unregistration on shutdown.

Mirrors org.apache.rocketmq.broker.BrokerController#registerBrokerAll / #unregisterBrokerAll /
#handleRegisterBrokerResult and org.apache.rocketmq.broker.out.BrokerOuterAPI (one call per name server, in
parallel). A failed call is logged and retried next round; it never stops the broker. Runs on the event loop; the
transport is a :class:`NamesrvClient` (mq_common.namesrv_client.NameServerClient over gRPC).

A slave learns its master from the answers (RegisterBrokerResult): :attr:`BrokerRegistrar.master` is the one
place the broker keeps it (SlaveSynchronize reads ``master_addr``, the HAClient ``ha_server_addr``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from mq_common.logging import get_logger
from mq_common.protocol import BrokerRegistration, RegisterBrokerResult
from mq_common.tasks import cancel_and_wait, wait_event

log = get_logger("mq_broker.registration")

UNREGISTER_TIMEOUT_MS: Final = 3_000


@dataclass(frozen=True, slots=True)
class MasterAddresses:
    """What the name servers last answered about this broker's master (RegisterBrokerResult): ``master_addr``, its
    broker address (``host:port``, SlaveSynchronize's source), and ``ha_server_addr``, its HA address (the
    HAClient's); both '' when no master of the group is online (or this broker is the master)."""

    master_addr: str = ""
    ha_server_addr: str = ""

    @property
    def master_online(self) -> bool:
        return bool(self.master_addr)


MasterListener = Callable[[MasterAddresses], None]
"""Told (event loop) each time :attr:`BrokerRegistrar.master` changes."""


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
    :attr:`master` follows the answers: after a round, the first name server (in ``namesrv_addrs`` order) that
    answered decides it (BrokerController#registerBrokerAll takes the first result); a round nobody answered keeps
    the previous value. Listeners added with :meth:`add_master_listener` hear every change.
    """

    def __init__(
        self,
        client: NamesrvClient,
        namesrv_addrs: Sequence[str],
        build_registration: Callable[[], BrokerRegistration],
        *,
        interval_ms: int,
        timeout_ms: int,
    ) -> None:
        assert interval_ms > 0
        assert timeout_ms > 0
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.build_registration = build_registration
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self.rounds = 0
        self.last_results: dict[str, bool] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._round_waiters: list[asyncio.Future[None]] = []
        self.master = MasterAddresses()
        self._master_listeners: list[MasterListener] = []

    def add_master_listener(self, listener: MasterListener) -> None:
        """Call ``listener`` (event loop) with the new :attr:`master` each time it changes."""
        self._master_listeners.append(listener)

    def _handle_results(self, results: Sequence[RegisterBrokerResult | None]) -> None:
        """BrokerController#handleRegisterBrokerResult: the first answer names the master (or none)."""
        answer = next((r for r in results if r is not None), None)
        if answer is None:
            return
        master = MasterAddresses(answer.master_addr, answer.ha_server_addr)
        if master == self.master:
            return
        log.info("master_address_changed", old=self.master.master_addr, new=master.master_addr)
        self.master = master
        for listener in self._master_listeners:
            listener(master)

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
            await wait_event(self._wake, self.interval_ms / 1000)
            self._wake.clear()

    async def register_all(self) -> dict[str, bool]:
        """One round: RegisterBroker on every name server in parallel; returns address -> success."""
        registration = self.build_registration()
        answers = await asyncio.gather(*(self._register_one(addr, registration) for addr in self.namesrv_addrs))
        self.rounds += 1
        self.last_results = {addr: answer is not None for addr, answer in zip(self.namesrv_addrs, answers, strict=True)}
        self._handle_results(answers)
        return self.last_results

    async def _register_one(self, addr: str, registration: BrokerRegistration) -> RegisterBrokerResult | None:
        try:
            result = await self.client.register_broker(addr, registration, self.timeout_ms)
        except Exception as exc:  # any failure: log, retry next round
            log.warning("register_broker_failed", namesrv_addr=addr, error=str(exc))
            return None
        if not self.last_results.get(addr, False):  # first success, or back after failures
            log.info(
                "broker_registered",
                namesrv_addr=addr,
                broker_name=registration.broker_name,
                topics=len(registration.topic_configs),
            )
        else:
            log.debug("register_broker_ok", namesrv_addr=addr, topics=len(registration.topic_configs))
        return result

    async def stop(self) -> None:
        """Cancel the periodic task, then UnregisterBroker on every name server (bounded, failures logged)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        registration = self.build_registration()
        await asyncio.gather(*(self._unregister_one(addr, registration) for addr in self.namesrv_addrs))

    async def _unregister_one(self, addr: str, registration: BrokerRegistration) -> None:
        try:
            await self.client.unregister_broker(addr, registration, min(self.timeout_ms, UNREGISTER_TIMEOUT_MS))
        except Exception as exc:
            log.warning("unregister_broker_failed", namesrv_addr=addr, error=str(exc))
