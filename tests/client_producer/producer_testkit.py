"""The producer the batch tests share: DefaultMQProducer over an in-memory name server and a scripted transport.

Topic ``T`` has 4 queues on broker-a (:data:`A`) and 4 on broker-b (:data:`B`); topic ``U`` 2 queues on broker-b.
The fault strategy's round robin starts at 0 and the clock is a FakeClock, so every queue choice is repeatable.
"""

from __future__ import annotations

from typing import Final

from mq_client.producer import DefaultMQProducer, ProducerConfig, ProducerHooks
from mq_client.producer.testing import (
    FakeClock,
    FixedStartRandom,
    InMemoryNameServer,
    ScriptedBrokerTransport,
    make_route,
)

A: Final = "127.0.0.1:10911"
B: Final = "127.0.0.1:10921"
ADDRS: Final = {"broker-a": A, "broker-b": B}


async def make_producer(
    transport: ScriptedBrokerTransport,
    hooks: ProducerHooks | None = None,
    *,
    group: str = "batch_group",
    **config: object,
) -> DefaultMQProducer:
    """A started producer of ``group`` sending through ``transport``; ``config`` overrides ProducerConfig fields."""
    ns = InMemoryNameServer(
        {
            "T": make_route({"broker-a": 4, "broker-b": 4}, addrs=ADDRS),
            "U": make_route({"broker-b": 2}, addrs={"broker-b": B}),
        }
    )
    producer = DefaultMQProducer(
        ProducerConfig(group, **config),  # type: ignore[arg-type]
        ns,
        transport,
        hooks=hooks,
        rng=FixedStartRandom(0),
        clock_ms=FakeClock(),
    )
    await producer.start()
    return producer
