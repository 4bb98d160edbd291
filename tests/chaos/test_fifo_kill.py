"""kill -9 proof for FIFO (orderly) consumption (issue 33): a FIFO topic (``message.type=FIFO``, 4 queues) holds
12 message groups x ``30 * rounds`` messages (SHARDING_KEY = the group, each group on one queue, sent in order);
an orderly POP group (consumeMessageOrderly=true) reads it with two consumer processes, batches of 8, 2 s invisible
time, each message handled then acked. One of them is SIGKILLed while it holds received, un-acked messages,
``MQ_CHAOS_FIFO_ROUNDS`` times (default 6; ``make chaos``: 10), and replaced by a new process at once; the broker
stays up. The survivor and the replacement carry on: the killed one's queue is blocked until the held messages'
invisible time ends, then they come again (delivery attempt + 1) ahead of anything later in their queue. Two
variants: v1, mq_client's SimpleConsumer on the broker's PopMessage (fifo_consumer_proc.py, which acks each message
or, half of the time, the whole batch at once; name server + broker from single_broker_cluster.py), and v2, the
official Python SDK's SimpleConsumer through the gateway (fifo_sdk_consumer_proc.py, run in the SDK's environment
from ``make sdks``; a local cluster with the gateway).

The consumers log every receipt (with its process and batch), every ack about to be sent and every ack that
returned into one shared file, in the order they happened. Judged per message group over that log: a message is
handed out only when every earlier received message of its group had its ack sent or came in the same batch (nothing
later is handed out while an earlier one is un-acked and invisible, also not to the other process), and a message
received for the first time is the group's next one (nothing skipped). A receipt of a message received before is a
duplicate; it is allowed only for a message whose ack never returned, and each is counted as "in flight at a kill"
(the killed process had received it and its ack had not returned) or "other" (its ack was refused: its invisible time
had passed). At the end every message was acked (none went to %DLQ%; an ack sent by a process killed before it
returned counts when the message never came again) and three seconds later nothing came again.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest
from mq_client.consumer_admin_calls import ConsumerAdminCalls
from mq_common.channels import ChannelPool
from mq_common.codec import encode_properties
from mq_common.constants import MessageConst
from mq_common.protocol import SendMessageRequestHeader, SubscriptionGroupConfig, TopicConfig
from mq_local.cluster import LocalCluster, inherited_env
from mq_local.testing import spec_for_tests, unique_topic
from mq_local.topics import create_topic_on_cluster
from single_broker_cluster import SingleBrokerCluster
from timer_testkit import broker_client, frames, send_frames

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(900)]

GROUP: Final = "fifo_kill_group"
QUEUES: Final = 4
MESSAGE_GROUPS: Final = 12
PER_GROUP_PER_ROUND: Final = 30
CONSUMERS: Final = 2
KILL_AFTER_S: Final = (0.8, 2.0)
HOLDING_WAIT_S: Final = 5.0
"""How long a round waits for its victim to hold an un-acked message before it gives up killing."""
DRAIN_DEADLINE_S: Final = 90.0
CONSUMER_SCRIPT: Final = Path(__file__).resolve().parent / "fifo_consumer_proc.py"
SDK_CONSUMER_SCRIPT: Final = Path(__file__).resolve().parent / "fifo_sdk_consumer_proc.py"
SDK_PYTHON: Final = Path(__file__).resolve().parents[2] / ".tools/rmq5-python/bin/python"


def fifo_rounds() -> int:
    return max(1, int(os.environ.get("MQ_CHAOS_FIFO_ROUNDS", "6")))


def seeded(name: str) -> random.Random:
    return random.Random(f"{name}-{os.environ.get('MQ_CHAOS_SEED', '')}")


def key_of(group: int, seq: int) -> str:
    return f"G{group:02d}-{seq:05d}"


def parse_key(key: str) -> tuple[int, int]:
    group, seq = key[1:].split("-")
    return int(group), int(seq)


def queue_of(group: str) -> int:
    """A stable queue per message group (crc32, the same in every language)."""
    return zlib.crc32(group.encode()) % QUEUES


def fifo_request(topic: str, group: int, seq: int) -> SendMessageRequestHeader:
    name = f"group-{group}"
    properties = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: key_of(group, seq), MessageConst.SHARDING_KEY: name}
    return SendMessageRequestHeader(
        topic=topic, body=f"{name}:{seq}".encode(), producer_group="fifo_pg", queue_id=queue_of(name),
        born_timestamp_ms=int(time.time() * 1000), properties=encode_properties(properties),
    )  # fmt: skip


@dataclass
class Consumers:
    """The consumer processes (name -> process); every one started is reaped at the end."""

    command: list[str]
    """The consumer's command before its per-process arguments (<endpoint> <topic> <group> <log> <name> <seed>)."""
    endpoint: str
    env: dict[str, str]
    topic: str
    log_path: Path
    tmp_path: Path
    live: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started: int = 0

    def start(self) -> str:
        name = f"c{self.started}"
        self.started += 1
        argv = [
            *self.command, self.endpoint, self.topic, GROUP, str(self.log_path), name,
            f"{name}-{os.environ.get('MQ_CHAOS_SEED', '')}",
        ]  # fmt: skip
        with (self.tmp_path / f"{name}.out").open("wb") as out:
            self.live[name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        return name

    def kill(self, name: str) -> None:
        proc = self.live.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def close(self) -> None:
        for name in list(self.live):
            self.kill(name)


def events(log_path: Path) -> list[list[str]]:
    if not log_path.exists():
        return []
    return [ln.split() for ln in log_path.read_text().splitlines() if ln.strip()]


def holding(log: list[list[str]], name: str) -> set[str]:
    """What ``name`` received and has not acked (its ack did not return)."""
    held: set[str] = set()
    for event in log:
        if event[1] != name or event[0] not in ("R", "A"):
            continue
        if event[0] == "R":
            held.add(event[2])
        else:
            held.discard(event[2])
    return held


def consumed(log: list[list[str]], in_flight_at_kills: set[str]) -> set[str]:
    """Every message whose ack returned, or was sent by a process killed before it returned (the broker took it:
    such a message is not handed out again, and the judge checks that what follows it came after the ack was sent).
    """
    acked = {e[2] for e in log if e[0] == "A"}
    return acked | ({e[2] for e in log if e[0] == "S"} & in_flight_at_kills)


@dataclass
class FifoVerdict:
    receipts: int = 0
    acked: set[str] = field(default_factory=set)
    duplicates_in_flight: int = 0
    duplicates_other: int = 0
    violations: list[str] = field(default_factory=list)
    max_attempt: int = 1


@dataclass
class GroupState:
    """One message group while the log is read: the next seq never received, what was received (seq -> the
    (process, batch) of its last receipt), what has an ack sent (S) and what an ack returned for (A)."""

    next_new: int = 0
    last_batch: dict[int, tuple[str, str]] = field(default_factory=dict)
    ack_sent: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)


def judge(log: list[list[str]], in_flight_at_kills: set[str]) -> FifoVerdict:
    """The per-group verdict over the shared log (see the module). A receipt of seq ``s`` in (process, batch) is in
    order when every earlier received message of its group either had its ack sent or came in the same batch, and
    nothing is skipped when a never-received ``s`` is the group's next one."""
    out = FifoVerdict()
    groups: dict[int, GroupState] = {}
    for event in log:
        kind, name, key = event[:3]
        g, seq = parse_key(key)
        state = groups.setdefault(g, GroupState())
        if kind == "S":
            state.ack_sent.add(seq)
        elif kind == "F":
            state.ack_sent.discard(seq)
        elif kind == "A":
            state.acked.add(seq)
            out.acked.add(key)
        elif kind == "R":
            out.receipts += 1
            out.max_attempt = max(out.max_attempt, int(event[3]))
            batch = (name, event[4])
            blocking = [t for t, b in state.last_batch.items() if t < seq and t not in state.ack_sent and b != batch]
            if blocking:
                out.violations.append(f"{key} handed out while {g}/{min(blocking)} was un-acked elsewhere")
            if seq in state.last_batch:  # a redelivery
                if seq in state.acked:
                    out.violations.append(f"{key} redelivered after its ack returned")
                if key in in_flight_at_kills:
                    out.duplicates_in_flight += 1
                else:
                    out.duplicates_other += 1
                state.ack_sent.discard(seq)
            elif seq != state.next_new:
                out.violations.append(f"{key} received while group {g} expected {state.next_new} (skipped)")
            state.next_new = max(state.next_new, seq + 1)
            state.last_batch[seq] = batch
    return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SingleBrokerCluster]:
    with SingleBrokerCluster(tmp_path / "data", {}) as started:
        yield started


@pytest.fixture
def gateway_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Name server, one broker, the gateway (its shortest receive invisible time lowered to the consumers' 2 s)."""
    gateway = {"MQ_GATEWAY_MIN_INVISIBLE_TIME_MS_FOR_RECV": "2000"}
    with LocalCluster(spec_for_tests(tmp_path / "data", broker_groups=1, gateway_env=gateway)) as started:
        yield started


async def test_sigkill_fifo_consumer_mid_queue(cluster: SingleBrokerCluster, tmp_path: Path) -> None:
    """v1: mq_client's SimpleConsumer (fifo_consumer_proc.py) on the broker's orderly POP."""
    command = [sys.executable, str(CONSUMER_SCRIPT)]
    await fifo_kill_rounds(
        cluster.namesrv_addr, cluster.broker_addr, cluster.spec.cluster_name, command, inherited_env(), tmp_path, "v1"
    )


async def test_sigkill_sdk_fifo_consumer_mid_queue(gateway_cluster: LocalCluster, tmp_path: Path) -> None:
    """v2: the official Python SDK's SimpleConsumer (fifo_sdk_consumer_proc.py) through the gateway."""
    assert SDK_PYTHON.exists(), f"the RocketMQ 5 SDKs are not installed: run `make sdks` (no {SDK_PYTHON})"
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")} | {
        "HOME": str(tmp_path / "home")  # the SDK logs under $HOME/logs
    }
    await fifo_kill_rounds(
        gateway_cluster.namesrv_addr, gateway_cluster.broker_addrs["broker-a"], gateway_cluster.spec.cluster_name,
        [str(SDK_PYTHON), str(SDK_CONSUMER_SCRIPT)], env, tmp_path, "v2 SDK", gateway_cluster.gateway_addr,
    )  # fmt: skip


async def fifo_kill_rounds(
    namesrv_addr: str, broker_addr: str, cluster_name: str, command: list[str], env: dict[str, str], tmp_path: Path,
    label: str, gateway_addr: str | None = None,
) -> None:  # fmt: skip
    """The rounds (see the module) with consumers run as ``command``; they connect to ``gateway_addr`` when given,
    else to the name server."""
    rng = seeded("fifo-kill")
    rounds = fifo_rounds()
    per_group = PER_GROUP_PER_ROUND * rounds
    topic = unique_topic("fifo_kill")
    fifo = TopicConfig(topic, QUEUES, QUEUES, attributes={"+message.type": "FIFO"})
    await create_topic_on_cluster(namesrv_addr, fifo, cluster_name)
    pool = ChannelPool()
    try:
        group_config = SubscriptionGroupConfig(GROUP, consume_message_orderly=True, retry_max_times=16)
        await ConsumerAdminCalls(pool).update_subscription_group(broker_addr, group_config)
    finally:
        await pool.close()
    requests = [fifo_request(topic, g, s) for s in range(per_group) for g in range(MESSAGE_GROUPS)]
    async with broker_client() as client:
        await send_frames(client, broker_addr, frames(requests, 256), 1)  # one frame at a time: in order
    all_keys = {key_of(g, s) for g in range(MESSAGE_GROUPS) for s in range(per_group)}

    log_path = tmp_path / "fifo-events.log"
    consumers = Consumers(command, gateway_addr or namesrv_addr, env, topic, log_path, tmp_path)
    in_flight_at_kills: set[str] = set()
    kills = 0
    try:
        for _ in range(CONSUMERS):
            consumers.start()
        for _ in range(rounds):
            await asyncio.sleep(rng.uniform(*KILL_AFTER_S))
            victim = rng.choice(sorted(consumers.live))
            deadline = time.monotonic() + HOLDING_WAIT_S
            while not (held := holding(events(log_path), victim)) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.005)  # the log file is the only signal
            if not held:
                break  # the backlog is done: nothing left to hold
            consumers.kill(victim)
            kills += 1
            in_flight_at_kills |= holding(events(log_path), victim)  # an ack may have returned meanwhile
            consumers.start()
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while missing := all_keys - consumed(events(log_path), in_flight_at_kills):
            assert time.monotonic() < deadline, f"not acked: {len(missing)} {sorted(missing)[:10]}"
            await asyncio.sleep(0.5)
        await asyncio.sleep(3.0)  # past an invisible time: nothing acked may come again
    finally:
        consumers.close()
    log = events(log_path)
    found = judge(log, in_flight_at_kills)
    assert found.violations == [], found.violations[:10]
    assert consumed(log, in_flight_at_kills) == all_keys
    acks_cut = len(all_keys - found.acked)
    assert kills >= 1, "no consumer was killed while it held a message"
    print(
        f"\nfifo kill rounds ({label}): {rounds}, kills {kills} (each while holding un-acked messages, "
        f"{len(in_flight_at_kills)} in flight in all); {len(all_keys)} messages in {MESSAGE_GROUPS} groups consumed "
        f"in order, none skipped, {found.receipts} receipts: {found.duplicates_in_flight} redeliveries of in-flight "
        f"messages, {found.duplicates_other} others (ack refused); {acks_cut} acks sent but cut by the kill (taken, "
        f"never handed out again); max delivery "
        f"attempt {found.max_attempt}"
    )
