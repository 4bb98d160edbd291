"""The FIFO consumer process of test_fifo_kill.py: ``python fifo_consumer_proc.py <namesrv> <topic> <group> <log>
<name> <seed>`` receives by orderly POP (mq_client.simple_consumer.SimpleConsumer on a group with
consumeMessageOrderly=true), handles each message of a batch in turn (10-30 ms of work) and acks it, until
SIGKILLed.

Every event is one line appended to ``<log>`` (shared by every consumer process, O_APPEND, one write per line, so
lines of different processes keep the order they happened in): ``R <name> <UNIQ_KEY> <delivery attempt> <batch>``
when a message is handed to the handler (``batch`` numbers the process's receives), ``S <name> <UNIQ_KEY>`` just
before its ack is sent, ``A <name> <UNIQ_KEY>`` once the ack returned, ``F <name> <UNIQ_KEY>`` when it was refused
(its invisible time passed: it comes again). Each batch is acked message by message (stopping at a refused ack: the
rest comes again after it) or, half of the time, all at once after the whole batch was handled. A SIGKILL between R
and A leaves the message in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import sys
from typing import Final

from mq_client.simple_consumer import MessageView, SimpleConsumer
from mq_common.errors import MQError

BATCH: Final = 8
INVISIBLE_MS: Final = 2_000
AWAIT_MS: Final = 1_000
WORK_S: Final = (0.01, 0.03)


def line(fd: int, text: str) -> None:
    os.write(fd, (text + "\n").encode())


async def consume(namesrv: str, topic: str, group: str, fd: int, name: str, rng: random.Random) -> None:
    async with SimpleConsumer([namesrv], group, {topic: "*"}, await_duration_ms=AWAIT_MS) as consumer:
        for batch in itertools.count():
            try:
                views = await consumer.receive(BATCH, INVISIBLE_MS)
            except MQError:
                await asyncio.sleep(0.2)
                continue
            if rng.random() < 0.5:
                await ack_each(consumer, views, fd, name, batch, rng)
            else:
                await ack_at_end(consumer, views, fd, name, batch, rng)


async def ack_each(
    consumer: SimpleConsumer, views: list[MessageView], fd: int, name: str, batch: int, rng: random.Random
) -> None:
    """Handle and ack one message after the other; stop at a refused ack (the rest comes again after it)."""
    for view in views:
        line(fd, f"R {name} {view.message_id} {view.delivery_attempt} {batch}")
        await asyncio.sleep(rng.uniform(*WORK_S))
        line(fd, f"S {name} {view.message_id}")
        try:
            await consumer.ack(view)
        except MQError:
            line(fd, f"F {name} {view.message_id}")
            return
        line(fd, f"A {name} {view.message_id}")


async def ack_at_end(
    consumer: SimpleConsumer, views: list[MessageView], fd: int, name: str, batch: int, rng: random.Random
) -> None:
    """Handle the whole batch, then ack it in one call: a kill meanwhile holds every handled message."""
    for view in views:
        line(fd, f"R {name} {view.message_id} {view.delivery_attempt} {batch}")
        await asyncio.sleep(rng.uniform(*WORK_S))
    for view in views:
        line(fd, f"S {name} {view.message_id}")
    for view, error in zip(views, await consumer.ack_batch(views), strict=True):
        line(fd, f"{'A' if error is None else 'F'} {name} {view.message_id}")


def main() -> None:
    namesrv, topic, group, log_path, name, seed = sys.argv[1:7]
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    asyncio.run(consume(namesrv, topic, group, fd, name, random.Random(seed)))


if __name__ == "__main__":
    main()
