"""kill -9 proof for timers and delay levels (issue 32): a real ``mqbroker`` holds timer messages (a few hundred due
over the next 2-10 s, every fifth recalled through RecallMessage, plus a burst of thousands due at one instant) and
delay-level messages (levels "1s 2s 3s"), and is SIGKILLed while they fire, around the burst's instant. It restarts on
the same store (every second round it is killed again within 300 ms of its restart, while it delivers what fell
due while it was down), the next round sends more and kills again; ``MQ_CHAOS_TIMER_ROUNDS`` rounds (default 3;
``make chaos``: 10). At the end, once everything is due, the real topic is read back (timer_testkit.drain_and_judge):

- every timer and delay-level message not recalled is there exactly once (counted by UNIQ_KEY), none lost;
- none was stored before it was due: a timer not before its TIMER_OUT_MS (= its TIMER_DELIVER_MS), a delay-level
  message not before its held record's store time + the level's delay;
- no recalled timer is there, and nothing that was never sent.

Each restart's ``timer_store_recovered`` log line is printed (pending timers / deliveries found after the
checkpoint): a kill between a delivery's put and the next checkpoint shows as a non-zero second figure.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Final

import pytest
from chaos_testkit import BrokerProcess, BrokerProcesses, broker_env
from timer_testkit import (
    DELAY_LEVEL_SETTING,
    TimerLedger,
    broker_client,
    delay_topic,
    drain_and_judge,
    kill_at_ms,
    send_round,
    sleep_until_ms,
)

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(900)]

TOPIC: Final = "TimerKillTopic"
QUEUES: Final = 4
BROKER_NAME: Final = "broker-a"


def timer_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_TIMER_ROUNDS", "3")))


def seeded(name: str) -> random.Random:
    return random.Random(f"{name}-{os.environ.get('MQ_CHAOS_SEED', '')}")


def recovered(broker: BrokerProcess) -> str:
    """What the restarted broker recovered: "<pending timers>/<timer deliveries after the checkpoint>, <delay-level
    deliveries after delayOffset.json>"."""
    timers = broker.wait_event("timer_store_recovered")
    levels = broker.wait_event("schedule_offsets_recovered")
    return (
        f"{timers.get('pending')}/{timers.get('delivered_since_checkpoint')},{levels.get('delivered_since_checkpoint')}"
    )


async def test_sigkill_while_timers_fire(brokers: BrokerProcesses, tmp_path: Path) -> None:
    rng = seeded("timer-kill")
    env = broker_env(
        tmp_path / "store", 1024 * 1024, "SYNC_FLUSH",
        MQ_BROKER_BROKER_NAME=BROKER_NAME, MQ_BROKER_MESSAGE_DELAY_LEVEL=DELAY_LEVEL_SETTING,
        MQ_BROKER_MAPPED_FILE_SIZE_CONSUME_QUEUE_UNITS="1024",
    )  # fmt: skip
    ledger = TimerLedger()
    recoveries: list[str] = []
    broker = brokers.start(env)
    async with broker_client() as client:
        await client.create_topic(broker.addr, delay_topic(TOPIC, QUEUES))
        for round_no in range(timer_rounds()):
            burst_ms = await send_round(client, broker.addr, TOPIC, QUEUES, BROKER_NAME, ledger, rng, round_no)
            await sleep_until_ms(kill_at_ms(burst_ms, rng))
            broker.kill()
            broker = brokers.start(env)
            recoveries.append(recovered(broker))
            if round_no % 2 == 1:  # again while it catches up: what fell due while it was down fires at once
                await asyncio.sleep(rng.uniform(0.0, 0.3))
                broker.kill()
                broker = brokers.start(env)
                recoveries.append("again " + recovered(broker))
        found = await drain_and_judge(client, broker.addr, TOPIC, QUEUES, ledger)
    assert found.ok, found.summary()
    print(
        f"\ntimer kill rounds: {timer_rounds()}, {found.delivered} delivered exactly once, {len(ledger.recalled)} "
        f"recalled never delivered; lateness max {max(found.lateness_ms)} ms (restarts included); recovered "
        f"(pending timers / timer deliveries after the checkpoint, delay-level deliveries after delayOffset.json): "
        f"{recoveries}"
    )
