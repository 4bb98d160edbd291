"""Broker-b SIGKILLed under merged MessageBatches: concurrent one-topic SendBatch calls through the gateway with
MessageBatch merging (always on, mq_gateway.coalescer), fault isolation on.

Timeline: 24 clients each send SendBatch calls of 50 plain messages of one topic without a sharding key (so the
gateway's merger may join concurrent calls bound for one broker into one SEND_BATCH_MESSAGE), each body naming its
client and that client's sequence number, ``MQ_FAULT_BATCH_MESSAGES`` messages in all (default 20,000). Once a
quarter of them are acknowledged, broker-b is SIGKILLed by PID while the clients keep sending; merged calls in
flight to it fail with a transport error and each caller's part is retried on its own (they merge again on
broker-a). After the publish broker-b is restarted from its SYNC_FLUSH store, and every queue of both brokers is
read back.

Checks:

- every acknowledged message (code 0) is stored where its SendResult says (broker, queue id, queue offset), and
  each acknowledged SendBatch's messages sit together, in order, on one queue — the merger split the merged answer
  back correctly;
- an acknowledged message is stored exactly once, except the at-least-once case of RocketMQ: a call in flight to
  broker-b when it died may have been stored there before the kill although the gateway saw a transport error and
  stored (and acknowledged) it again on broker-a; such extra copies must be on broker-b and belong to calls in
  flight at the kill (their number is printed);
- the only failed messages are those whose send budget ran out or that carry a transport code (-1004, -1006); a
  failed message may still be stored (printed, not asserted);
- SendBatch calls started after the kill are acknowledged on broker-a only, and broker-b stores nothing of them;
- the coalescer merged, seen from outside through the gateway's Prometheus ``/metrics`` (its stats have no
  external accessor): ``mq_gateway_coalesced_batch_messages`` observes every broker call with its message count,
  so its ``_count`` must be below the number of SendBatch calls (``mq_gateway_send_latency_ms{mode="batch"}``)
  and some broker calls must carry more than 64 messages (two or more SendBatch calls of 50); and
  ``mq_gateway_broker_call_latency_ms{result="error"}`` shows the kill failed at least one broker call.
"""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest
from gateway_faults_testkit import (
    RPC_TIMEOUT_S,
    SendRecord,
    brokers_of,
    budget_ran_out,
    env_int,
    fault_spec,
    gateway_stub,
)
from mq.gateway.v1 import gateway_pb2
from mq_common.response_code import ResponseCode
from mq_local.cluster import LocalCluster
from mq_local.ports import free_port
from mq_local.testing import make_topic, read_all
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

if TYPE_CHECKING:
    from gateway_faults_testkit import GatewayStub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MESSAGES: Final = env_int("MQ_FAULT_BATCH_MESSAGES", 20_000)
BATCH_MESSAGES: Final = 50
CLIENTS: Final = 24
CALLS: Final = -(-MESSAGES // BATCH_MESSAGES)
KILL_AFTER_ACKED: Final = MESSAGES // 4
PUBLISH_DEADLINE_S: Final = max(90.0, MESSAGES / 200)
# A BATCH_SIZE_BUCKETS bound between one SendBatch's messages and two: a broker call above it was merged.
MERGED_ABOVE_MESSAGES: Final = 64
TRANSPORT_CODES: Final = frozenset({ResponseCode.RPC_SEND_TO_CHANNEL_FAILED, ResponseCode.RPC_TIME_OUT})
METRICS_SCRAPE_TIMEOUT_S: Final = 10.0
assert BATCH_MESSAGES <= MERGED_ABOVE_MESSAGES < 2 * BATCH_MESSAGES
assert CLIENTS * BATCH_MESSAGES < MESSAGES // 4, "the kill comes while every client is still sending"

Location = tuple[str, int, int]  # broker name, queue id, queue offset


@dataclass(frozen=True, slots=True)
class BatchCall:
    """One SendBatch: its messages' indices ``first`` .. ``first + count - 1``, start/finish (monotonic seconds)."""

    first: int
    count: int
    started_s: float
    finished_s: float


class BatchPublisher:
    """CLIENTS concurrent callers of SendBatch, each taking the next call until CALLS are made or ``deadline_s``
    (monotonic) passes. Message ``first + i`` of a call has body ``km-c<client>-<client's sequence>``.
    ``kill_now`` is set once KILL_AFTER_ACKED messages are acknowledged."""

    def __init__(self, stub: GatewayStub, topic: str) -> None:
        self.stub = stub
        self.topic = topic
        self.records: list[SendRecord] = []
        self.calls: list[BatchCall] = []
        self.bodies: dict[int, bytes] = {}
        self.kill_now = asyncio.Event()
        self._acked = 0
        self._next_call = 0

    async def run(self, deadline_s: float) -> list[SendRecord]:
        await asyncio.gather(*(self._client(c, deadline_s) for c in range(CLIENTS)))
        return sorted(self.records, key=lambda r: r.index)

    async def _client(self, client: int, deadline_s: float) -> None:
        sequence = 0
        while self._next_call < CALLS and time.monotonic() < deadline_s:
            first = self._next_call * BATCH_MESSAGES
            self._next_call += 1
            bodies = [b"km-c%02d-%06d" % (client, sequence + i) for i in range(min(BATCH_MESSAGES, MESSAGES - first))]
            sequence += len(bodies)
            request = gateway_pb2.SendBatchRequest(
                messages=[gateway_pb2.Message(topic=self.topic, body=body) for body in bodies]
            )
            started = time.monotonic()
            results = (await self.stub.SendBatch(request, timeout=RPC_TIMEOUT_S)).results
            finished = time.monotonic()
            assert len(results) == len(bodies), (len(results), results[0].remark if results else "")
            self.calls.append(BatchCall(first, len(bodies), started, finished))
            for i, (body, r) in enumerate(zip(bodies, results, strict=True)):
                self.bodies[first + i] = body
                self.records.append(
                    SendRecord(
                        first + i, started, finished, r.code, r.remark, r.broker_name, r.queue_id, r.queue_offset
                    )
                )
            self._acked += sum(1 for r in results if r.code == ResponseCode.SUCCESS)
            if self._acked >= KILL_AFTER_ACKED:
                self.kill_now.set()


class KillController:
    """SIGKILLs broker-b by PID once ``kill_now`` is set (TimeoutError when it is not within the publish
    deadline). The signal goes out on the test's loop, so no SendBatch starts between the signal and
    ``killed_s``; waiting for the exit runs in a thread."""

    def __init__(self, cluster: LocalCluster, kill_now: asyncio.Event) -> None:
        self.cluster = cluster
        self.kill_now = kill_now
        self.killed_s = 0.0
        self.kill_status: int | None = None

    async def run(self) -> None:
        await asyncio.wait_for(self.kill_now.wait(), PUBLISH_DEADLINE_S)
        self.cluster.brokers["broker-b"].send_signal(signal.SIGKILL)
        self.killed_s = time.monotonic()
        self.kill_status = await asyncio.to_thread(self.cluster.kill_broker, "broker-b", signal.SIGKILL)


async def test_sigkill_of_broker_b_under_merged_message_batches(tmp_path: Path) -> None:
    metrics_port = free_port()
    spec = fault_spec(
        tmp_path / "data",
        isolation=True,
        metrics_ports={"gateway": metrics_port},
    )
    with LocalCluster(spec) as cluster:
        topic = await make_topic(cluster, "fault_kill_merged")
        async with gateway_stub(cluster.gateway_addr) as stub:
            publisher = BatchPublisher(stub, topic)
            controller = KillController(cluster, publisher.kill_now)
            began = time.monotonic()
            async with asyncio.TaskGroup() as tasks:  # a failure of one cancels the other
                tasks.create_task(controller.run())
                publish = tasks.create_task(publisher.run(began + PUBLISH_DEADLINE_S))
            publish_s = time.monotonic() - began
            records = publish.result()
        metrics = await asyncio.to_thread(scrape, metrics_port)
        await asyncio.to_thread(cluster.start_broker, "broker-b")
        stored = await read_all(cluster.namesrv_addr, topic, max_pulls_per_queue=1_000)

    assert controller.kill_status == -signal.SIGKILL
    assert len(records) == MESSAGES, f"{len(records)} of {MESSAGES} sent within {PUBLISH_DEADLINE_S:.0f} s"
    killed_s = controller.killed_s
    in_flight = [c for c in publisher.calls if c.started_s <= killed_s < c.finished_s]
    stored_at = {(q.broker_name, q.queue_id, m.queue_offset): m.body for q, m in stored}
    assert len(stored_at) == len(stored)
    locations: defaultdict[bytes, list[Location]] = defaultdict(list)
    for location, body in stored_at.items():
        locations[body].append(location)
    assert set(locations) <= set(publisher.bodies.values()), "a stored body that was never sent"

    acked = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    extra, extra_calls = _check_acked(acked, publisher, stored_at, locations, killed_s)
    _check_calls(publisher, records)
    failed_stored = sum(1 for r in failed if publisher.bodies[r.index] in locations)
    merged = _merge_figures(metrics)
    print(
        f"\n[fault kill merged] {len(records)} messages in {len(publisher.calls)} SendBatch calls in {publish_s:.1f} s:"
        f" {len(acked)} acknowledged {dict(brokers_of(records))}, {len(failed)} failed"
        f" ({failed_stored} of them stored), {len(in_flight)} calls in flight at the kill,"
        f" {extra} extra copies on broker-b of {extra_calls} calls acknowledged on broker-a; gateway: {merged}"
    )
    bad_failures = [(r.code, r.remark) for r in failed if not (budget_ran_out(r) or r.code in TRANSPORT_CODES)]
    assert not bad_failures, bad_failures[:5]

    before = [r for r in records if r.finished_s <= killed_s]
    after_kill = [r for r in records if r.started_s > killed_s]
    assert set(brokers_of(before)) == {"broker-a", "broker-b"}
    assert after_kill, "nothing was sent after the kill"
    assert set(brokers_of(after_kill)) == {"broker-a"}
    sent_after_kill = {publisher.bodies[r.index] for r in after_kill}
    on_b = {body for (broker, _, _), body in stored_at.items() if broker == "broker-b"}
    assert not on_b & sent_after_kill, "broker-b stored a message sent after it was killed"

    assert merged["batch_calls"] == len(publisher.calls)
    assert merged["broker_calls"] < merged["batch_calls"], merged
    assert merged["merged_calls"] > 0, merged
    assert merged["failed_broker_calls"] >= 1, merged


def _check_acked(
    acked: list[SendRecord],
    publisher: BatchPublisher,
    stored_at: dict[Location, bytes],
    locations: dict[bytes, list[Location]],
    killed_s: float,
) -> tuple[int, int]:
    """Every acknowledged message is stored where its result says; a second copy only on broker-b for a call in
    flight at the kill (acknowledged on broker-a after its retry). Returns the number of such extra copies and of
    the SendBatch calls they belong to."""
    misplaced = [
        (publisher.bodies[r.index], (r.broker_name, r.queue_id, r.queue_offset))
        for r in acked
        if stored_at.get((r.broker_name, r.queue_id, r.queue_offset)) != publisher.bodies[r.index]
    ]
    assert not misplaced, f"{len(misplaced)} acknowledged messages not stored where reported: {misplaced[:5]}"
    extra = 0
    calls: set[int] = set()
    for r in acked:
        copies = locations[publisher.bodies[r.index]]
        if len(copies) == 1:
            continue
        others = [c for c in copies if c != (r.broker_name, r.queue_id, r.queue_offset)]
        at_least_once = (
            r.broker_name == "broker-a"
            and r.started_s <= killed_s < r.finished_s
            and all(broker == "broker-b" for broker, _, _ in others)
        )
        assert at_least_once, f"acknowledged {publisher.bodies[r.index]!r} at {r.broker_name} is stored at {copies}"
        extra += len(others)
        calls.add(r.index // BATCH_MESSAGES)
    return extra, len(calls)


def _check_calls(publisher: BatchPublisher, records: list[SendRecord]) -> None:
    """Each SendBatch acknowledged whole sits on one queue at consecutive offsets (one MessageBatch)."""
    for call in publisher.calls:
        rs = records[call.first : call.first + call.count]
        assert [r.index for r in rs] == list(range(call.first, call.first + call.count))
        if not all(r.ok for r in rs):
            continue
        assert len({(r.broker_name, r.queue_id) for r in rs}) == 1, [(r.broker_name, r.queue_id) for r in rs]
        assert [r.queue_offset for r in rs] == list(range(rs[0].queue_offset, rs[0].queue_offset + call.count))


def scrape(port: int) -> list[Sample]:
    """Every sample of the gateway's ``/metrics`` on 127.0.0.1:``port`` (no proxy). Blocking: run in a thread."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=METRICS_SCRAPE_TIMEOUT_S) as response:
        text = response.read().decode("utf-8")
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _total(samples: list[Sample], name: str, **labels: str) -> int:
    return int(sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())))


def _merge_figures(samples: list[Sample]) -> dict[str, int]:
    """SendBatch calls, broker calls, broker calls carrying more than one SendBatch, failed broker calls."""
    broker_calls = _total(samples, "mq_gateway_coalesced_batch_messages_count")
    unmerged = _total(samples, "mq_gateway_coalesced_batch_messages_bucket", le=f"{float(MERGED_ABOVE_MESSAGES)}")
    return {
        "batch_calls": _total(samples, "mq_gateway_send_latency_ms_count", mode="batch"),
        "broker_calls": broker_calls,
        "merged_calls": broker_calls - unmerged,
        "failed_broker_calls": _total(samples, "mq_gateway_broker_call_latency_ms_count", result="error"),
        "messages_in_broker_calls": _total(samples, "mq_gateway_coalesced_batch_messages_sum"),
        "retries": _total(samples, "mq_gateway_send_retries_total"),
    }
