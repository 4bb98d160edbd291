"""kill -9 proof for transactional messages (issue 33): the only broker of a name server (``broker-a``,
single_broker_cluster.py) takes transactions from 6 concurrent TransactionMQProducer callers
(send_message_in_transaction: half message, local transaction, EndTransaction) and is SIGKILLed at a random moment,
``MQ_CHAOS_TRANSACTION_ROUNDS`` times (default 4; ``make chaos``: 10), then restarted on the same store and port;
every second round it is killed again within 300 ms of its restart (while its TransactionalMessageCheckService
recovers and checks what was open). The broker runs with ``transactionTimeOut`` 1 s and ``transactionCheckInterval``
500 ms so that check-backs come within seconds.

Each transaction's local transaction decides, at random: COMMIT (40 %), ROLLBACK (30 %) or UNKNOW (30 %, left open).
The check listener answers as the local transaction's durable record says: a decided one as decided (its producer's
EndTransaction was lost to a kill, or came too late and was refused), an open one COMMIT or ROLLBACK as drawn when it
was sent (a third of those answer UNKNOW on their first check, so they are checked again), and a half message whose
send failed (the local transaction never ran: a kill between the store and the answer) ROLLBACK. The producer makes
no send retries (``retry_times_when_send_failed=0``): a retry after such an ambiguous failure would store a second
half message of the same transaction, which RocketMQ, too, would check back and deliver twice.

After the last round, once every open transaction has been answered: every transaction whose outcome is COMMIT is on
the topic exactly once, no other one is there (no rolled-back one, no failed send), every open one was checked (twice
for the UNKNOW-first ones), a few check intervals later still nothing is there twice, and then no check comes for
four intervals (the broker holds no open transaction). Kills that landed mid-commit (with the producer's
EndTransaction calls in flight at the SIGKILL) are counted and printed, with the kills that cut a check answer, the
EndTransaction calls that failed and the decided transactions that had to be checked back.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final, cast

import pytest
from mq_client.producer import Message, ProducerConfig
from mq_client.producer.transaction import LocalTransactionState, TransactionMQProducer
from mq_common.codec import MessageExt
from mq_common.protocol import TopicConfig
from mq_common.protocol.transaction import EndTransactionRequestHeader
from mq_local.testing import read_all, unique_topic
from mq_local.topics import create_topic_on_cluster
from single_broker_cluster import SingleBrokerCluster

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(900)]

PRODUCER_GROUP: Final = "tx_kill_pg"
QUEUES: Final = 4
WORKERS: Final = 6
CHECK_ENV: Final = {
    "MQ_BROKER_TRANSACTION_TIMEOUT_MS": "1000",
    "MQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS": "500",
    "MQ_BROKER_TRANSACTION_CHECK_MAX": "1000",  # checks while the producer reconnects reach nobody: never discard
}
ROUND_S: Final = (1.0, 3.0)
"""How long a round sends before the SIGKILL."""
AGAIN_AFTER_S: Final = (0.0, 0.3)
LOCAL_TX_S: Final = (0.0, 0.02)
"""How long a local transaction takes (spreads the EndTransaction calls over the round)."""
RESOLVE_DEADLINE_S: Final = 120.0
SETTLE_S: Final = 3.0
"""After everything was answered: six check intervals more, nothing may come twice."""
QUIET_S: Final = 2.0
"""Then four check intervals without a check: the broker holds no open transaction."""


class Outcome(Enum):
    COMMIT = LocalTransactionState.COMMIT_MESSAGE
    ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE


def transaction_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_TRANSACTION_ROUNDS", "4")))


def seeded(name: str) -> random.Random:
    return random.Random(f"{name}-{os.environ.get('MQ_CHAOS_SEED', '')}")


@dataclass
class TxLedger:
    """Every transaction by number: what its local transaction said, what its check answers, what the checks and
    EndTransaction calls did."""

    attempted: set[int] = field(default_factory=set)
    local: dict[int, LocalTransactionState] = field(default_factory=dict)  # local transactions that ran
    open_answer: dict[int, Outcome] = field(default_factory=dict)  # drawn at send, for the UNKNOW ones
    unknow_first: set[int] = field(default_factory=set)  # open ones that answer UNKNOW on their first check
    checks: Counter[int] = field(default_factory=Counter)
    answered: dict[int, Outcome] = field(default_factory=dict)  # a check answered COMMIT or ROLLBACK
    by_uniq_key: dict[str, int] = field(default_factory=dict)
    ends_in_flight: int = 0  # the producer's own EndTransaction calls (not check answers) now
    answers_in_flight: int = 0  # check answers (EndTransaction fromTransactionCheck) now
    ends_failed: int = 0
    checked_answers_failed: int = 0

    def outcome(self, n: int) -> Outcome:
        """The transaction's durable outcome (what the check listener answers, after any UNKNOW)."""
        state = self.local.get(n)
        if state is None:
            return Outcome.ROLLBACK  # the half send failed: no local transaction ran
        if state is LocalTransactionState.UNKNOW:
            return self.open_answer[n]
        return Outcome(state)

    def expected(self) -> set[int]:
        return {n for n in self.local if self.outcome(n) is Outcome.COMMIT}

    def open_unanswered(self) -> list[int]:
        return sorted(n for n, s in self.local.items() if s is LocalTransactionState.UNKNOW and n not in self.answered)


class Listener:
    """The local transaction and the check listener over a TxLedger (see the module)."""

    def __init__(self, ledger: TxLedger, rng: random.Random) -> None:
        self.ledger = ledger
        self.rng = rng

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        n, state = cast(tuple[int, LocalTransactionState], arg)
        await asyncio.sleep(self.rng.uniform(*LOCAL_TX_S))
        self.ledger.local[n] = state
        return state

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        n = int(msg.body.decode().removeprefix("tx-"))
        if msg.uniq_key:
            self.ledger.by_uniq_key[msg.uniq_key] = n
        self.ledger.checks[n] += 1
        if n in self.ledger.unknow_first and self.ledger.checks[n] == 1:
            return LocalTransactionState.UNKNOW
        return self.ledger.outcome(n).value


def watch_end_transaction(producer: TransactionMQProducer, ledger: TxLedger) -> None:
    """Count the producer's EndTransaction calls in flight and failed, and record the check answers the broker
    took (wraps DefaultMQProducer.end_transaction of this one producer)."""
    inner = producer.producer.end_transaction

    async def end_transaction(
        topic: str, broker_name: str, header: EndTransactionRequestHeader, timeout_ms: int | None = None
    ) -> str:
        if header.from_transaction_check:
            n = ledger.by_uniq_key.get(header.transaction_id)
            if n is not None:  # a kill may cut the answer after the broker stored it: then it is never checked again
                ledger.answered[n] = ledger.outcome(n)
            ledger.answers_in_flight += 1
            try:
                return await inner(topic, broker_name, header, timeout_ms)
            except Exception:
                ledger.checked_answers_failed += 1
                raise
            finally:
                ledger.answers_in_flight -= 1
        ledger.ends_in_flight += 1
        try:
            return await inner(topic, broker_name, header, timeout_ms)
        except Exception:
            ledger.ends_failed += 1
            raise
        finally:
            ledger.ends_in_flight -= 1

    setattr(producer.producer, "end_transaction", end_transaction)  # noqa: B010  (an instance's method)


async def sender(
    producer: TransactionMQProducer, topic: str, ledger: TxLedger, numbers: Iterator[int], rng: random.Random,
    stop: asyncio.Event,
) -> None:  # fmt: skip
    """Transactions until ``stop``; a failed one (the broker is down) is left to the check-back."""
    while not stop.is_set():
        n = next(numbers)
        draw = rng.random()
        if draw < 0.4:
            state = LocalTransactionState.COMMIT_MESSAGE
        elif draw < 0.7:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            state = LocalTransactionState.UNKNOW
            ledger.open_answer[n] = rng.choice([Outcome.COMMIT, Outcome.ROLLBACK])
            if rng.random() < 1 / 3:
                ledger.unknow_first.add(n)
        ledger.attempted.add(n)
        try:
            await producer.send_message_in_transaction(Message(topic, f"tx-{n}".encode()), (n, state))
        except Exception:
            await asyncio.sleep(0.2)  # the broker is down: try again soon


async def delivered(cluster: SingleBrokerCluster, topic: str) -> Counter[int]:
    records = await read_all(cluster.namesrv_addr, topic)
    return Counter(int(m.body.decode().removeprefix("tx-")) for _, m in records)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SingleBrokerCluster]:
    with SingleBrokerCluster(tmp_path / "data", CHECK_ENV) as started:
        yield started


async def test_sigkill_with_open_transactions(cluster: SingleBrokerCluster) -> None:
    rng = seeded("transaction-kill")
    topic = unique_topic("tx_kill")
    await create_topic_on_cluster(cluster.namesrv_addr, TopicConfig(topic, QUEUES, QUEUES), cluster.spec.cluster_name)
    ledger = TxLedger()
    config = ProducerConfig(producer_group=PRODUCER_GROUP, retry_times_when_send_failed=0)
    producer = TransactionMQProducer.connect(config, [cluster.namesrv_addr], Listener(ledger, rng))
    watch_end_transaction(producer, ledger)
    await producer.start()
    kills = 0
    mid_commit_kills = 0
    ends_cut = 0  # EndTransaction calls in flight at a SIGKILL, all kills
    mid_answer_kills = 0  # kills with a check answer in flight
    numbers = itertools.count()
    try:
        for round_no in range(transaction_rounds()):
            stop = asyncio.Event()
            workers = [
                asyncio.create_task(sender(producer, topic, ledger, numbers, random.Random(rng.random()), stop))
                for _ in range(WORKERS)
            ]
            await asyncio.sleep(rng.uniform(*ROUND_S))
            for again in range(2 if round_no % 2 == 1 else 1):
                if again:
                    await asyncio.sleep(rng.uniform(*AGAIN_AFTER_S))
                in_flight = ledger.ends_in_flight
                mid_answer_kills += ledger.answers_in_flight > 0
                await asyncio.to_thread(cluster.kill_broker)
                kills += 1
                mid_commit_kills += in_flight > 0
                ends_cut += in_flight
                await asyncio.to_thread(cluster.start_broker)
            stop.set()
            await asyncio.gather(*workers)
        began = time.monotonic()
        while ledger.open_unanswered() or not ledger.expected() <= set(await delivered(cluster, topic)):
            assert time.monotonic() - began < RESOLVE_DEADLINE_S, (
                f"unresolved: open {ledger.open_unanswered()[:10]}, missing "
                f"{sorted(ledger.expected() - set(await delivered(cluster, topic)))[:10]}; checks "
                f"{ledger.checks.total()}, answered {len(ledger.answered)}"
            )
            await asyncio.sleep(0.5)
        await asyncio.sleep(SETTLE_S)
        checks = ledger.checks.total()
        await asyncio.sleep(QUIET_S)
        found = await delivered(cluster, topic)
        assert ledger.checks.total() == checks, "still checked: the broker holds open transactions"
    finally:
        await producer.shutdown()
    expected = ledger.expected()
    assert sorted(n for n, times in found.items() if times > 1) == [], "delivered twice"
    assert sorted(set(found) - expected) == [], "delivered but rolled back (or never sent)"
    assert sorted(expected - set(found)) == [], "committed but lost"
    opened = [n for n, s in ledger.local.items() if s is LocalTransactionState.UNKNOW]
    assert [n for n in opened if ledger.checks[n] < 1 + (n in ledger.unknow_first)] == [], "open but not checked"
    decided_checked = [n for n, s in ledger.local.items() if s is not LocalTransactionState.UNKNOW and ledger.checks[n]]
    failed_sends = len(ledger.attempted) - len(ledger.local)
    rolled_back = len(ledger.local) - len(expected)
    print(
        f"\ntransaction kill rounds: {transaction_rounds()}, kills {kills}, mid-commit kills {mid_commit_kills} "
        f"({ends_cut} EndTransaction calls cut, {ledger.ends_failed} failed), {mid_answer_kills} with a check answer "
        f"in flight ({ledger.checked_answers_failed} failed); transactions {len(ledger.local)} "
        f"(+{failed_sends} half sends failed): {len(expected)} delivered exactly once, {rolled_back} rolled back "
        f"never delivered; {len(opened)} open all checked ({sum(ledger.checks[n] for n in opened)} checks), "
        f"{len(decided_checked)} decided ones checked back after their EndTransaction was lost or refused"
    )
